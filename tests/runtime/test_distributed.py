"""Runtime helpers: ranks from each launcher's variables, sharding, writers, records, metrics."""
import json

import pytest

from mlpipe.distribution import PyTorch
from mlpipe.errors import DistributedError
from mlpipe.judgements.coordination import check_coordination
from mlpipe.runtime import (
    all_reduce_metric,
    distributed,
    is_writer,
    local_rank,
    log_metric,
    mark_written,
    rank,
    record,
    shard,
    world_size,
)

LAUNCH = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "TF_CONFIG", "OMPI_COMM_WORLD_RANK",
          "OMPI_COMM_WORLD_SIZE", "MLPIPE_WRITERS", "MLPIPE_STEP_DIR")


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in LAUNCH:
        monkeypatch.delenv(name, raising=False)
    record.reset()
    yield
    record.reset()


def as_rank(monkeypatch, r, n, step_dir=None):
    monkeypatch.setenv("RANK", str(r))
    monkeypatch.setenv("WORLD_SIZE", str(n))
    record.reset()  # each simulated rank is a process of its own
    if step_dir is not None:
        monkeypatch.setenv("MLPIPE_STEP_DIR", str(step_dir))


def test_defaults_outside_a_launch():
    assert (rank(), world_size(), local_rank(), is_writer()) == (0, 1, 0, True)


def test_ranks_from_tf_config_and_openmpi(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2", "c:3"]},
                                                "task": {"type": "worker", "index": 2}}))
    assert (rank(), world_size()) == (2, 3)
    monkeypatch.delenv("TF_CONFIG")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "5")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "8")
    assert (rank(), world_size()) == (5, 8)


def test_shards_are_disjoint_and_cover_everything(monkeypatch):
    ids = [f"id{i}" for i in range(23)]
    parts = []
    for r in range(4):
        as_rank(monkeypatch, r, 4)
        parts.append(shard(ids, seed=1))
    assert sorted(i for part in parts for i in part) == sorted(ids)
    assert all(set(a).isdisjoint(b) for i, a in enumerate(parts) for b in parts[i + 1:])
    assert [len(p) for p in parts] == [6, 6, 6, 5]


def test_writer_policy_from_the_launcher(monkeypatch):
    monkeypatch.setenv("MLPIPE_WRITERS", json.dumps({"*": "rank0", "shards": "sharded", "log": 2}))
    as_rank(monkeypatch, 2, 4)
    assert (is_writer("model"), is_writer("shards"), is_writer("log")) == (False, True, True)
    as_rank(monkeypatch, 0, 4)
    assert (is_writer("model"), is_writer("log")) == (True, False)


def _ranks(monkeypatch, tmp_path, n, body):
    for r in range(n):
        as_rank(monkeypatch, r, n, tmp_path)
        body(r)


def test_coordination_passes_for_correct_sharding(monkeypatch, tmp_path):
    ids = [f"e{i}" for i in range(10)]

    def body(r):
        shard(ids)
        if is_writer("model"):
            mark_written("model")
        log_metric("loss_rank", 0.5 + r, scope="partial")
    _ranks(monkeypatch, tmp_path, 3, body)
    record.reset()
    report = check_coordination(tmp_path, world_size=3, distribution=PyTorch(writers="rank0"))
    assert report.ok and report.findings == ()
    assert (report.population, report.covered, report.writers) == (10, 10, {"model": (0,)})


def _codes(report):
    return [d.code for d in report.findings]


def test_every_rank_reading_everything_is_independent_copies(monkeypatch, tmp_path):
    ids = [f"e{i}" for i in range(10)]
    _ranks(monkeypatch, tmp_path, 2, lambda r: distributed.record_consumed(ids, population=ids))
    record.reset()
    report = check_coordination(tmp_path, world_size=2)
    assert not report.ok and _codes(report) == ["MP522"]
    assert "all 2 ranks consumed the whole data set (10 examples)" in report.findings[0].message


