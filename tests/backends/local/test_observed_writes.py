"""Writers found from what the ranks' audit hooks saw, for distributed steps that never call
mlpipe's helpers: real `mlpipe submit` processes, two real ranks, plain file writes."""
from __future__ import annotations

import pytest

from executor_project import Project
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture
def proj(tmp_path):
    return Project(tmp_path / "proj")


def test_a_rank0_save_without_mark_written_coordinates(proj):
    done = proj.submit("observed", inputs=("left=left.txt",))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("params", "expected"), [
    (("--param", "mode=every"),
     "error[MP524] multiple-writers: output 'model' was written by 2 ranks (0, 1); its writer "
     "policy is 'rank0' (observed: rank 1 wrote 'weights.json')"),
    (("--param", "mode=nobody"),
     "error[MP527] declared-writer-never-wrote: output 'model' is empty: its declared writer, "
     "rank 0 (policy 'rank0'), wrote nothing there, and neither did any other rank"),
    (("--param", "shards=one"),
     "error[MP527] declared-writer-never-wrote: output 'parts' is sharded (every rank writes "
     "its own part), but 1 of 2 ranks wrote nothing there (rank 1)"),
])
def test_writers_are_judged_from_what_the_ranks_wrote(proj, params, expected):
    done = proj.submit("observed", *params, inputs=("left=left.txt",))
    assert done.returncode == 1
    assert "step 'plain_train' did not coordinate" in done.stderr + done.stdout
    assert expected in done.stderr + done.stdout


def test_plain_ddp_with_a_distributed_sampler_coordinates(proj):
    pytest.importorskip("torch")
    done = proj.submit("ddp_plain", inputs=("left=left.txt",), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store.open(f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            [record] = [sr.record for sr in s.query(m.StepRun).all()]
    finally:
        store.close()
    # what the ranks' loaders were: the training one deals parts, the validation one does not
    for part in record["ranks"]:
        train, whole = part["data_loaders"]
        assert (train["sampler"], train["num_replicas"], train["sampler_rank"], train["whole"],
                train["passes"]) == ("DistributedSampler", 2, part["rank"], False, 2)
        assert (whole["sampler"], whole["whole"], whole["dataset_size"]) == (
            "SequentialSampler", True, 16)
        assert train["process_group"] == {"backend": "gloo", "world_size": 2,
                                          "rank": part["rank"]}


def test_every_rank_iterating_the_whole_data_set_is_independent_copies(proj):
    pytest.importorskip("torch")
    done = proj.submit("ddp_plain", "--param", "mode=copies", inputs=("left=left.txt",),
                       timeout=300)
    assert done.returncode == 1
    assert ("error[MP522] independent-copies: all 2 ranks iterated the whole data set (16 "
            "examples of TensorDataset) through a DataLoader with no sampler that deals out "
            "parts, in a process group of 2: 2 copies trained on the same examples, not one "
            "data-parallel run") in done.stderr + done.stdout


def test_a_sampler_built_for_one_replica_is_named_as_the_cause(proj):
    pytest.importorskip("torch")
    done = proj.submit("ddp_plain", "--param", "mode=one_replica", inputs=("left=left.txt",),
                       timeout=300)
    assert done.returncode == 1
    assert ("error[MP522] independent-copies: all 2 ranks iterated the whole data set (16 "
            "examples of TensorDataset) through a DataLoader whose DistributedSampler was "
            "built with num_replicas=1 (one replica: it deals every rank the whole set), in a "
            "process group of 2") in done.stderr + done.stdout
    assert "help: build the sampler with num_replicas=2" in done.stderr + done.stdout


@pytest.mark.parametrize(("mode", "expected"), [
    ("even", None),
    ("uneven", "warning[MP534] global-metric-miscounted: metric 'accuracy' was reduced as a "
               "plain mean of 2 ranks' means (1, 0.4286) over parts of unequal size (8, 7 "
               "examples): 0.7143, where the mean over all 15 examples is 0.7333"),
    ("padded", "warning[MP534] global-metric-miscounted: global metric 'accuracy' counts 16 "
               "examples (population 'test, 16 examples'), but the data set its "
               "DistributedSampler dealt out holds 15: the sampler padded 2 ranks' parts to "
               "one size by repeating 1 example, which the metric counts twice"),
    ("padded", "warning[MP534] global-metric-miscounted: global metric 'examples' counts 16 "
               "examples (sum over the ranks 16), but the data set its DistributedSampler "
               "dealt out holds 15: the sampler padded 2 ranks' parts to one size by repeating "
               "1 example, which the metric counts twice"),
    ("dropped", None),
])
def test_a_global_metric_is_held_to_each_ranks_part(proj, mode, expected):
    pytest.importorskip("torch")
    done = proj.submit("ddp_counts", "--param", f"mode={mode}", inputs=("left=left.txt",),
                       timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr   # a warning: the outputs stand
    store = Store.open(f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            [topology] = [sr.topology for sr in s.query(m.StepRun).all()]
    finally:
        store.close()
    found = [f"{f['severity']}[{f['code']}] {f['name']}: {f['message']}"
             for f in topology["coordination"]["findings"]]
    assert (expected in found) if expected else found == []
    assert len(found) == {"even": 0, "uneven": 1, "padded": 2, "dropped": 0}[mode]
