"""Failed steps diagnosed at the layer that failed, end to end: real `mlpipe submit` processes,
real step processes (a real gloo group for the rendezvous), the diagnosis in the stored step
record, `mlpipe show` and `mlpipe logs` (following a step that is still running)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import jsonschema
import pytest

from executor_project import Project
from mlpipe.evidence.records.reader import Reader
from mlpipe.runtime.record import schema
from timing import limit

pytestmark = pytest.mark.slow


@pytest.fixture
def proj(tmp_path):
    return Project(tmp_path / "proj")


def _run_id(result) -> str:
    found = re.search(r"run (r-[0-9a-f]+)", result.stdout + result.stderr)
    assert found, result.stdout + result.stderr
    return found.group(1)


def _submit(project: Project, target: str, *extra: str, **kw):
    return project.cli("submit", target, "--input", "left=left.txt", *extra, **kw)


def _diagnosis(project: Project, rid: str, step: str) -> dict:
    with Reader.open(f"sqlite:///{project.root / 'evidence' / 'store.sqlite'}") as r:
        sr = next(x for x in r.run_steps(rid) if x.step == step)
        record = r.step_record(sr.id)
    jsonschema.validate(record, schema())
    return record["diagnosis"]


@pytest.mark.parametrize("pipeline, step, code, layer, port", [
    ("diagnosed.py:no_output", "forgets", "MP901", "contract", "out"),
    ("diagnosed.py:no_metric", "reports", "MP918", "logging", "report"),
    ("diagnosed.py:undeclared", "configured", "MP921", "dependencies", None),
    ("failing.py", "boom", "MP926", "step-code", None),
])
def test_a_failed_step_is_diagnosed_at_its_layer_and_shown_with_its_log(proj, pipeline, step,
                                                                         code, layer, port):
    done = _submit(proj, pipeline)
    assert done.returncode == 1, done.stderr
    rid = _run_id(done)
    found = _diagnosis(proj, rid, step)
    assert (f"  help: {found['hint']} ({code} {found['name']}, at the layer of "
            f"{found['layer_title']})\n  the last lines of {step}'s log:") in done.stderr
    assert (found["code"], found["layer"], found["port"]) == (code, layer, port)
    log = Path(found["logs"]["step"])
    assert log.is_file() and found["logs"]["ranks"] == {}
    shown = proj.cli("show", rid)
    assert shown.returncode == 0
    assert f"    error[{code}] {found['name']}: failed at the layer of {found['layer_title']}" \
        in shown.stdout
    assert f"    help: {found['hint']}" in shown.stdout and f"    log: {log}" in shown.stdout
    printed = proj.cli("logs", rid, step)
    assert printed.returncode == 0 and printed.stdout == log.read_text()
    as_json = json.loads(proj.cli("show", rid, "--format", "json").stdout)
    assert {s["step"]: s["diagnosis"] for s in as_json["steps"]}[step] == found


def test_an_evaluation_wired_to_the_training_table_is_diagnosed_as_the_wiring(proj):
    done = _submit(proj, "diagnosed.py:miswired")
    assert done.returncode == 1, done.stderr
    found = _diagnosis(proj, _run_id(done), "scores")
    assert (found["code"], found["layer"], found["port"]) == ("MP930", "contract", "report")
    assert found["message"].endswith(
        "its output 'report' was computed on the wrong population because input 'table' is "
        "wired to 'cut.train_table', the artifact 'fits.table' trains on (edge "
        "'cut.train_table' -> 'scores.table')")
    assert "split 'train'" in found["message"] and "MP918" not in done.stderr
    assert "(MP930 contract-mismatch-from-wiring, at the layer of contract and output " \
        "completeness)" in done.stderr
    clean = _submit(proj, "diagnosed.py:wired")
    assert clean.returncode == 0, clean.stderr


def test_reading_an_undeclared_file_names_it(proj):
    rid = _run_id(_submit(proj, "diagnosed.py:undeclared"))
    found = _diagnosis(proj, rid, "configured")
    assert re.fullmatch(r"step 'configured' failed: FileNotFoundError: \[Errno 2\] No such file "
                        r"or directory: 'settings.cfg'; the step read files it does not declare "
                        r"as inputs: .*/settings.cfg", found["message"])
    assert found["hint"].startswith("declare each file the step reads as an input")


@pytest.mark.parametrize("leave", [False, True], ids=["sleeps", "exits-0"])
def test_a_rank_that_never_joins_fails_the_launch_layer_in_bounded_time(proj, leave):
    pytest.importorskip("torch")
    started = time.monotonic()
    done = _submit(proj, "diagnosed.py:rendezvous", *(["--param", "leave=true"] if leave else []),
                    env_extra={"MLPIPE_RENDEZVOUS_TIMEOUT_S": "15"}, timeout=90)
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert took < limit(60)
    assert re.search(r"rank 1 of 2 did not join the rendezvous at 127\.0\.0\.1:\d+ within 15 s",
                     done.stderr)
    rid = _run_id(done)
    found = _diagnosis(proj, rid, "never_joins")
    assert (found["code"], found["name"], found["layer"], found["rank"]) == (
        "MP905", "rendezvous-not-formed", "launch", 1)
    assert found["layer_title"] == "launch topology and framework initialization"
    if leave:
        assert "rank 1 exited without joining" in found["message"]
    ranks = found["logs"]["ranks"]
    assert sorted(ranks) == ["0", "1"]
    assert "rank 1 will not join" in Path(ranks["1"]).read_text()
    shown = proj.cli("show", rid).stdout
    assert "error[MP905] rendezvous-not-formed: failed at the layer of launch topology and " \
           "framework initialization (rank 1)" in shown
    assert f"    rank 0 log: {ranks['0']}" in shown and f"    rank 1 log: {ranks['1']}" in shown
    one = proj.cli("logs", rid, "never_joins", "--rank", "1")
    assert one.returncode == 0 and one.stdout == Path(ranks["1"]).read_text()
    assert "printed nothing" not in one.stderr
    # rank 0 waited in init_process_group (real gloo) and printed nothing: said, not left blank
    assert Path(ranks["0"]).read_text() == ""
    zero = proj.cli("logs", rid, "never_joins", "--rank", "0")
    assert zero.returncode == 0 and zero.stdout == ""
    assert zero.stderr == (f"note: rank 0 of step 'never_joins' printed nothing: its log "
                           f"{ranks['0']} is empty\n")
    missing = proj.cli("logs", rid, "never_joins", "--rank", "7")
    assert missing.returncode == 2
    assert missing.stderr == (f"error: step 'never_joins' of run {rid} has no log of rank 7 "
                              f"(ranks: 0, 1)\n  help: give one of those ranks to --rank\n")


def test_logs_follow_a_running_step_to_its_end(proj, tmp_path):
    gate = tmp_path / "gate"
    run = proj.popen("submit", "diagnosed.py:gated", "--input", "left=left.txt", "--param",
                     f"gate={gate}")
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{gate}.started").exists():
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.05)
        with Reader.open(f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}") as r:
            rid = r.pipeline_runs(limit=1)[0].id
        follower = proj.popen("logs", rid, "chatty", "--follow")
        time.sleep(1.0)
        assert follower.poll() is None   # the step still runs: it keeps following
        gate.write_text("")
        out, err = follower.communicate(timeout=limit(60))
        assert follower.returncode == 0, err
        assert out == "line before the gate\nline after the gate\n"
        assert run.wait(60) == 0
    finally:
        if run.poll() is None:
            run.kill()


def test_logs_of_an_unknown_step_or_a_single_process_rank_are_usage_errors(proj):
    rid = _run_id(_submit(proj, "failing.py"))
    unknown = proj.cli("logs", rid, "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith(f"error: run {rid} has no step 'nope' (steps: ")
    rank = proj.cli("logs", rid, "boom", "--rank", "0")
    assert rank.returncode == 2
    assert rank.stderr == (f"error: step 'boom' of run {rid} ran as one process; it has no "
                           f"rank logs\n  help: drop --rank: `mlpipe logs {rid} boom`\n")
    skipped = proj.cli("logs", rid, "add")
    assert skipped.returncode == 2
    assert skipped.stderr.startswith(f"error: step 'add' of run {rid} has no log: it was "
                                     f"skipped: not run: upstream step ")


def test_the_diagnosis_is_kept_and_shown_on_either_store(tmp_path, store_url):
    proj = Project(tmp_path / "proj", store_url=store_url)
    rid = _run_id(_submit(proj, "failing.py"))
    with Reader.open(store_url) as r:
        sr = next(x for x in r.run_steps(rid) if x.step == "boom")
        record = r.step_record(sr.id)
    jsonschema.validate(record, schema())
    assert (record["diagnosis"]["code"], record["diagnosis"]["layer"]) == ("MP926", "step-code")
    shown = proj.cli("show", rid).stdout
    assert ("    error[MP926] step-code-raised: failed at the layer of the step's own code"
            in shown)
    assert f"    log: {record['diagnosis']['logs']['step']}" in shown


def test_logs_follow_a_running_distributed_step_rank_by_rank(proj):
    pytest.importorskip("torch")
    run = proj.popen("submit", "diagnosed.py:rendezvous", "--input", "left=left.txt",
                     env_extra={"MLPIPE_RENDEZVOUS_TIMEOUT_S": "20"})
    try:
        deadline = time.monotonic() + 60
        rid = None
        while rid is None:
            assert time.monotonic() < deadline and run.poll() is None
            store = proj.root / "evidence" / "store.sqlite"
            if store.exists():
                with Reader.open(f"sqlite:///{store}") as r:
                    runs = r.pipeline_runs(limit=1)
                    steps = r.run_steps(runs[0].id) if runs else []
                    if steps and steps[0].status == "running":
                        rid = runs[0].id
            time.sleep(0.1)
        followed = proj.cli("logs", rid, "never_joins", "--follow", timeout=120)
        assert followed.returncode == 0, followed.stderr
        assert "[rank 1] rank 1 will not join the process group\n" in followed.stdout
        assert run.wait(60) == 1
    finally:
        if run.poll() is None:
            run.kill()


def test_logs_of_a_reused_step_are_its_original_runs(proj):
    first = _run_id(proj.submit("chain"))
    second = _run_id(proj.submit("chain"))
    shown = proj.cli("logs", second, "double")
    assert shown.returncode == 0
    original = proj.cli("logs", first, "double")
    assert shown.stdout == original.stdout
    # the original printed nothing, and logs says so after naming the original
    assert re.fullmatch(r"note: step 'double' was reused from step run s-[0-9a-f]+ \(run "
                        rf"{first}\); this is that run's log; .* is empty\n", shown.stderr)
