"""The rehearsal's judge on the two runs' facts as the runner hands them over (plain JSON):
what it concludes, and that a fact either run did not observe is listed as unseen and never
reported. The real runs on gloo ranks are tests/backends/local/test_rehearsal.py."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlpipe.judgements.rehearsal import judge


def _probe(rank, world, *, examples=256, batch=32, lr=0.1, steps=8, losses=None,
           digest="sha256:a", models=("DistributedDataParallel",)):
    return {"rank": rank, "world_size": world, "observed": True, "steps": steps,
            "examples": examples, "batch": batch, "lr": [lr],
            "losses": losses if losses is not None else [0.7 - 0.02 * i for i in range(24)],
            "models": list(models), "parameters": {"digest": digest, "count": 9, "norm": 3.0}}


def _run(world, probes, metrics=(), failure=None):
    ranks = [{"rank": r, "metrics": list(metrics) if r == 0 else [], "consumed": None,
              "population": None, "data_loaders": None, "reductions": []}
             for r in range(world)]
    return {"world_size": world, "failure": failure, "probe": probes, "coordination": [],
            "record": {"step": {"status": "succeeded"}, "ranks": ranks}, "folder": "w"}


def _metric(value, population="train, 256 examples", over=None):
    line = {"name": "loss", "value": value, "scope": "global", "population": population}
    if over is not None:
        line["reduced_over"] = over
    return line


ONE = _run(1, [_probe(0, 1)], [_metric(0.5)])


def _many(**kw):
    metric = kw.pop("metric", _metric(0.5, over=2))
    return _run(2, [_probe(0, 2, examples=128, batch=16, **kw),
                    _probe(1, 2, examples=128, batch=16, **kw)], [metric])


def test_a_coordinated_pair_of_runs_shows_no_difference():
    found = judge(ONE, _many(), step="train")
    assert found.diagnostics == [] and found.unseen == []
    assert all(row["same"] is not False for row in found.compared)


@pytest.mark.parametrize("many, code, fragment", [
    (_run(2, [_probe(0, 2, batch=16), _probe(1, 2, batch=16)], [_metric(0.5, over=2)]),
     "MP560", "the ranks trained on 512 examples together (rank 0: 256, rank 1: 256)"),
    (_run(2, [_probe(0, 2, examples=128), _probe(1, 2, examples=128)], [_metric(0.5, over=2)]),
     "MP561", "each optimiser step takes 64 examples (32 + 32 on the ranks) but 32"),
    (_many(losses=[0.7 - 0.01 * i for i in range(24)]), "MP562", "the training loss is"),
    (_many(metric=_metric(1.0, over=2)), "MP563", "2 times it: a sum over the ranks"),
    (_many(metric=_metric(0.5, "train, 128 examples", over=2)), "MP563",
     "describes population 'train, 128 examples' at world size 2"),
    (_run(2, [_probe(0, 2, examples=128, batch=16, models=["Linear"]),
              _probe(1, 2, examples=128, batch=16, digest="sha256:b", models=["Linear"])],
          [_metric(0.5, over=2)]),
     "MP564", "ranks 0, 1 trained a model no DistributedDataParallel wraps"),
    (_run(2, [], failure="rank 1 of 2 exited with code 1"), "MP565",
     "the step failed at world size 2 (runs at world size 1): rank 1 of 2 exited with code 1"),
])
def test_each_difference_has_its_code(many, code, fragment):
    found = judge(ONE, many, step="train")
    assert [d.code for d in found.diagnostics] == [code], [d.render() for d in found.diagnostics]
    assert fragment in found.diagnostics[0].message
    assert found.diagnostics[0].step == "train"


def test_a_learning_rate_scaled_with_the_global_batch_is_the_linear_scaling_rule():
    many = _run(2, [_probe(0, 2, examples=128, lr=0.2), _probe(1, 2, examples=128, lr=0.2)],
                [_metric(0.5, over=2)])
    found = judge(ONE, many, step="train")
    assert "MP561" not in [d.code for d in found.diagnostics]
    assert {"fact": "global batch", "world_size_1": 32, "world_size_2": 64, "same": True,
            "note": "the learning rate scaled with it"} in found.compared


def test_a_rank_the_probe_did_not_see_leaves_the_training_facts_unseen():
    many = _many()
    many["probe"] = many["probe"][:1]            # rank 1 wrote no facts
    found = judge(ONE, many, step="train")
    assert found.diagnostics == []
    assert found.unseen == [
        "examples seen: no training forward observed and no ids consumed",
        "global batch: no optimiser step after a training forward observed",
        "loss trajectory: no scalar backward observed",
        "parameters: no optimiser step observed on every rank"]


def test_without_torch_the_consumed_ids_still_count_the_examples():
    one = _run(1, [{"rank": 0, "world_size": 1, "observed": False, "why_not": "no torch"}])
    one["record"]["ranks"][0]["consumed"] = [str(i) for i in range(10)]
    many = _run(2, [])
    for part in many["record"]["ranks"]:
        part["consumed"] = [str(i) for i in range(10)]   # every rank took every id
    found = judge(one, many, step="train")
    assert [d.code for d in found.diagnostics] == ["MP560"]
    assert "(ids consumed (shard, record_consumed))" in found.diagnostics[0].message
    assert "metrics: no global metric logged" in found.unseen


@settings(max_examples=60)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(
                        ["examples", "batch", "lr", "losses", "parameters", "digest", "observed",
                         "rank", "models", "steps", "norm", "value", "scope", "metrics"]),
                        inner, max_size=4), max_leaves=12))
def test_the_judge_never_raises_on_facts_of_any_shape(junk):
    many = _many()
    many["probe"] = [junk, junk] if not isinstance(junk, list) else junk
    many["record"]["ranks"][0]["metrics"] = [junk]
    found = judge(ONE, many, step="train")
    assert isinstance(found.to_json(), dict)


def test_the_ranks_data_loaders_explain_examples_seen_twice():
    many = _run(2, [_probe(0, 2, batch=16), _probe(1, 2, batch=16)], [_metric(0.5, over=2)])
    for part in many["record"]["ranks"]:
        part["data_loaders"] = [{"sampler": "RandomSampler", "num_replicas": None,
                                 "dataset_size": 256, "whole": True, "passes": 8}]
    found = judge(ONE, many, step="train")
    assert [d.code for d in found.diagnostics] == ["MP560"]
    assert found.diagnostics[0].message.endswith(
        "each rank trained on the whole data set; every rank's DataLoader reads the whole data "
        "set (RandomSampler)")
