"""The code revision a run records: git HEAD and whether tracked files had changed.

Shared by every backend that records runs; never raises (outside a work tree it says so).
"""
from __future__ import annotations

import subprocess


def git_revision(root: str) -> tuple[str | None, bool]:
    """``(commit, dirty)`` of the git work tree at ``root``; ``(None, False)`` outside one.

    Untracked files do not make a tree dirty: only changes to tracked files do.
    """
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None, False
        status = subprocess.run(["git", "-C", root, "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True,
                                timeout=30)
        return head.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, False
