"""What a step starts does not outlive it: real executors killed with -9, real step processes
with children of their own (a plain child, one in its own session, an orphaned grandchild)."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from executor_project import Project

pytestmark = pytest.mark.slow

TRIALS = 8


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _survivors(pids: list[int], seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _pids(proc, gate: Path) -> list[int]:
    pids = Path(f"{gate}.pids")
    deadline = time.monotonic() + 60
    while not (pids.exists() and len(pids.read_text().split()) == 3):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the step never started its children"
        time.sleep(0.05)
    return [int(p) for p in pids.read_text().split()]


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forked-step", "fresh-step"])
def test_kill_9_of_the_executor_leaves_no_process_a_step_started(tmp_path, monkeypatch,
                                                                  forkserver):
    monkeypatch.setenv("MLPIPE_FORKSERVER", forkserver)
    proj = Project(tmp_path / "proj")
    survived = []
    for trial in range(TRIALS // 2):
        gate = tmp_path / f"gate{trial}"
        proc = proj.popen("submit", "spawner.py", "--input", "left=left.txt", "--param",
                          f"gate={gate}")
        children = _pids(proc, gate)
        time.sleep(0.5)  # the reaper notes a new session's process within 0.1 s
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        survived += _survivors(children)
    for pid in survived:
        _kill(pid)
    assert survived == [], f"{len(survived)} processes outlived a killed executor"


def test_a_finished_step_leaves_no_process_running(tmp_path):
    proj = Project(tmp_path / "proj")
    gate = tmp_path / "gate"
    done = proj.cli("submit", "spawner.py", "--input", "left=left.txt", "--param",
                    f"gate={gate}", "--param", "hold=false")
    assert done.returncode == 0, done.stderr
    children = [int(p) for p in Path(f"{gate}.pids").read_text().split()]
    left = _survivors(children)
    for pid in left:
        _kill(pid)
    assert left == []


def _kill(pid: int) -> None:
    import os

    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def test_sigterm_before_a_run_exists_claims_no_run(tmp_path):
    proj = Project(tmp_path / "proj")
    marker = tmp_path / "loading"
    (proj.root / "slow_load.py").write_text(
        "import time\nfrom pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('x')\ntime.sleep(30)\n"
        "from chain import chain\n")
    proc = proj.popen("submit", "slow_load.py:chain", "--input", "left=left.txt",
                      "--input", "right=right.txt")
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip() == "error: interrupted before a run was recorded; nothing was recorded"
    assert "r-" not in proj.cli("runs").stdout
