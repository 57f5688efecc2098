"""MP805 component-version-reused, against a real store: a local run records a component's code
digest under its name and version; `mlpipe check` of the same version with changed code warns,
of a new version (or unchanged code) does not; a store that is absent or unreadable tells
nothing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlpipe.evidence.records.versions import recorded_code_digests

PIPE = '''from mlpipe import Output, component, pipeline


@component(version="{version}")
def make(table: Output["uri_file"]):
    with open(table, "w") as fh:
        fh.write("{row}")


@pipeline
def p():
    return make().table  # the step
'''


def _mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "mlpipe.toml").write_text("")
    (tmp_path / "pipe.py").write_text(PIPE.format(version="1.0", row="a,b\\n1,2\\n"))
    done = _mlpipe(tmp_path, "submit", "pipe.py")
    assert done.returncode == 0, done.stderr
    return tmp_path


def test_changed_code_under_a_recorded_version_is_reported_and_a_new_version_is_not(tmp_path):
    project = _project(tmp_path)
    same = _mlpipe(project, "check", "pipe.py")
    assert same.returncode == 0 and "MP805" not in same.stdout
    (project / "pipe.py").write_text(PIPE.format(version="1.0", row="a,b\\n1,3\\n"))
    changed = _mlpipe(project, "check", "pipe.py", "--fail-on", "warning")
    assert changed.returncode == 1
    assert "warning[MP805] component-version-reused: component 'make' version '1.0' is " \
           "recorded in the evidence store with other code (sha256:" in changed.stdout
    assert "  --> pipe.py:12" in changed.stdout
    (project / "pipe.py").write_text(PIPE.format(version="1.1", row="a,b\\n1,3\\n"))
    bumped = _mlpipe(project, "check", "pipe.py", "--fail-on", "warning")
    assert bumped.returncode == 0 and "MP805" not in bumped.stdout


def test_an_absent_or_unreadable_store_knows_nothing(tmp_path):
    assert recorded_code_digests(f"sqlite:///{tmp_path / 'none.sqlite'}", ["make"]) == {}
    (tmp_path / "bad.sqlite").write_bytes(b"not a database")
    assert recorded_code_digests(f"sqlite:///{tmp_path / 'bad.sqlite'}", ["make"]) == {}
    assert recorded_code_digests("postgresql://nobody@127.0.0.1:1/none", ["make"]) == {}
