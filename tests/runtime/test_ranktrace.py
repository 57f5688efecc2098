"""The rank-level trace on real gloo ranks: each body of tests/fixtures/ranktrace/bodies.py runs
as a 2-rank step through the local launcher and the step runtime; each trace fact has a
triggering body and a clean twin, and the records the ranks leave match the schema."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import jsonschema
import pytest

from mlpipe import PyTorch
from mlpipe.backends.local.launcher import launch
from mlpipe.errors import LaunchFailed
from mlpipe.runtime import record

ROOT = Path(__file__).resolve().parents[2]
BODIES = ROOT / "tests" / "fixtures" / "ranktrace"

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, body: str, *, timeout: float = 120, **env: str):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    out.mkdir(parents=True)
    request = {"function": f"bodies:{body}", "sys_path": [str(BODIES)], "inputs": {},
               "outputs": {}, "params": {"out": str(out)}}
    (tmp_path / "request.json").write_text(json.dumps(request))
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLPIPE_")}
    environment.update(PYTHONPATH=str(ROOT), MLPIPE_STEP_DIR=str(tmp_path / "step"), **env)
    return launch([sys.executable, "-m", "mlpipe.runtime.step", str(tmp_path / "request.json")],
                  distribution=PyTorch(processes_per_node=2, backend="gloo"), env=environment,
                  cwd=str(tmp_path), log_dir=tmp_path / "logs", timeout=timeout,
                  require_coordination=False)


def _codes(result) -> list[str]:
    return sorted(d.code for d in result.coordination.findings)


@pytest.mark.parametrize(("body", "codes"), [
    ("ddp", []),                                     # a correct DDP step: nothing to say
    ("same_gpu", ["MP541"]),                         # every rank asks for cuda:0
    ("own_gpu", []),                                 # each its own, by LOCAL_RANK
    ("sampler_same_rank", ["MP521", "MP523"]),       # every sampler built with rank=0
    ("sampler_too_many_replicas", ["MP523"]),        # num_replicas=4 in a world of 2
    ("sampler_default", []),                         # the process group's rank and size
    ("every_rank_saves", ["MP543"]),                 # one checkpoint path, saved by both
    ("rank0_saves", []),                             # per-rank files, the shared one by rank 0
    ("plain_mean", ["MP534"]),                       # a plain mean of parts of 4 and 3
    ("weighted_mean", []),                           # sums of hits and counts
])
def test_each_trace_fact_has_a_triggering_and_a_clean_body(tmp_path, body, codes):
    assert _codes(_run(tmp_path, body)) == codes


@pytest.fixture
def served(tmp_path):
    """A file served over HTTP from this process (a real server on the loopback), and a tar
    archive beside it."""
    import functools
    import http.server
    import tarfile
    import threading

    root = tmp_path / "served"
    root.mkdir()
    (root / "data.txt").write_text("x" * 1000)
    with tarfile.open(root / "data.tar", "w") as tar:
        tar.add(root / "data.txt", arcname="data.txt")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"TRACE_URL": f"http://127.0.0.1:{server.server_address[1]}/data.txt",
           "TRACE_ARCHIVE": str(root / "data.tar")}
    server.shutdown()


@pytest.mark.parametrize(("body", "codes"), [
    ("every_rank_extracts", ["MP543"]),
    ("local_rank0_extracts", []),
    ("every_rank_downloads", ["MP543"]),
    ("local_rank0_downloads", []),
])
def test_staging_by_every_rank_and_by_local_rank_0(tmp_path, served, body, codes):
    result = _run(tmp_path / "run", body, **served)
    assert _codes(result) == codes
    if codes:
        [found] = result.coordination.findings
        kind = "extract" if "extract" in body else "download"
        assert found.message.startswith("ranks 0, 1 each called ")
        assert f"({kind}, at bodies.py:" in found.message


@pytest.mark.parametrize(("body", "codes"), [("every_rank_logs", ["MP543"]),
                                             ("rank0_logs", [])])
def test_mlflow_logging_by_every_rank_and_by_rank_0(tmp_path, mlflow_server, body, codes):
    result = _run(tmp_path, body, TRACE_MLFLOW=mlflow_server)
    assert _codes(result) == codes
    calls = {p["rank"]: [(c["kind"], c["call"], c["target"]) for c in p["trace"]["calls"]]
             for p in record.rank_parts(tmp_path / "step")}
    assert calls[0] == [("tracking", "mlflow.log_metric", "loss")]   # its HTTP is the call's
    assert calls[1] == ([("tracking", "mlflow.log_metric", "loss")] if codes else [])


def test_a_correct_ddp_steps_trace_says_what_each_rank_did(tmp_path):
    _run(tmp_path, "ddp")
    found = record.load_record(tmp_path / "step")
    jsonschema.Draft202012Validator(record.schema()).validate(found)
    jsonschema.Draft202012Validator(record.schema()).validate(record.stored(found))
    traces = {p["rank"]: p["trace"] for p in found["ranks"]}
    for rank, trace in traces.items():
        ops = {(c["op"], Path(c["site"].rsplit(":", 1)[0]).name, c["count"])
               for c in trace["collectives"]}
        assert ops == {("DistributedDataParallel", "bodies.py", 1), ("all_reduce", "bodies.py", 1),
                       ("barrier", "bodies.py", 1)}
        [sampler] = trace["samplers"]
        assert (sampler["rank"], sampler["num_replicas"], sampler["count"]) == (rank, 2, 4)
    assert sorted(traces[0]["samplers"][0]["indices"] + traces[1]["samplers"][0]["indices"]) \
        == list(range(8))
    assert [c["call"] for c in traces[0]["calls"]] == ["torch.save"]
    assert traces[1]["calls"] == []


def test_a_cuda_request_without_a_gpu_is_recorded_and_resolved_to_the_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the request resolves to it")
    _run(tmp_path, "own_gpu")
    parts = record.rank_parts(tmp_path / "step")
    seen = {(p["rank"], d["via"], d["device"], d["resolved"]) for p in parts
            for d in p["trace"]["devices"]}
    assert seen == {(0, "torch.cuda.set_device", "cuda:0", "cpu"),
                    (0, "Module.cuda", "cuda:0", "cpu"),
                    (1, "torch.cuda.set_device", "cuda:1", "cpu"),
                    (1, "Module.cuda", "cuda:1", "cpu")}


def test_a_collective_under_a_rank_guard_hangs_and_every_ranks_place_is_reported(tmp_path):
    with pytest.raises(LaunchFailed) as caught:
        _run(tmp_path, "guarded_barrier", timeout=15, MLPIPE_HANG_S="2")
    text = str(caught.value)
    assert "the step exceeded its timeout of 15 s" in text
    assert "error[MP540] collective-mismatch: collective 'barrier' was called a different " \
           "number of times by the ranks (rank 0: 1, rank 1: 0; called at bodies.py:44)" in text
    assert "error[MP542] rank-hung-in-collective: rank 0 waited " in text
    assert "rank 0 waits in barrier at bodies.py:44; rank 1 waits in all_reduce at " \
           "bodies.py:45" in text
    hang = record.rank_parts(tmp_path / "step")[0]["trace"]["hang"]
    assert any("bodies.py:44 in guarded_barrier" in frame for frame in hang["stack"])


def test_a_rank_that_is_in_no_collective_is_shown_where_it_is(tmp_path):
    with pytest.raises(LaunchFailed, match=r"rank 0 waits in barrier at bodies\.py:\d+; rank 1 "
                                           r"is in no collective \(at bodies\.py:\d+ in hang\)"):
        _run(tmp_path, "hang", timeout=15, MLPIPE_HANG_S="2")


def test_the_trace_switched_off_leaves_it_unknown(tmp_path):
    result = _run(tmp_path, "every_rank_saves", MLPIPE_TRACE="0")
    assert _codes(result) == []
    assert [p["trace"] for p in record.rank_parts(tmp_path / "step")] == [None, None]
