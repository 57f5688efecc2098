"""A reviewer's diff of the code: mlpipe keeps each function component's source file once per
code digest, so `show --why STEP` and `diff RUN_A RUN_B` name the changed file and function
and print a unified diff; `diff` exits 1 when the runs differ and 0 when they do not (as
diff(1)). Real `mlpipe submit` processes, SQLite and PostgreSQL stores."""
from __future__ import annotations

import json
import re

import pytest

from executor_project import Project

pytestmark = pytest.mark.slow


def _rid(result) -> str:
    found = re.search(r"run (r-[0-9a-f]+)", result.stdout + result.stderr)
    assert found, result.stdout + result.stderr
    return found.group(1)


def test_why_and_diff_show_the_changed_function_and_its_source(tmp_path, store_url):
    proj = Project(tmp_path / "proj", store_url=store_url)
    first = _rid(proj.submit("chain"))
    steps = proj.root / "steps.py"
    steps.write_text(steps.read_text().replace("Path(out).write_text(str(n * factor))",
                                               "Path(out).write_text(str(n * factor + 0))"))
    second = _rid(proj.submit("chain"))

    why = proj.cli("show", second, "--why", "double")
    assert why.returncode == 0, why.stderr
    assert re.search(r"    code: sha256:[0-9a-f]{12} -> sha256:[0-9a-f]{12}", why.stdout)
    assert "    source: steps.py changed in double (component function steps:double)" in why.stdout
    assert "    --- a/steps.py\n    +++ b/steps.py\n" in why.stdout
    assert "    -    Path(out).write_text(str(n * factor))\n" \
           "    +    Path(out).write_text(str(n * factor + 0))" in why.stdout

    diff = proj.cli("diff", first, second)
    assert diff.returncode == 1, diff.stderr
    assert "code:\n  double: sha256:" in diff.stdout
    assert "    source: steps.py changed in double" in diff.stdout
    assert "    +    Path(out).write_text(str(n * factor + 0))" in diff.stdout
    as_json = proj.cli("diff", first, second, "--format", "json")
    assert as_json.returncode == 1
    [code] = [d for d in json.loads(as_json.stdout)["differences"]["code"]
              if d["what"] == "double"]
    assert code["source"]["file"] == "steps.py" and code["source"]["changed"] == ["double"]
    assert code["source"]["diff"].startswith("--- a/steps.py\n+++ b/steps.py\n")

    same = proj.cli("diff", second, second)
    assert same.returncode == 0 and "no differences" in same.stdout


def test_a_docstring_edit_keeps_the_digest_and_a_change_elsewhere_in_the_file_is_named(
        tmp_path):
    proj = Project(tmp_path / "proj")
    first = _rid(proj.submit("chain"))
    steps = proj.root / "steps.py"
    steps.write_text(steps.read_text() + "\n\nUNUSED = 1\n")  # a name no component uses
    second = _rid(proj.submit("chain"))
    diff = proj.cli("diff", first, second)
    assert "code:" not in diff.stdout  # the code digests did not move


def test_a_secret_value_in_the_source_is_masked_in_the_kept_text(tmp_path):
    import os
    import shutil
    import sqlite3
    import subprocess
    import sys
    from pathlib import Path

    token = "tok-0123456789abcdef"
    root = tmp_path / "home"
    root.mkdir()
    shutil.copy(Path(__file__).parents[2] / "fixtures" / "secrets" / "project.py",
                root / "project.py")
    with (root / "project.py").open("a") as fh:  # careless code: the token as a literal
        fh.write(f'\n\nFALLBACK_TOKEN = "{token}"\n')
    (root / "data.txt").write_text("1 2 3 4\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME", "MLPIPE_STORE_URL")}
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", "project.py:fetched",
                           "--input", "data=data.txt", "--secret", "token=HUB_TOKEN"],
                          cwd=root, env={**env, "HUB_TOKEN": token, "MLPIPE_FORKSERVER": "0"},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(root / "evidence" / "store.sqlite") as conn:
        texts = [t for (t,) in conn.execute("SELECT text FROM source_texts")]
    assert texts and all(token not in t for t in texts)
    assert all('FALLBACK_TOKEN = "[secret token]"' in t for t in texts)
