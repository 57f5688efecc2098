"""The step fork server: real forked step processes that look like fresh ones from inside."""
from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from mlpipe.backends.local.forkserver import ForkServer, forkable
from mlpipe.checks import check_pipeline

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

FIXTURES = Path(__file__).parents[2] / "fixtures" / "forkserver"


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started = []

    def start(*modules: str) -> ForkServer:
        started.append(ForkServer(list(modules), sys_path=[str(FIXTURES)], cwd=str(tmp_path),
                                  log=tmp_path / "server.log"))
        return started[-1]

    yield start
    for s in started:
        s.close()


def _request(tmp_path: Path, function: str, **params) -> tuple[dict, dict, Path]:
    step_dir = tmp_path / "step"
    step_dir.mkdir(exist_ok=True)
    out = tmp_path / "out.json"
    request = {"function": function, "sys_path": [str(FIXTURES)], "inputs": {},
               "outputs": {"out": str(out)}, "params": params}
    env = {**os.environ, "MLPIPE_STEP_DIR": str(step_dir), "PROBE_VALUE": "given",
           "MLPIPE_PARENT_PID": str(os.getpid())}
    return request, env, out


def test_a_forked_step_is_its_own_process_with_its_own_log_env_and_session(server, tmp_path):
    srv = server("probe")
    request, env, out = _request(tmp_path, "probe:probe", note="hello")
    step = srv.spawn(request, env=env, cwd=str(tmp_path), log=str(tmp_path / "step.log"))
    assert step is not None and step.wait(60) == 0
    seen = json.loads(out.read_text())
    assert seen["pid"] == step.pid
    assert seen["ppid"] == srv._proc.pid            # forked by the server ...
    assert seen["parent_var"] == str(srv._proc.pid)  # ... and dies with it
    assert seen["sid"] == step.pid                   # its own session, like start_new_session
    assert seen["env"] == "given" and seen["step_dir"] == str(tmp_path / "step")
    assert seen["argv0"].endswith(os.path.join("mlpipe", "runtime", "step.py"))
    assert seen["random"] == random.Random(7).random()  # the module's import-time seed holds
    log = (tmp_path / "step.log").read_text()
    assert "to stdout hello" in log and "to stderr hello" in log


def test_a_failing_or_killed_step_reports_like_a_fresh_one(server, tmp_path):
    srv = server("probe")
    request, env, _out = _request(tmp_path, "probe:fail")
    step = srv.spawn(request, env=env, cwd=str(tmp_path), log=str(tmp_path / "fail.log"))
    assert step.wait(60) == 1
    failure = json.loads((tmp_path / "step" / "rank-0.json").read_text())["failure"]
    assert failure == {"layer": "step-code", "type": "ValueError", "port": None, "rank": 0,
                       "message": "ValueError: the probe fails on purpose"}
    assert "Traceback" in (tmp_path / "fail.log").read_text()
    request, env, _out = _request(tmp_path, "probe:killed")
    step = srv.spawn(request, env=env, cwd=str(tmp_path), log=str(tmp_path / "killed.log"))
    assert step.wait(60) == -signal.SIGKILL


def test_closing_the_server_stops_a_running_step(server, tmp_path):
    srv = server("probe")
    gate = tmp_path / "gate"
    request, env, _out = _request(tmp_path, "probe:linger", gate=str(gate))
    step = srv.spawn(request, env=env, cwd=str(tmp_path), log=str(tmp_path / "linger.log"))
    deadline = time.monotonic() + 60
    while not Path(f"{gate}.started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    srv.close()
    assert step.wait(30) == -signal.SIGTERM


def test_a_module_that_starts_threads_at_import_is_not_forked_from(server, tmp_path):
    srv = server("threaded")
    request, env, _out = _request(tmp_path, "threaded:threaded")
    assert srv.spawn(request, env=env, cwd=str(tmp_path), log=str(tmp_path / "t.log")) is None
    assert "started 1 thread(s); forking steps from it is unsafe" in srv.why_not


def _run_probes(tmp_path, monkeypatch, **options):
    from mlpipe.backends.local.executor import LocalExecutor
    from mlpipe.evidence.storage.config import locate

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "evidence"))
    monkeypatch.delenv("MLPIPE_STORE_URL", raising=False)
    import probes

    graph, _ = check_pipeline(probes.probes.spec)
    result = LocalExecutor(locate(tmp_path), max_parallel=2, stream=None,
                           **options).submit(graph, inputs={}, params={})
    assert result.status == "succeeded"
    seen = {}
    for step in ("probe", "probe_2", "probe_with_variables"):
        seen[step] = json.loads(Path(_output(tmp_path, result, step)).read_text())
    return seen


def _output(tmp_path: Path, result, step: str) -> str:
    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.store import Store

    store = Store.open(f"sqlite:///{tmp_path / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            link = s.query(m.StepArtifact).filter_by(step_run_id=result.step_runs[step],
                                                     direction="output").one()
            # its key in the artifact root (artifacts by root-relative key)
            return str(tmp_path / "evidence" / "artifacts" / link.artifact.key)
    finally:
        store.close()


def test_the_executor_forks_plain_steps_and_starts_declared_variables_fresh(tmp_path,
                                                                           monkeypatch):
    monkeypatch.delenv("MLPIPE_FORKSERVER", raising=False)
    seen = _run_probes(tmp_path, monkeypatch)
    assert seen["probe"]["ppid"] == seen["probe_2"]["ppid"] != os.getpid()  # the server
    assert seen["probe_with_variables"] == {"ppid": os.getpid(), "env": "declared"}
    assert seen["probe"]["env"] is None


def test_the_fork_server_can_be_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_FORKSERVER", "0")
    seen = _run_probes(tmp_path, monkeypatch)
    assert {s["ppid"] for s in seen.values()} == {os.getpid()}


def test_only_plain_python_components_are_forkable():
    sys.path.insert(0, str(FIXTURES))
    try:
        import probe
    finally:
        sys.path.remove(str(FIXTURES))
    assert forkable(probe.probe.spec)
    assert not forkable(probe.probe_with_variables.spec)
