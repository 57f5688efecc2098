"""Hostile inputs to ``mlpipe submit``: each one clear line and exit 2, nothing recorded, never a
traceback or a wait. Real CLI processes on real files, FIFOs and devices."""
from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mlpipe.backends.local.inputs import readable
from mlpipe.errors import UsageError
from timing import limit

FIXTURE = Path(__file__).parents[2] / "fixtures" / "hostile" / "ports.py"


@pytest.fixture
def project(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "ports.py")
    (tmp_path / "five.txt").write_text("5")
    return tmp_path


def submit(project: Path, target: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", f"ports.py:{target}",
                           *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=limit(60))


def refused(result: subprocess.CompletedProcess, first: str, hint: str, project: Path) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"error: {first}", f"  help: {hint}"]
    store = project / "evidence" / "store.sqlite"
    if store.exists():  # opened, but no run recorded
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


@pytest.mark.slow
@pytest.mark.parametrize("value, shown", [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf"),
                                           ("NaN", "nan")])
def test_a_non_finite_number_is_refused_not_passed_through_a_range(project, value, shown):
    refused(submit(project, "scaled", "--input", "src=five.txt", "--param", f"ratio={value}"),
            f"--param ratio={value}: {shown} is not a finite number",
            "give a value that fits the parameter's declaration", project)


@pytest.mark.slow
def test_a_folder_for_a_uri_file_input_is_refused(project):
    (project / "folder").mkdir()
    refused(submit(project, "scaled", "--input", "src=folder"),
            "input 'src': folder is a folder, but it is declared a uri_file",
            "give one file, or declare the port Input['uri_folder']", project)


@pytest.mark.slow
def test_a_fifo_is_refused_not_waited_on(project):
    os.mkfifo(project / "pipe")
    refused(submit(project, "scaled", "--input", "src=pipe"),
            "input 'src': pipe is a named pipe (FIFO), not a file or folder",
            "copy the data into a regular file and give that", project)


@pytest.mark.slow
def test_a_device_is_refused_not_read_forever(project):
    refused(submit(project, "scaled", "--input", "src=/dev/zero"),
            "input 'src': /dev/zero is a character device, not a file or folder",
            "copy the data into a regular file and give that", project)


@pytest.mark.slow
def test_a_symlink_cycle_in_an_input_folder_is_refused(project):
    (project / "data" / "sub").mkdir(parents=True)
    (project / "data" / "a.txt").write_text("1")
    os.symlink("..", project / "data" / "sub" / "up")
    result = submit(project, "counted", "--input", "src=data")
    refused(result, f"input {project / 'data'} cannot be read ({project / 'data/sub/up'}): the "
                    f"link sub/up leads back to a folder that holds it (a symlink cycle)",
            "make every file in it readable and remove links that lead back into it, or give "
            "another path", project)


@pytest.mark.slow
def test_a_linked_folder_that_is_no_cycle_is_still_read(project):
    (project / "shared").mkdir()
    (project / "shared" / "b.txt").write_text("2")
    (project / "data").mkdir()
    os.symlink(project / "shared", project / "data" / "one")
    os.symlink(project / "shared", project / "data" / "two")
    result = submit(project, "counted", "--input", "src=data")
    assert result.returncode == 0, result.stderr


def test_an_unreadable_input_file_is_refused():
    folder = Path(tempfile.mkdtemp())  # one every user may enter: only the file is closed
    os.chmod(folder, 0o755)
    secret = folder / "secret.txt"
    secret.write_text("1")
    secret.chmod(0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # as an unprivileged user: root reads any file
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            try:
                readable("input 'src'", str(secret))
                said = "accepted"
            except UsageError as err:
                said = err.render()
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        said = fh.read()
    os.waitpid(pid, 0)
    shutil.rmtree(folder)
    assert said == (f"input 'src': {secret} cannot be read (Permission denied)\n"
                     f"  help: make it readable (chmod u+r), or give another path")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["artifacts", "logs", "work"])
def test_an_evidence_folder_that_is_a_file_is_refused(project, name):
    (project / "evidence").mkdir()
    (project / "evidence" / name).write_text("not a folder")
    result = submit(project, "scaled", "--input", "src=five.txt")
    refused(result, f"evidence/{name} is a file, but mlpipe keeps a folder there",
            f"move the file away (mv evidence/{name} evidence/{name}.bak) and run again",
            project)
    assert (project / "evidence" / name).read_text() == "not a folder"


@pytest.mark.slow
def test_a_zero_byte_store_file_is_an_empty_store(project):
    (project / "evidence").mkdir()
    (project / "evidence" / "store.sqlite").write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    listed = subprocess.run([sys.executable, "-m", "mlpipe.cli", "runs"], cwd=project, env=env,
                            capture_output=True, text=True, timeout=limit(60))
    assert (listed.returncode, listed.stdout.strip()) == (0, "no runs recorded yet")
    ran = submit(project, "scaled", "--input", "src=five.txt")
    assert ran.returncode == 0, ran.stderr


LINKS = Path(__file__).parents[2] / "fixtures" / "hostile" / "links.py"


@pytest.mark.slow
def test_a_link_inside_an_output_is_stored_as_the_file_it_names(project):
    shutil.copy(LINKS, project / "links.py")
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    ran = subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", "links.py", "--input",
                          "src=five.txt", "--param", "how=inside"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=limit(60))
    assert ran.returncode == 0, ran.stderr
    stored = [p for p in (project / "evidence" / "artifacts").rglob("*") if p.name == "b.txt"]
    assert len(stored) == 1
    assert not stored[0].is_symlink() and stored[0].read_text() == "5"
    assert [p for p in (project / "evidence").rglob("*") if p.is_symlink()] == []


@pytest.mark.slow
@pytest.mark.parametrize("how, said", [
    ("outside", "holds a symbolic link etcdir -> /etc, which leads to a folder; mlpipe stores "
                "files, not links: copy the files into the output"),
    ("dangling", "holds a symbolic link c.txt -> nothere, which leads to nothing; mlpipe stores "
                 "files, not links: copy the files into the output"),
    ("fifo", "holds p, which is not a file or folder (a named pipe, socket or device); write "
             "files only"),
])
def test_a_link_out_of_an_output_or_a_special_file_fails_the_step(project, how, said):
    shutil.copy(LINKS, project / "links.py")
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    ran = subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", "links.py", "--input",
                          "src=five.txt", "--param", f"how={how}"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=limit(60))
    assert ran.returncode == 1
    assert re.search(rf"^error: run r-[0-9a-f]+ failed: step 'make': output 'out' "
                     rf"{re.escape(said)}$", ran.stderr, re.M), ran.stderr
    assert "Traceback" not in ran.stderr.split("the last lines of")[0]
    assert [p for p in (project / "evidence" / "artifacts").rglob("*") if p.is_symlink()] == []
