"""The ceiling files of the scripts that hold a count down (``.pyright-ceiling``,
``.duplicates-ceiling``): one number that only goes down, under comment lines saying what it
counts. Imported by those scripts from beside them (``python scripts/NAME.py`` puts this folder
first on the path).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ceiling:
    """The ceiling file at ``path``; ``about`` is what it counts (written as comment lines)."""

    path: Path
    about: str

    def read(self) -> int:
        """The committed ceiling: the first line of the file that is not a comment."""
        for line in self.path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                return int(line)
        raise ValueError(f"{self.path} holds no number")

    def write(self, count: int) -> None:
        comment = "".join(f"# {line}\n" for line in self.about.splitlines())
        self.path.write_text(f"{comment}{count}\n", encoding="utf-8")