def test_overlap_gap_writers_and_global_metrics_are_findings(monkeypatch, tmp_path):
    def body(r):
        distributed.record_consumed([f"e{r}", "e1"], population=[f"e{i}" for i in range(4)])
        mark_written("model")
        mark_written("shards")
        log_metric("accuracy", 0.9 - r / 10, scope="global")
    _ranks(monkeypatch, tmp_path, 2, body)
    record.reset()
    report = check_coordination(tmp_path, world_size=3,
                                distribution=PyTorch(writers={"model": "rank0",
                                                              "shards": "sharded"}))
    assert _codes(report) == ["MP520", "MP521", "MP523", "MP524", "MP526"]
    assert [d.message for d in report.findings] == [
        "1 of 3 ranks left no coordination record (ranks 2); data coverage and output ownership "
        "are unevidenced",
        "1 examples were consumed by more than one rank ('e1'; ranks (0, 1))",
        "2 of 4 examples were consumed by no rank ('e2', 'e3')",
        "output 'model' was written by 2 ranks (0, 1); its writer policy is 'rank0'",
        "metric 'accuracy' was logged as global by 2 ranks (0, 1); each is one rank's partial view",
    ]


def test_a_write_by_the_wrong_rank(monkeypatch, tmp_path):
    _ranks(monkeypatch, tmp_path, 2, lambda r: r == 1 and mark_written("model"))
    record.reset()
    report = check_coordination(tmp_path, world_size=2)
    assert [d.message for d in report.findings if d.code == "MP525"] == [
        "output 'model' was written by rank 1, but its writer is rank 0 (policy 'rank0')"]


def _metric_lines(folder, r):
    record.reset()
    return json.loads((folder / f"rank-{r}.json").read_text())["metrics"]


def test_log_metric_goes_into_the_ranks_part_of_the_record(monkeypatch, tmp_path):
    as_rank(monkeypatch, 3, 4, tmp_path)
    log_metric("loss", 1.5, scope="partial", population="shard 3")
    [line] = _metric_lines(tmp_path, 3)
    assert line.pop("at").startswith("20")
    assert line == {"name": "loss", "value": 1.5, "scope": "partial", "rank": 3,
                    "population": "shard 3"}
    as_rank(monkeypatch, 3, 4, tmp_path)
    with pytest.raises(ValueError, match="metric 'loss' has scope 'local'; use 'global' or 'partial'"):
        log_metric("loss", 1.0, scope="local")
    with pytest.raises(ValueError, match="metric 'loss' has value nan; log a finite number"):
        log_metric("loss", float("nan"))


def test_all_reduce_metric_needs_a_process_group(monkeypatch, tmp_path):
    as_rank(monkeypatch, 0, 1, tmp_path)
    assert all_reduce_metric("loss", 2.0) == 2.0
    assert _metric_lines(tmp_path, 0)[0]["scope"] == "global"
    as_rank(monkeypatch, 0, 2, tmp_path)
    with pytest.raises(DistributedError, match=r"all_reduce_metric\('loss'\) runs in a world of "
                                               r"2 processes but no torch.distributed process "
                                               r"group is initialised"):
        all_reduce_metric("loss", 2.0)


def _part(r, writes=None, marked=(), watched=True):
    return {"rank": r, "role": "worker", "status": "succeeded", "consumed": [], "population": [],
            "marked_written": list(marked), "writes": writes,
            "observation": {"enabled": watched}}


def _step_part(outputs, writes):
    return {"outputs": {name: {"exists": True, "file_count": n} for name, n in outputs.items()},
            "writes": writes}


def test_writers_the_audit_hooks_saw_count_without_mark_written():
    parts = [_part(0, {"model": ["model.pt"]}), _part(1, {"model": ["model.pt", "extra.bin"]})]
    report = check_coordination(parts, world_size=2, step_part=_step_part({"model": 2}, {}))
    assert report.writers == {"model": (0, 1)}
    assert [(d.code, d.message) for d in report.findings] == [(
        "MP524", "output 'model' was written by 2 ranks (0, 1); its writer policy is 'rank0' "
                 "(observed: rank 1 wrote 'extra.bin', 'model.pt')")]
    wrong = check_coordination([_part(0, {}), _part(1, {"model": ["model.pt"]})], world_size=2)
    assert [d.code for d in wrong.findings] == ["MP525"]
    assert wrong.findings[0].message.endswith("(observed: rank 1 wrote 'model.pt')")


