"""How paths are shown to users: relative to the working directory when inside it.

Locations are stored absolute; only their rendering depends on where the user stands.
"""
from __future__ import annotations

import functools
import os


def display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies inside it, else unchanged."""
    return _display_path(path, os.getcwd())


@functools.lru_cache(maxsize=1024)
def _display_path(path: str, cwd: str) -> str:
    if not os.path.isabs(path):
        return path
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith(os.pardir + os.sep) else rel
