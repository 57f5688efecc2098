"""The project's ``.gitignore`` entry for this home's store and artifacts, written on the first
run in a project, so that ``git add -A`` never commits the store and a run is not "dirty".

Appends to the project's ``.gitignore`` only the folders git does not ignore yet (asked with
``git check-ignore`` in a git checkout, else read from the file's own lines), and only when the
store or the artifacts are among them (a project that ignores them already is left as it is);
never rewrites or reorders what is there. Opens no store.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from mlpipe.evidence.storage.config import StoreConfig, project_root

GITIGNORE = ".gitignore"
HEADER = ("# mlpipe: this home's evidence store and artifacts, and the .amlignore that "
          "`mlpipe compile` writes (never committed)")


def _under(root: Path, folder: Path) -> str | None:
    try:
        rel = folder.resolve().relative_to(root)
    except ValueError:
        return None
    return None if rel == Path(".") else rel.as_posix()


def wanted(root: Path, location: StoreConfig) -> list[str]:
    """The ``.gitignore`` lines this home needs at project ``root`` (anchored folders)."""
    lines = []
    for folder in (location.home, location.artifacts):
        rel = _under(root, folder)
        if rel is not None and not any(rel == w or rel.startswith(w + "/") for w in lines):
            lines.append(rel)
    return [f"/{rel}/" for rel in lines] + ["/.amlignore"]


def _ignored_by_git(root: Path, paths: list[str]) -> set[str] | None:
    """Which of ``paths`` git ignores in the checkout at ``root``; None when it cannot say."""
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return None
    probes = {p: p.strip("/") + ("/probe" if p.endswith("/") else "") for p in paths}
    try:
        done = subprocess.run([git, "check-ignore", "--no-index", "--stdin"], cwd=root,
                              input="\n".join(probes.values()) + "\n", capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode not in (0, 1):
        return None
    hit = set(done.stdout.splitlines())
    return {p for p, probe in probes.items() if probe in hit}


def first_run(location: StoreConfig) -> bool:
    """Whether this home, or its SQLite store, has not been made yet: the first run."""
    url = location.url
    database = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ""
    return not location.home.exists() or (bool(database) and not os.path.exists(database))


def ensure_ignored(location: StoreConfig, start: str | os.PathLike[str] | None = None
                   ) -> Path | None:
    """Append the lines this home needs to the project's ``.gitignore``; its path when it
    wrote something, else None (all ignored already, or nothing of the home in the project).

    Example:
        >>> ensure_ignored(locate("/home/ana/proj"))
        PosixPath('/home/ana/proj/.gitignore')   # now holds /evidence/ and /.amlignore
    """
    root = project_root(start)
    lines = wanted(root, location)
    path = root / GITIGNORE
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
    except OSError:
        return None
    present = {line.strip() for line in text.splitlines()}
    by_git = _ignored_by_git(root, lines)
    missing = [line for line in lines if line not in present
               and (by_git is None or line not in by_git)]
    if not [line for line in missing if line != "/.amlignore"]:
        return None  # the store is ignored already: the .gitignore is the user's to keep
    block = ("" if not text or text.endswith("\n") else "\n") + \
        ("\n" if text else "") + "\n".join([HEADER, *missing]) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(block)
    except OSError:
        return None  # a read-only project still runs; the docs say what to ignore
    return path


__all__ = ["ensure_ignored", "first_run", "wanted"]
