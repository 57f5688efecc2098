"""The first run in a project writes the project's .gitignore entry for the store and the
artifacts (evidence.ignores): git then ignores them, and a later run adds nothing."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from bundle_project import BundleProject
from mlpipe.evidence import locate, open_store
from mlpipe.evidence.storage.ignores import HEADER, ensure_ignored

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.delenv("MLPIPE_HOME", raising=False)
    monkeypatch.delenv("MLPIPE_STORE_URL", raising=False)
    monkeypatch.delenv("MLPIPE_ARTIFACT_ROOT", raising=False)
    root = tmp_path / "proj"
    root.mkdir()
    (root / "mlpipe.toml").write_text("")
    return root


@needs_git
def test_the_first_store_in_a_git_project_is_ignored_and_the_entry_written_once(project):
    assert git(project, "init", "-q").returncode == 0
    open_store(str(project)).close()
    text = (project / ".gitignore").read_text()
    assert text == f"{HEADER}\n/evidence/\n/.amlignore\n"
    assert git(project, "check-ignore", "-q", "evidence/store.sqlite").returncode == 0
    open_store(str(project)).close()
    assert ensure_ignored(locate(str(project)), str(project)) is None
    assert (project / ".gitignore").read_text() == text


@needs_git
def test_what_git_already_ignores_is_not_written_again(project, monkeypatch):
    assert git(project, "init", "-q").returncode == 0
    (project / ".gitignore").write_text("build/\nevidence/*\n")
    open_store(str(project)).close()
    assert (project / ".gitignore").read_text() == "build/\nevidence/*\n"  # left as it was
    monkeypatch.setenv("MLPIPE_ARTIFACT_ROOT", str(project / "cas"))
    assert ensure_ignored(locate(str(project)), str(project)) == project / ".gitignore"
    assert (project / ".gitignore").read_text() == (
        f"build/\nevidence/*\n\n{HEADER}\n/cas/\n/.amlignore\n")


def test_a_project_outside_git_gets_the_entry_and_an_artifact_root_of_its_own(project,
                                                                              monkeypatch):
    monkeypatch.setenv("MLPIPE_ARTIFACT_ROOT", str(project / "data" / "artifacts"))
    (project / ".gitignore").write_text("*.log")  # no newline at its end
    open_store(str(project)).close()
    assert (project / ".gitignore").read_text() == (
        f"*.log\n\n{HEADER}\n/evidence/\n/data/artifacts/\n/.amlignore\n")


def test_a_home_outside_the_project_writes_nothing(project, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "elsewhere"))
    open_store(str(project)).close()
    assert not (project / ".gitignore").exists()


@needs_git
@pytest.mark.slow
def test_after_the_first_submit_git_add_all_commits_no_store_or_artifact(tmp_path):
    proj = BundleProject(tmp_path / "p")
    assert git(proj.root, "init", "-q").returncode == 0
    done = proj.cli("submit", "review.py:review", "--input", "data=data.txt")
    assert done.returncode == 0, done.stderr
    assert git(proj.root, "add", "-A").returncode == 0
    staged = sorted(git(proj.root, "diff", "--cached", "--name-only").stdout.split())
    assert {".gitignore", "data.txt", "mlpipe.toml", "review.py"} <= set(staged)
    assert [p for p in staged if p.startswith("evidence/")] == []
