"""What changed in a component's code between two code digests, for a reviewer: the file, the
top-level functions and classes whose source differs, and a unified diff of the source files
the store kept for each digest (``source_texts``). Reads texts it is given; never a file.
"""
from __future__ import annotations

import ast
import difflib
from typing import Any

#: A diff longer than this many lines is cut (the rest counted), so a screen stays readable.
MAX_DIFF_LINES = 400


def _definitions(text: str) -> dict[str, str] | None:
    """Top-level name -> a dump of its definition (functions, classes, assignments)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found: dict[str, str] = {}
    for stmt in tree.body:
        names: list[str] = []
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [stmt.name]
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
        for name in names:
            found[name] = found.get(name, "") + ast.dump(stmt)
    return found


def source_change(before: dict[str, Any] | None, after: dict[str, Any] | None
                  ) -> dict[str, Any]:
    """How the kept source of one code digest became another's.

    Args:
        before, after: ``Reader.source_text`` results (None: no source kept for that digest).

    Returns:
        ``{"file", "function", "changed", "diff", "note"}``: ``changed`` the top-level names
        whose definition differs (added and removed ones too), ``diff`` the unified diff
        (None where a side has no kept source), ``note`` what a reader must know (no source
        kept, or the file unchanged because the digest also covers local imports).

    Example:
        >>> source_change({"file": "c.py", "function": "f", "line": 1, "text": "x = 1\\n"},
        ...               {"file": "c.py", "function": "f", "line": 1, "text": "x = 2\\n"}
        ...               )["changed"]
        ['x']
    """
    side = after or before or {}
    out: dict[str, Any] = {"file": side.get("file"), "function": side.get("function"),
                           "changed": [], "diff": None, "note": None}
    if before is None or after is None:
        missing = "the earlier" if before is None else "the later"
        out["note"] = (f"no source was kept for {missing} code (a script component, or a run "
                       f"recorded before mlpipe kept source texts)")
        return out
    a, b = before["text"], after["text"]
    if a == b and before["file"] == after["file"]:
        out["note"] = (f"{after['file']} is unchanged: the code digest also covers the local "
                       f"modules it imports")
        return out
    da, db = _definitions(a), _definitions(b)
    if da is not None and db is not None:
        out["changed"] = sorted(n for n in set(da) | set(db) if da.get(n) != db.get(n))
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(),
                                      fromfile=f"a/{before['file']}", tofile=f"b/{after['file']}",
                                      lineterm=""))
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... ({len(lines) - MAX_DIFF_LINES} more lines)"]
    out["diff"] = "\n".join(lines)
    return out


def change_lines(change: dict[str, Any]) -> list[str]:
    """The text form: a headline naming the file and what changed, then the diff."""
    where = change.get("file") or "the component's code"
    if change.get("note"):
        return [f"source: {change['note']}"]
    names = change.get("changed") or []
    head = f"source: {where} changed" + (f" in {', '.join(names)}" if names else "") + \
        (f" (component function {change['function']})" if change.get("function") else "")
    return [head, *(change.get("diff") or "").splitlines()]


__all__ = ["MAX_DIFF_LINES", "change_lines", "source_change"]