def test_an_empty_output_and_a_silent_shard_are_declared_writers_that_never_wrote():
    dist = PyTorch(writers={"model": "rank0", "parts": "sharded"})
    parts = [_part(0, {"parts": ["rank-0/p.bin"]}), _part(1, {})]
    observed = [{"name": "rank-0/p.bin", "ranks": [0], "how": "observed"}]
    report = check_coordination(parts, world_size=2, distribution=dist,
                                step_part=_step_part({"model": 0, "parts": 1},
                                                     {"model": [], "parts": observed}))
    assert [(d.code, d.port) for d in report.findings] == [("MP527", "model"), ("MP527", "parts")]
    assert not report.ok
    # a file native code wrote (no hook saw it): who else wrote is unknown, so no finding
    native = [{"name": "rank-1/p.bin", "ranks": [0, 1], "how": "mark_written"}]
    unknown = check_coordination(parts, world_size=2, distribution=dist,
                                 step_part=_step_part({"model": 1, "parts": 2},
                                                      {"parts": observed + native}))
    assert unknown.findings == ()
    # an unwatched rank (MLPIPE_OBSERVE=0) is never accused
    blind = [_part(0, {"parts": ["rank-0/p.bin"]}), _part(1, None, watched=False)]
    assert check_coordination(blind, world_size=2, distribution=dist,
                              step_part=_step_part({"parts": 1}, {"parts": observed})
                              ).findings == ()


def test_waiting_for_the_process_group_to_release_a_tensor_is_bounded():
    torch = pytest.importorskip("torch")
    import threading
    import time

    tensor = torch.zeros(1)
    held = [tensor.view(1)]            # the worker thread's reference, as gloo's work holds it
    threading.Timer(0.05, held.clear).start()
    started = time.monotonic()
    distributed._wait_until_released(tensor)
    assert tensor._use_count() == 1
    assert time.monotonic() - started >= 0.04

    never = tensor.view(1)             # never released: the wait gives up, it never hangs
    started = time.monotonic()
    distributed._wait_until_released(tensor, timeout=0.1)
    assert 0.1 <= time.monotonic() - started < 10  # bounded, on however loaded a machine
    assert never is not None


def _loader(sampler="RandomSampler", whole=True, replicas=None, size=16, subset=None, pg=True):
    return {"dataset": "Subset" if subset else "TensorDataset", "dataset_size": size,
            "subset_size": size if subset else None, "subset_digest": subset,
            "sampler": sampler, "num_replicas": replicas, "sampler_rank": None,
            "whole": whole, "passes": 1,
            "process_group": {"backend": "gloo", "world_size": 2, "rank": 0} if pg else None}


@pytest.mark.parametrize(("loaders", "copies"), [
    ([[_loader()], [_loader()]], True),                                  # N copies
    ([[_loader(pg=False)], [_loader(pg=False)]], True),
    ([[_loader("DistributedSampler", False, 2), _loader("SequentialSampler")],
      [_loader("DistributedSampler", False, 2), _loader("SequentialSampler")]], False),  # DDP
    ([[_loader(subset="sha256:a")], [_loader(subset="sha256:b")]], False),  # parts by hand
    ([[_loader(size=16)], [_loader(size=8)]], False),                    # not the same data
    ([[_loader()], []], False),                                          # rank 1 fed nothing
    ([[_loader(whole=None)], [_loader(whole=None)]], False),             # a custom sampler
])
def test_independent_copies_from_the_ranks_data_loaders(loaders, copies):
    parts = [{**_part(r), "data_loaders": fed} for r, fed in enumerate(loaders)]
    report = check_coordination(parts, world_size=2)
    assert [d.code for d in report.findings] == (["MP522"] if copies else [])


@pytest.mark.parametrize(("sampler", "replicas", "said", "hint"), [
    ("DistributedSampler", 1, "whose DistributedSampler was built with num_replicas=1 (one "
     "replica: it deals every rank the whole set)", "build the sampler with num_replicas=2"),
    ("RandomSampler", None, "with no sampler that deals out parts",
     "give each rank its own part"),
])
def test_independent_copies_name_the_sampler_that_was_there(sampler, replicas, said, hint):
    fed = [_loader(sampler, True, replicas)]
    parts = [{**_part(r), "data_loaders": fed} for r in range(2)]
    [found] = check_coordination(parts, world_size=2).findings
    assert found.code == "MP522"
    assert f"examples of TensorDataset) through a DataLoader {said}, in a process group" \
        in found.message
    assert found.hint.startswith(hint)


FILES = [f"img_{i}.pgm" for i in range(6)]


