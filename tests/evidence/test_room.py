"""A store that runs out of room says why: a real `mlpipe submit` in a subprocess whose
file-size limit (RLIMIT_FSIZE) the store file reaches, and one whose store lives on a full
tmpfs (mounted for the test where this process may mount; skipped, saying so, elsewhere).
SQLite's own words ("disk I/O error", "database or disk is full") are kept; the cause follows."""
from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import uuid

import pytest

from bundle_project import GATED
from executor_project import Project
from mlpipe.evidence.storage.room import LOW_SPACE, want_of_room

pytestmark = pytest.mark.slow


def _limited(limit: int):
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return set_limit


def test_the_store_at_the_file_size_limit_is_named(tmp_path):
    proj = Project(tmp_path / "proj")
    first = proj.submit("chain")
    # the run ran; the chain's candidate has no evaluation (MP701), so submit gates it
    assert first.returncode == (1 if GATED.search(first.stderr) else 0), first.stderr
    store = proj.root / "evidence" / "store.sqlite"
    size = store.stat().st_size
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", "chain.py",
                           "--input", "left=right.txt", "--input", "right=left.txt"],
                          cwd=proj.root, env=proj.env(), capture_output=True, text=True,
                          timeout=120, preexec_fn=_limited(size))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "check that the database is reachable" \
        not in done.stderr, done.stderr
    assert re.search(r"evidence store [^\n]*: (disk I/O error|database or disk is full): "
                     rf"store\.sqlite(-journal|-wal)? is \d+ bytes and this process may write "
                     rf"files of at most {size} bytes \(its file-size limit, ulimit -f\)",
                     done.stderr), done.stderr
    assert "help: raise the file-size limit (ulimit -f unlimited) for mlpipe" in done.stderr


@pytest.fixture
def full_tmpfs(tmp_path):
    where = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root: the full-disk case is not run here")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): the full-disk "
                    f"case is not run")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_store_on_a_full_disk_names_the_free_space(tmp_path, full_tmpfs):
    proj = Project(tmp_path / "proj")
    url = f"sqlite:///{full_tmpfs / 'store.sqlite'}"
    proj.store_url = url
    first = proj.submit("chain")
    # the run ran; the chain's candidate has no evaluation (MP701), so submit gates it
    assert first.returncode == (1 if GATED.search(first.stderr) else 0), first.stderr
    filler = full_tmpfs / "filler"
    with filler.open("wb") as fh:  # fill the filesystem to the last block
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    done = proj.submit("chain", inputs=("left=right.txt", "right=left.txt"))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert re.search(rf"evidence store [^\n]*: (disk I/O error|database or disk is full): no "
                     rf"space is left on the filesystem of {full_tmpfs} \(\d+ bytes free\)",
                     done.stderr), done.stderr
    assert "help: free space on that filesystem" in done.stderr


def test_other_failures_are_not_put_down_to_room(tmp_path):
    assert want_of_room(str(tmp_path / "s.sqlite"), "database is locked") is None
    assert want_of_room(str(tmp_path / "s.sqlite"), "disk I/O error") is None  # room to spare
    assert want_of_room(None, 'could not extend file "base/1/2": No space left on device') \
        == ("the database server reports that its disk is full",
            "free space on the database server's data volume (its administrator)")
    assert want_of_room(None, "connection refused") is None
    assert LOW_SPACE == 8 << 20

