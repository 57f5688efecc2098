"""End to end: real `mlpipe submit` processes, real step processes, a real store."""
from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from bundle_project import GATED
from executor_project import Project
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store
from timing import limit

pytestmark = pytest.mark.slow


@pytest.fixture
def proj(tmp_path):
    return Project(tmp_path / "proj")


def run_id(result) -> str:
    found = re.search(r"^run (r-[0-9a-f]+) (\w+)$", result.stdout, re.M)
    assert found, result.stdout + result.stderr
    return found.group(1)


def statuses(project: Project, rid: str) -> dict[str, str]:
    store = Store.open(project.store_url or f"sqlite:///{project.root / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            run = s.get(m.Run, rid)
            return {"run": run.status, **{sr.step: sr.status for sr in run.steps}}
    finally:
        store.close()


def test_second_run_reuses_every_step_and_names_the_executed_original(proj):
    first = proj.submit("chain")
    # the chain's candidate has no evaluation (MP701): submit says so and exits 1, the run ran
    assert first.returncode == 1 and GATED.search(first.stderr), first.stderr
    assert "(MP701)" in first.stderr
    assert re.search(r"^candidate c-[0-9a-f]+$", first.stdout, re.M)
    r1 = run_id(first)
    second = proj.submit("chain")
    r2 = run_id(second)
    third = proj.submit("chain")
    assert statuses(proj, r1) == {"run": "succeeded", "double": "executed",
                                  "double_2": "executed", "add": "executed"}
    assert statuses(proj, r2) == {"run": "succeeded", "double": "reused", "double_2": "reused",
                                  "add": "reused"}
    shown = proj.cli("show", run_id(third)).stdout
    store = Store.open(f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}")
    with store.session() as s:
        originals = {sr.step: sr.id for sr in s.get(m.Run, r1).steps}
        for sr in s.get(m.Run, run_id(third)).steps:
            # chains collapse: the third run names the first run's executed step runs
            assert sr.reused_from_id == originals[sr.step]
            assert sr.reused_from_id in shown


def test_changing_one_parameter_reruns_that_step_and_everything_downstream(proj):
    run_id(proj.submit("chain"))
    changed = proj.submit("chain", "--param", "factor=4")
    rid = run_id(changed)
    assert statuses(proj, rid) == {"run": "succeeded", "double": "executed",
                                   "double_2": "reused", "add": "executed"}
    why = proj.cli("show", rid, "--why", "double")
    assert "params.factor: 2 -> 4" in why.stdout
    why_add = proj.cli("show", rid, "--why", "add").stdout
    assert re.search(r"inputs\.a: blake3:[0-9a-f]{12} -> blake3:[0-9a-f]{12}", why_add)
    assert "every part of the cache key matched" in proj.cli("show", rid, "--why",
                                                             "double_2").stdout


def test_changing_one_input_byte_reruns_the_steps_that_read_it(proj):
    run_id(proj.submit("chain"))
    (proj.root / "right.txt").write_text("8")
    rid = run_id(proj.submit("chain"))
    assert statuses(proj, rid) == {"run": "succeeded", "double": "reused",
                                   "double_2": "executed", "add": "executed"}
    diff = proj.cli("diff", *[line.split()[0] for line in
                              proj.cli("runs").stdout.splitlines()[1:3]][::-1])
    assert "data snapshots:\n  right: blake3:" in diff.stdout and diff.returncode == 1


def test_no_reuse_and_a_reuse_false_component_run_again(proj):
    run_id(proj.submit("chain"))
    rid = run_id(proj.submit("chain", "--no-reuse"))
    assert set(statuses(proj, rid).values()) == {"succeeded", "executed"}
    odd = ("left=left.txt", "scratch=scratch.txt")
    run_id(proj.submit("odd", inputs=odd))
    rid = run_id(proj.submit("odd", inputs=odd))
    st = statuses(proj, rid)
    assert st["stamp"] == "executed"           # declares reuse=False
    assert st["mutate"] == "executed"          # its input changed while it ran last time
    assert "changed while the step ran; its result is not cached" in proj.cli(
        "show", rid).stdout


def test_a_vanished_or_damaged_artifact_is_a_miss_not_an_error(proj):
    run_id(proj.submit("chain"))
    for p in (proj.root / "evidence" / "artifacts").rglob("out"):
        p.write_text("999")  # damage every `double` output in place
    rid = run_id(proj.submit("chain"))
    assert statuses(proj, rid)["double"] == "executed"
    assert statuses(proj, rid)["add"] == "reused"  # same inputs once re-made


def test_a_failing_step_shows_its_log_tail_and_skips_downstream(proj):
    failed = proj.submit("failing", inputs=("left=left.txt",))
    assert failed.returncode == 1
    assert re.search(r"error: run r-[0-9a-f]+ failed: step 'boom' failed: ValueError: boom: "
                     r"the input is not acceptable", failed.stderr)
    assert "| about to fail on 5" in failed.stderr
    assert re.search(r"whole log: .*/evidence/logs/r-[0-9a-f]+/boom\.log", failed.stderr)
    rid = re.search(r"run (r-[0-9a-f]+) failed", failed.stderr).group(1)
    assert statuses(proj, rid) == {"run": "failed", "double": "executed", "boom": "failed",
                                   "add": "skipped"}
    assert not list((proj.root / "evidence" / "work").glob("*/*"))


def test_bad_submissions_are_one_clear_line(proj):
    unknown = proj.submit("chain", inputs=("left=left.txt", "nope=x"))
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: pipeline 'chain' has no input 'nope' "
                                     "(inputs: left, right)\n  help:")
    missing = proj.submit("chain", inputs=("left=left.txt", "right=gone.txt"))
    assert "error: input 'right': no such file or folder: gone.txt" in missing.stderr
    bad = proj.submit("chain", "--param", "factor=many")
    assert "error: --param factor=many: 'many' is not an int" in bad.stderr
    proj.store_url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    down = proj.submit("chain")
    assert down.returncode == 2
    assert down.stderr.startswith("error: cannot open the evidence store")
    assert "Traceback" not in unknown.stderr + missing.stderr + bad.stderr + down.stderr


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie waits only for its new parent to reap it


