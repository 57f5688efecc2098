"""The code revision a run records: git HEAD, whether tracked files had changed, and the state
of each file the pipeline loaded (committed, modified, untracked, or outside the work tree).

Shared by every backend that records runs; never raises (outside a work tree it says so).
"""
from __future__ import annotations

import os
import subprocess
from typing import Any

#: A loaded file's state: in the commit unchanged; in it but changed; not in it; not in the tree.
COMMITTED, MODIFIED, UNTRACKED, OUTSIDE = "committed", "modified", "untracked", "outside"


def _git(root: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                          timeout=timeout)


def git_revision(root: str) -> tuple[str | None, bool]:
    """``(commit, dirty)`` of the git work tree at ``root``; ``(None, False)`` outside one.

    Untracked files do not make a tree dirty: only changes to tracked files do
    (``file_states`` says which of the files a pipeline loaded are untracked).
    """
    try:
        head = _git(root, "rev-parse", "HEAD", timeout=10)
        if head.returncode != 0:
            return None, False
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
        return head.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, False


def pipeline_files(spec: Any) -> list[str]:
    """The files a pipeline loaded, as absolute paths: its own file, each component's module
    (or YAML file, or a script component's code folder), nested pipelines alike, and the local
    modules those modules import, transitively (as the code digests follow them).

    Args:
        spec: a ``PipelineSpec``.
    """
    from mlpipe.paths import derived_root
    from mlpipe.source import local_module_files

    files: set[str] = set()

    def add(thing: Any) -> None:
        for where in (getattr(thing, "location", None), getattr(thing, "origin", None)):
            if where is not None and where.file:
                files.add(os.path.abspath(where.file))
        code = getattr(thing, "code", None)
        if isinstance(code, str) and ":" not in code.split("/", 1)[0] and os.path.exists(code):
            files.add(os.path.abspath(code))
        for step in getattr(thing, "steps", ()):
            add(step.target)

    add(spec)
    derived = f"{derived_root().absolute()}{os.sep}"  # made from the user's files, not code
    files = {f for f in files if not f.startswith(derived)}
    for file in sorted(files):
        if file.endswith(".py"):
            files |= local_module_files(file)
    return sorted(f for f in files if os.path.exists(f))


def file_states(root: str, files: list[str]) -> list[dict[str, str]] | None:
    """Each of ``files`` as git at ``root`` sees it against HEAD: ``committed`` (in the
    commit, unchanged), ``modified`` (in it, changed, staged or not), ``untracked`` (not in
    the commit: new, ignored, or only staged), ``outside`` (not in the work tree); a folder
    is modified or untracked when any file in it is. Paths relative to the work tree's top.
    None outside a git work tree.
    """
    try:
        top = _git(root, "rev-parse", "--show-toplevel", timeout=10)
        if top.returncode != 0:
            return None
        top_dir = os.path.realpath(top.stdout.strip())
        rel: dict[str, str] = {}
        states: list[dict[str, str]] = []
        for file in files:
            real = os.path.realpath(file)
            if real != top_dir and not real.startswith(top_dir + os.sep):
                states.append({"path": file, "state": OUTSIDE})
                continue
            rel[file] = os.path.relpath(real, top_dir).replace(os.sep, "/")
        if rel:
            paths = sorted(set(rel.values()))
            committed = set(_git(top_dir, "ls-tree", "-r", "--name-only", "HEAD", "--",
                                 *paths).stdout.splitlines())
            changed = set(_git(top_dir, "diff", "--name-only", "HEAD", "--",
                               *paths).stdout.splitlines())
            others = set(_git(top_dir, "ls-files", "--others", "--", *paths).stdout.splitlines())
            for path in sorted(rel.values()):
                def under(names: set[str], p: str = path) -> bool:
                    return p in names or any(n.startswith(p + "/") for n in names)
                if under(others) or not under(committed):
                    state = UNTRACKED
                elif under(changed):
                    state = MODIFIED
                else:
                    state = COMMITTED
                states.append({"path": path, "state": state})
        return sorted(states, key=lambda x: x["path"])
    except (OSError, subprocess.SubprocessError):
        return None
