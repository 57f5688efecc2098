"""The user's modules run as their source says, whatever bytecode lies beside them.

Python runs a module's ``__pycache__`` bytecode while the source's mtime (whole seconds) and
size match: a file rewritten within the same second at the same size runs its old code. mlpipe
digests the source, so a step must run the source too (``mlpipe.localimport``).
"""
from __future__ import annotations

import os
import py_compile
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mlpipe import localimport

KIT = textwrap.dedent("""\
    from pathlib import Path

    from mlpipe import Input, Output, component
    from mlpipe.runtime import log_metric

    FACTOR = {factor}


    @component
    def scale(src: Input["uri_file"], out: Output["uri_file"]):
        value = int(Path(src).read_text()) * FACTOR
        Path(out).write_text(str(value))
        log_metric("factor", FACTOR, population="one number")
    """)
FLOW = textwrap.dedent("""\
    from kit import scale

    from mlpipe import pipeline


    @pipeline
    def flow(src):
        return {"scaled": scale(src=src).out}
    """)


def _stale(path: Path, old: str, new: str) -> None:
    """``path`` holds ``new`` while its cached bytecode, compiled from ``old``, still looks
    current to Python: the same size, the same mtime."""
    assert len(old) == len(new)
    path.write_text(old)
    stamp = os.stat(path).st_mtime_ns
    py_compile.compile(str(path), doraise=True)   # timestamp-checked, as an import writes it
    path.write_text(new)
    os.utime(path, ns=(stamp, stamp))


def _import_value(folder: Path, *, install: bool, module: str = "mod") -> str:
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            + ("from mlpipe import localimport; localimport.install()\n" if install else "")
            + f"import {module}; print({module}.VALUE)")
    # bytecode may be written, as on a user's machine (this suite's CI image forbids it)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_local_module_rewritten_at_the_same_size_and_second_imports_its_new_source(tmp_path):
    _stale(tmp_path / "mod.py", "VALUE = 1\n", "VALUE = 2\n")
    # the premise: plain Python runs the bytecode of the old source
    assert _import_value(tmp_path, install=False) == "1"
    assert _import_value(tmp_path, install=True) == "2"


def test_no_bytecode_is_written_for_a_local_module(tmp_path):
    (tmp_path / "plain.py").write_text("VALUE = 1\n")
    (tmp_path / "fresh.py").write_text("VALUE = 2\n")
    assert _import_value(tmp_path, install=False, module="plain") == "1"
    assert _import_value(tmp_path, install=True, module="fresh") == "2"
    # Python wrote bytecode for the plain import, nothing for the one under the hook
    assert [p.name.split(".")[0] for p in (tmp_path / "__pycache__").iterdir()] == ["plain"]


def test_what_is_local(tmp_path):
    import json

    import mlpipe

    assert localimport.is_local(str(tmp_path / "mod.py"))
    assert not localimport.is_local(json.__file__)           # the standard library
    assert not localimport.is_local(pytest.__file__)         # an installed package
    assert not localimport.is_local(mlpipe.__file__)         # mlpipe itself


def test_installing_twice_adds_one_hook():
    before = list(sys.path_hooks)
    try:
        localimport.install()
        localimport.install()
        assert sum(h is localimport._local_folders for h in sys.path_hooks) == 1
    finally:
        sys.path_hooks[:] = before
        sys.path_importer_cache.clear()


@pytest.mark.slow
def test_a_step_runs_the_source_its_code_digest_names(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "flow.py").write_text(FLOW)
    (project / "n.txt").write_text("5")
    _stale(project / "kit.py", KIT.format(factor=3), KIT.format(factor=4))
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME", "MLPIPE_STORE_URL")}
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", "flow.py", "--input",
                           "src=n.txt"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=120)
    assert "run r-" in done.stdout, done.stdout + done.stderr
    with sqlite3.connect(project / "evidence" / "store.sqlite") as db:
        logged = db.execute("SELECT value FROM metrics WHERE name = 'factor'").fetchall()
    # the digest was taken of FACTOR = 4: the step ran FACTOR = 4, not the stale bytecode's 3
    assert logged == [(4.0,)]
