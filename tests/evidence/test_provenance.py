"""Honest provenance: the code revision covers the files the pipeline loaded (its module, the
component modules and the local modules they import), each committed, modified or untracked;
`(clean)` only when all are committed. Real git, real submits."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "provenance"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test"}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    for name in ("flow.py", "helpers.py"):
        shutil.copy(FIXTURE / name, root / name)
    (root / "mlpipe.toml").write_text("")
    (root / "data.txt").write_text("1 2 3 4\n")
    (root / ".gitignore").write_text("evidence/\n")
    git(root, "init", "-q")
    git(root, "add", "flow.py", "mlpipe.toml", ".gitignore")
    git(root, "commit", "-q", "-m", "flow, without helpers.py")
    return root


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME", "MLPIPE_STORE_URL")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=180)


def submit(root: Path, *extra: str) -> dict:
    done = cli(root, "submit", "flow.py:flow", "--input", "data=data.txt", *extra)
    assert done.returncode == 0, done.stderr
    cand = re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1)
    shown = cli(root, "evidence", cand, "--format", "json")
    assert shown.returncode == 0, shown.stderr   # MP717 is a warning: the gate lets it through
    return {"candidate": cand, "bundle": json.loads(shown.stdout),
            "text": cli(root, "evidence", cand).stdout}


@pytest.mark.slow
def test_an_untracked_local_module_is_named_and_the_tree_is_not_called_clean(repo):
    head = git(repo, "rev-parse", "HEAD")
    first = submit(repo)
    code = first["bundle"]["predicate"]["code"]
    assert code == {"commit": head, "dirty": False, "clean": False,
                    "files": [{"path": "flow.py", "state": "committed"},
                              {"path": "helpers.py", "state": "untracked"}]}
    [finding] = first["bundle"]["predicate"]["findings"]
    assert (finding["code"], finding["severity"]) == ("MP717", "warning")
    assert finding["message"] == (
        f"1 of the 2 files the pipeline loaded is not in commit {head[:12]} as they ran: "
        f"helpers.py (untracked); checking out the commit does not give the code that made "
        f"this candidate")
    assert (f"  code {head} (NOT clean: 1 of 2 loaded files not committed)\n"
            f"    file helpers.py  untracked\n") in first["text"]
    assert "(clean" not in first["text"]

    # committed, then flow.py edited: modified (a new parameter value makes a new candidate)
    git(repo, "add", "helpers.py")
    git(repo, "commit", "-q", "-m", "helpers")
    with open(repo / "flow.py", "a") as fh:
        fh.write("\n# an edit nobody committed\n")
    edited = submit(repo, "--param", "scale=3")
    code = edited["bundle"]["predicate"]["code"]
    assert code["files"] == [{"path": "flow.py", "state": "modified"},
                             {"path": "helpers.py", "state": "committed"}]
    assert (code["dirty"], code["clean"]) == (True, False)
    assert "(NOT clean: 1 of 2 loaded files not committed, DIRTY working tree)" in edited["text"]

    git(repo, "commit", "-q", "-am", "the edit")
    clean = submit(repo, "--param", "scale=4")
    code = clean["bundle"]["predicate"]["code"]
    assert (code["clean"], [f["state"] for f in code["files"]]) == (True, ["committed"] * 2)
    assert clean["bundle"]["predicate"]["findings"] == []
    assert (f"  code {git(repo, 'rev-parse', 'HEAD')} (clean: the 2 files the pipeline loaded "
            f"are committed)") in clean["text"]


def test_file_states_against_head(repo, tmp_path):
    from mlpipe.evidence.storage.revision import file_states

    (repo / "sub").mkdir()
    (repo / "sub" / "a.py").write_text("a = 1\n")
    git(repo, "add", "sub/a.py", "helpers.py")
    git(repo, "commit", "-q", "-m", "sub")
    (repo / "staged.py").write_text("")
    git(repo, "add", "staged.py")                      # in the index, not in the commit
    (repo / "ignored.py").write_text("")
    (repo / ".gitignore").write_text("evidence/\nignored.py\n")
    (repo / "helpers.py").write_text("changed = True\n")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("")
    files = [str(repo / n) for n in ("flow.py", "helpers.py", "staged.py", "ignored.py", "sub")]
    assert file_states(str(repo), [*files, str(outside)]) == [
        {"path": str(outside), "state": "outside"},
        {"path": "flow.py", "state": "committed"},
        {"path": "helpers.py", "state": "modified"},
        {"path": "ignored.py", "state": "untracked"},
        {"path": "staged.py", "state": "untracked"},
        {"path": "sub", "state": "committed"}]
    (repo / "sub" / "new.py").write_text("")
    assert file_states(str(repo), [str(repo / "sub")]) == [{"path": "sub", "state": "untracked"}]
    assert file_states(str(tmp_path / "nowhere-git"), files) is None


def test_pipeline_files_follow_local_imports(repo, monkeypatch):
    from mlpipe.evidence.storage.revision import pipeline_files
    from mlpipe.loader import load_spec

    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    spec, _ = load_spec(str(repo / "flow.py:flow"))
    assert pipeline_files(spec) == [str(repo / "flow.py"), str(repo / "helpers.py")]
