"""The ceiling files of the scripts that hold a count down (``.pyright-ceiling``,
``.duplicates-ceiling``): one number that only goes down, under comment lines saying what it
counts. Imported by those scripts from beside them (``python scripts/NAME.py`` puts this folder
first on the path).
"""
from __future__ import annotations

from pathlib import Path


def read_ceiling(path: Path) -> int:
    """The committed ceiling: the first line of ``path`` that is not a comment."""
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return int(line)
    raise ValueError(f"{path} holds no number")


def write_ceiling(count: int, path: Path, about: str) -> None:
    """Write ``count`` into ``path`` under ``about`` (its lines become comment lines)."""
    comment = "".join(f"# {line}\n" for line in about.splitlines())
    path.write_text(f"{comment}{count}\n", encoding="utf-8")