def _start_held_run(proj, gate: Path):
    """Submit hold.py and wait until its waiting step has started: (executor, step pid)."""
    proc = proj.popen("submit", "hold.py", "--input", "left=left.txt", "--param",
                      f"gate={gate}")
    started = Path(f"{gate}.started")
    deadline = time.monotonic() + 60
    # the file appears before the pid is written into it: wait for the pid
    while not (started.exists() and started.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return proc, int(started.read_text())


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forked-step", "fresh-step"])
def test_sigkill_mid_step_leaves_an_interrupted_run_and_no_partial_output(proj, tmp_path,
                                                                          monkeypatch,
                                                                          forkserver):
    monkeypatch.setenv("MLPIPE_FORKSERVER", forkserver)
    gate = tmp_path / "gate"
    proc, step_pid = _start_held_run(proj, gate)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)
    assert not _alive(step_pid)  # the step died with its executor
    runs = proj.cli("runs").stdout
    rid = re.search(r"(r-[0-9a-f]+)\s+hold\s+interrupted", runs).group(1)
    assert statuses(proj, rid) == {"run": "interrupted", "double": "executed",
                                   "wait_for": "interrupted"}
    partial = list((proj.root / "evidence" / "artifacts").rglob("partial.txt"))
    assert partial == []
    gate.write_text("go")
    again = proj.cli("submit", "hold.py", "--input", "left=left.txt", "--param",
                     f"gate={gate}")
    assert statuses(proj, run_id(again)) == {"run": "succeeded", "double": "reused",
                                             "wait_for": "executed"}


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forked-step", "fresh-step"])
def test_ctrl_c_mid_step_stops_the_step_and_records_the_run_interrupted(proj, tmp_path,
                                                                        monkeypatch,
                                                                        forkserver):
    monkeypatch.setenv("MLPIPE_FORKSERVER", forkserver)
    gate = tmp_path / "gate"
    proc, step_pid = _start_held_run(proj, gate)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=limit(60))
    assert proc.returncode != 0
    said = re.search(r"^error: interrupted; run (r-[0-9a-f]+) is recorded as interrupted$", err,
                     re.M)
    assert said, err
    assert not _alive(step_pid)
    rid = re.search(r"(r-[0-9a-f]+)\s+hold\s+interrupted", proj.cli("runs").stdout).group(1)
    assert rid == said.group(1)
    assert statuses(proj, rid) == {"run": "interrupted", "double": "executed",
                                   "wait_for": "interrupted"}


def test_eight_concurrent_submits_on_one_store(tmp_path, store_url):
    proj = Project(tmp_path / "proj", store_url=store_url)
    procs = [proj.popen("submit", "chain.py", "--input", "left=left.txt", "--input",
                        "right=right.txt", "--param", f"factor={n % 3 + 2}",
                        "--max-parallel", "2") for n in range(8)]
    outs = [p.communicate(timeout=limit(300)) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == (1 if GATED.search(err) else 0), err
        assert "locked" not in err
    store = Store.open(store_url)
    with store.session() as s:
        runs = s.query(m.Run).all()
        assert len(runs) == 8
        for run in runs:
            assert run.status == m.SUCCEEDED
            assert sorted(sr.step for sr in run.steps) == ["add", "double", "double_2"]
            assert {sr.status for sr in run.steps} <= {m.EXECUTED, m.REUSED}
            assert len(run.inputs) == 2
        # one candidate per model bytes, however many runs reproduced them at once
        assert s.query(m.CandidateRow).count() == len({n % 3 for n in range(8)})
        assert s.query(m.Production).count() == 8 - len({n % 3 for n in range(8)})