@pytest.mark.parametrize(("reads", "copies"), [
    ([{"examples": FILES}, {"examples": FILES}], True),                  # a plain loop, twice
    ([{"examples": FILES[0::2]}, {"examples": FILES[1::2]}], False),     # files[rank::world]
    ([{"examples": FILES[:4]}, {"examples": FILES[2:]}], False),         # parts that overlap
    ([{"examples": ["train.csv"]}, {"examples": ["train.csv"]}], False),  # one file, rows shared
    ([{"examples": FILES}, None], False),                                # rank 1 not observed
    ([{"examples": FILES}], False),                                      # a rank left no part
])
def test_independent_copies_from_the_files_each_rank_opened(reads, copies):
    parts = [{**_part(r), "reads_inputs": opened} for r, opened in enumerate(reads)]
    report = check_coordination(parts, world_size=2)
    found = [d for d in report.findings if d.code == "MP522"]
    assert bool(found) is copies
    if copies:
        assert found[0].message.startswith(
            "all 2 ranks opened the same 6 files under input 'examples' (every file any rank "
            "opened there, e.g. 'img_0.pgm', 'img_1.pgm' and 4 more) and recorded no division")


def test_opened_files_prove_nothing_when_a_sampler_dealt_out_parts():
    ddp = [_loader("DistributedSampler", False, 2)]
    parts = [{**_part(r), "reads_inputs": {"examples": FILES}, "data_loaders": ddp}
             for r in range(2)]
    assert check_coordination(parts, world_size=2).findings == ()


def _reduced(r, local, examples, population="test, 15 examples", op="mean", value=0.0):
    return {"name": "accuracy", "op": op, "world_size": 2, "value": value, "rank": r,
            "local": local, "examples": examples, "population": population}


@pytest.mark.parametrize(("reductions", "miscounted"), [
    ([[_reduced(0, 1.0, 8)], [_reduced(1, 3 / 7, 7)]], True),          # unequal parts
    ([[_reduced(0, 1.0, 8)], [_reduced(1, 0.5, 8)]], False),           # parts of one size
    ([[_reduced(0, 0.5, 8)], [_reduced(1, 0.5, 7)]], False),           # equal means
    ([[_reduced(0, 1.0, 8, "train, 15 examples")],
      [_reduced(1, 3 / 7, 7, "train, 15 examples")]], False),          # a training monitor
    ([[_reduced(0, 1.0, None)], [_reduced(1, 3 / 7, None)]], False),   # parts not recorded
    ([[_reduced(0, 1.0, 8, op="sum")], [_reduced(1, 3 / 7, 7, op="sum")]], False),
    ([[_reduced(0, 1.0, 8)], []], False),                              # rank 1 never reduced
])
def test_a_plain_mean_of_unequal_parts_is_miscounted(reductions, miscounted):
    parts = [{**_part(r), "reductions": reds} for r, reds in enumerate(reductions)]
    found = [d.code for d in check_coordination(parts, world_size=2).findings]
    assert found == (["MP534"] if miscounted else [])


def _sampled(total, drop_last=False):
    return {**_loader("DistributedSampler", False, 2, size=15), "total_size": total,
            "drop_last": drop_last}


@pytest.mark.parametrize(("loader", "population", "miscounted"), [
    (_sampled(16), "test, 16 examples", True),           # the padded total
    (_sampled(16), "test, 15 examples", False),          # the data set's own size
    (_sampled(14, drop_last=True), "test, 16 examples", False),  # nothing repeated
    (_sampled(16), "test", False),                       # no count stated
])
def test_a_population_counting_a_samplers_padding_is_miscounted(loader, population, miscounted):
    parts = [{**_part(r), "data_loaders": [loader],
              "metrics": [{"name": "accuracy", "scope": "global", "rank": 0,
                           "population": population}] if r == 0 else []}
             for r in range(2)]
    found = [d.code for d in check_coordination(parts, world_size=2).findings]
    assert found == (["MP534"] if miscounted else [])


def test_records_cut_short_are_judged_without_raising():
    parts = [{**_part(0), "reductions": [{"op": "mean"}, "junk"],
              "metrics": [{"scope": "global"}], "data_loaders": [_sampled(16)]},
             {**_part(1), "reductions": [_reduced(1, 0.5, 7)], "data_loaders": []}]
    report = check_coordination(parts, world_size=2)
    assert [d.code for d in report.findings if d.code == "MP534"] == []
