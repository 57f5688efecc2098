"""A long local step shows its elapsed time and the last line of each rank's log while it runs:
plain lines in a pipe or CI log, a live view on a terminal (a real pty). Real `mlpipe submit`
processes and a real gloo process group of two ranks."""
from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys

import pytest

from executor_project import Project
from mlpipe.backends.local.progress import Progress, last_line, log_tails
from timing import limit

pytestmark = pytest.mark.slow


def test_plain_lines_name_each_rank_and_its_last_line(tmp_path):
    proj = Project(tmp_path / "proj")
    done = proj.cli("submit", "diagnosed.py:long_ddp", "--input", "left=left.txt",
                    env_extra={"MLPIPE_PROGRESS_S": "1"}, timeout=180)
    assert done.returncode == 0, done.stderr
    heads = re.findall(r"^  \.\.\. long_ranks +running (\d+)s$", done.stderr, re.M)
    assert heads, done.stderr
    assert [int(h) for h in heads] == sorted(int(h) for h in heads)  # elapsed grows
    for rank in (0, 1):
        assert re.search(rf"^        rank {rank}: (rank {rank} epoch \d loss 0\.\d|\(nothing "
                         rf"printed yet\))$", done.stderr, re.M), done.stderr
    assert re.search(r"^        rank 1: rank 1 epoch \d loss", done.stderr, re.M)
    assert "\x1b[" not in done.stderr  # no terminal codes in a pipe


def test_a_terminal_gets_a_live_view(tmp_path):
    proj = Project(tmp_path / "proj")
    leader, follower = pty.openpty()
    env = {**proj.env(), "MLPIPE_PROGRESS_S": "1", "TERM": "xterm"}
    for ci in ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "TF_BUILD", "BUILDKITE", "JENKINS_URL"):
        env.pop(ci, None)
    child = subprocess.Popen([sys.executable, "-m", "mlpipe.cli", "submit",
                              "diagnosed.py:long_ddp", "--input", "left=left.txt"],
                             cwd=proj.root, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert child.wait(timeout=limit(60)) == 0, seen.decode(errors="replace")
    os.close(leader)
    text = seen.decode(errors="replace")
    assert "long_ranks" in text and re.search(r"rank 1: rank 1 epoch \d", text), text
    assert "\x1b[" in text  # drawn in place, as rich's Live does


def test_progress_lines_of_a_single_process_step(tmp_path):
    log = tmp_path / "fit.log"
    log.write_text("loading\nepoch 1\n\n")
    progress = Progress(1, None, interval=0.0)
    progress.started("fit", log)
    [line] = progress.progress_lines()
    assert re.fullmatch(r"  \.\.\. fit +running \d+s  epoch 1", line)
    assert last_line(tmp_path / "absent.log") is None
    assert log_tails(log) == [("log", "epoch 1")]
    progress.finished("fit", "executed", 1.0)
    assert progress.progress_lines() == []
