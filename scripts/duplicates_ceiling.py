"""`make duplicates`: the pairs of places in mlpipe/ that share six or more lines (the
``duplicates`` command's rows), the Alembic migrations left out, under a ceiling that only
goes down.

The ceiling is the number in ``.duplicates-ceiling``. More pairs than that fail, listing
them; fewer pass and ask for the ceiling to be lowered (``--lower`` writes the new count). A
row is a place to look, not a verdict: fold what is the same logic, and leave what only has the
same shape (a dataclass's fields, an import list, a table of codes). The ``duplicates``
command is a developer tool, not a dependency: where it is not on PATH (CI may not have it)
this says so and exits 0.

Usage: python scripts/duplicates_ceiling.py [--lower]
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ceilings import Ceiling

ROOT = Path(__file__).resolve().parent.parent
CEILING = Ceiling(ROOT / ".duplicates-ceiling",
                  "pairs of places in mlpipe/ (migrations left out) that share six or more lines;"
                  "\nonly goes down (scripts/duplicates_ceiling.py --lower, after folding some).")
PACKAGE = "mlpipe"
#: A migration is history (a landed revision is never edited): its pairs are not counted.
MIGRATIONS = "evidence/storage/migrations/"
_ROW = re.compile(r"^D\d+ (?P<a>\S+):\d+-\d+ ~ (?P<b>\S+):\d+-\d+")


def counted(output: str) -> list[str]:
    """The rows of the ``duplicates`` command's ``output`` with neither side in a migration."""
    rows = []
    for line in output.splitlines():
        m = _ROW.match(line)
        if m and MIGRATIONS not in m["a"] and MIGRATIONS not in m["b"]:
            rows.append(line)
    return rows


def incomplete(output: str) -> str | None:
    """The command's ``incomplete: ...`` line, where it did not read or pair everything."""
    return next((line for line in output.splitlines() if line.startswith("incomplete:")), None)


def verdict(count: int, ceiling: int) -> tuple[int, str]:
    """``(exit status, line to print)`` for ``count`` pairs against ``ceiling``."""
    if count > ceiling:
        return 1, (f"duplicates: {count} pairs in {PACKAGE}/ (migrations left out), "
                   f"{count - ceiling} more than the ceiling of {ceiling}; fold the new ones "
                   f"(duplicates --change shows what this change wrote again)")
    if count < ceiling:
        return 0, (f"duplicates: {count} pairs in {PACKAGE}/, under the ceiling of {ceiling}: "
                   f"lower the ceiling to {count} (python scripts/duplicates_ceiling.py --lower)")
    return 0, f"duplicates: {count} pairs in {PACKAGE}/, at the ceiling of {ceiling}"


def run(tool: str) -> str:
    """The ``duplicates`` command's rows over the package, all of them."""
    done = subprocess.run([tool, "--repo", str(ROOT / PACKAGE), "--most", "200",
                           "--seconds", "120"], capture_output=True, text=True, check=False)
    return done.stdout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lower", action="store_true",
                        help="write the count into .duplicates-ceiling when it is lower")
    args = parser.parse_args(argv)
    tool = shutil.which("duplicates")
    if tool is None:
        print("duplicates: the `duplicates` command is not on PATH here; the count of "
              "duplicate pairs is not checked (a developer tool, not a dependency)")
        return 0
    output = run(tool)
    cut = incomplete(output)
    if cut is not None:
        print(f"duplicates: the command did not read everything ({cut}); not judged",
              file=sys.stderr)
        return 1
    rows = counted(output)
    ceiling = CEILING.read()
    if args.lower and len(rows) < ceiling:
        CEILING.write(len(rows))
        print(f"duplicates: ceiling lowered from {ceiling} to {len(rows)}")
        return 0
    status, line = verdict(len(rows), ceiling)
    if status:
        print("\n".join(rows), file=sys.stderr)
    print(line, file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())
