"""`make typecheck`'s check of the package itself: pyright's errors over mlpipe/ under a ceiling
that only goes down, and the public API (``mlpipe.__all__``) fully typed.

The ceiling is the number in ``.pyright-ceiling``. More errors than that fail, listing them;
fewer pass and ask for the ceiling to be lowered (``--lower`` writes the new count, and the
commit that fixed them carries it), so a fixed error cannot quietly come back; fewer do not
fail, since a newer release of a library mlpipe imports can also lower the count. The public
API is judged by ``pyright --verifytypes``: every name in ``mlpipe.__all__``, and every member
reachable through it, must have a known, unambiguous type (a missing docstring is not judged
here).

Usage: python scripts/pyright_ceiling.py [--pyright PATH] [--lower]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ceilings import Ceiling

ROOT = Path(__file__).resolve().parent.parent
CEILING = Ceiling(ROOT / ".pyright-ceiling",
                  "pyright's errors over mlpipe/ may not rise above this number, and the number"
                  "\nonly goes down (scripts/pyright_ceiling.py --lower, after fixing some).")
PACKAGE = "mlpipe"


def errors(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The error diagnostics of a ``pyright --outputjson`` report."""
    return [d for d in report.get("generalDiagnostics", []) if d.get("severity") == "error"]


def describe(diagnostic: Mapping[str, Any], root: Path = ROOT) -> str:
    file = Path(diagnostic.get("file", "?"))
    try:
        file = file.relative_to(root)
    except ValueError:
        pass
    line = diagnostic.get("range", {}).get("start", {}).get("line", -1) + 1
    rule = diagnostic.get("rule")
    message = " ".join(str(diagnostic.get("message", "")).split())
    return f"{file}:{line}: {message}" + (f" ({rule})" if rule else "")


def verdict(count: int, ceiling: int) -> tuple[int, str]:
    """The exit status and the line to print for ``count`` errors under ``ceiling``."""
    if count > ceiling:
        return 1, (f"pyright reports {count} errors over {PACKAGE}/, {count - ceiling} more than "
                   f"the ceiling of {ceiling} (.pyright-ceiling): fix what your change added "
                   f"(listed above); the ceiling only goes down")
    if count < ceiling:
        # A pass: a lower count is what the ceiling is for, and it can also come from a newer
        # release of a library mlpipe imports (a clean machine installs the newest), which must
        # not fail a build. The reminder makes the next commit ratchet it down.
        return 0, (f"pyright reports {count} errors over {PACKAGE}/, below the ceiling of "
                   f"{ceiling}: lower the ceiling to {count} "
                   f"(python scripts/pyright_ceiling.py --lower) so they cannot come back")
    return 0, f"pyright: {count} errors over {PACKAGE}/, at the ceiling of {ceiling}"


def public_roots(symbols: Iterable[Mapping[str, Any]], exported: Iterable[str]) -> set[str]:
    """The full names of what ``mlpipe.__all__`` exports: ``mlpipe.X`` and where X is defined."""
    public = {f"{PACKAGE}.{name}" for name in exported}
    roots = set(public)
    for symbol in symbols:
        if public & set(symbol.get("alternateNames", [])):
            roots.add(symbol["name"])
    return roots


def public_problems(symbols: Sequence[Mapping[str, Any]], exported: Iterable[str]) -> list[str]:
    """Each symbol of the public API whose type is unknown or ambiguous, with pyright's why."""
    exported = list(exported)
    seen = {symbol["name"] for symbol in symbols}
    problems = [f"{PACKAGE}.{name}: not in pyright's report (is it still exported?)"
                for name in exported if f"{PACKAGE}.{name}" not in seen]
    roots = public_roots(symbols, exported)
    for symbol in symbols:
        name = symbol["name"]
        if not any(name == r or name.startswith(r + ".") for r in roots):
            continue
        why = [" ".join(str(d.get("message", "")).split()) for d in symbol.get("diagnostics", [])
               if not str(d.get("message", "")).startswith("No docstring")]
        if why or not symbol.get("isTypeKnown", True) or symbol.get("isTypeAmbiguous", False):
            state = ("unknown" if not symbol.get("isTypeKnown", True) else
                     "ambiguous" if symbol.get("isTypeAmbiguous", False) else "incomplete")
            problems.append(f"{name}: type {state}" + (f": {'; '.join(why)}" if why else ""))
    return problems


def run_pyright(pyright: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([pyright, "--outputjson", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.exit(f"pyright {' '.join(args)} gave no JSON report (exit {proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def exported_names() -> list[str]:
    proc = subprocess.run([sys.executable, "-c", f"import {PACKAGE}; print(*{PACKAGE}.__all__)"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, check=True)
    return proc.stdout.split()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyright", default=str(Path(sys.executable).with_name("pyright")),
                        help="the pyright executable (the venv's by default)")
    parser.add_argument("--lower", action="store_true",
                        help="write today's count to .pyright-ceiling when it is below it")
    args = parser.parse_args(argv)

    found = errors(run_pyright(args.pyright, PACKAGE))
    ceiling = CEILING.read()
    if args.lower:
        if len(found) > ceiling:
            print(f"{len(found)} errors is above the ceiling of {ceiling}; it is never raised",
                  file=sys.stderr)
            return 1
        CEILING.write(len(found))
        print(f"ceiling: {ceiling} -> {len(found)}")
        return 0
    status, line = verdict(len(found), ceiling)
    if len(found) > ceiling:
        for diagnostic in found:
            print(describe(diagnostic))
        per_file = Counter(describe(d).split(":", 1)[0] for d in found)
        print("per file: " + ", ".join(f"{f} {n}" for f, n in per_file.most_common()))
    print(line, file=sys.stderr if status else sys.stdout)

    report = run_pyright(args.pyright, "--verifytypes", PACKAGE, "--ignoreexternal")
    problems = public_problems(report.get("typeCompleteness", {}).get("symbols", []),
                               exported_names())
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"the public API ({PACKAGE}.__all__) has {len(problems)} symbol(s) whose type "
              f"is not fully known: annotate them", file=sys.stderr)
        return 1
    print(f"public API ({PACKAGE}.__all__): every type known")
    return status


if __name__ == "__main__":
    sys.exit(main())
