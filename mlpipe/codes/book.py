"""The book every diagnostic code is published in: ``publish`` enters a code, ``named`` and
``published`` read it back, ``explain`` prints its documentation. The table itself lies beside
it (``pipelines.py``, ``records.py``); ``mlpipe.codes`` is the one face of both. Imports only
diagnostics.
"""
from __future__ import annotations

import re

from mlpipe.diagnostics import Code, Severity

#: code -> Code, for every published code; name -> Code, the same entries.
CODES: dict[str, Code] = {}
_BY_NAME: dict[str, Code] = {}


def publish(code: str, name: str, severity: Severity, summary: str) -> Code:
    """Enter one code in the book.

    Raises:
        ValueError: the code or its name is published already.
    """
    entry = Code(code, name, severity, summary)
    if code in CODES:
        raise ValueError(f"diagnostic code {code} is published twice")
    if name in _BY_NAME:
        raise ValueError(f"diagnostic name {name!r} is used by two codes")
    CODES[code] = _BY_NAME[name] = entry
    return entry

def named(name: str) -> Code:
    """The published code with kebab-case ``name``.

    Raises:
        KeyError: no code has that name.

    Example:
        >>> named("artifact-kind-mismatch").code
        'MP301'
    """
    return _BY_NAME[name]


def published() -> list[Code]:
    """Every published code, in code order."""
    return sorted(CODES.values(), key=lambda c: c.code)


def explain(code_or_name: str) -> str:
    """The documentation of one published code (``mlpipe check --explain``): its heading,
    severity and summary, then its docs/checks.md section (What / Why / Example / Fix).

    Raises:
        KeyError: no published code has that code or name.

    Example:
        >>> print(explain("MP301"))  # doctest: +ELLIPSIS
        MP301 artifact-kind-mismatch (error)
        ...
    """
    from importlib.resources import files

    wanted = code_or_name.strip()
    entry = CODES.get(wanted.upper()) or named(wanted.lower())
    text = files("mlpipe").joinpath("codes.md").read_text(encoding="utf-8")
    found = re.search(rf"^## {entry.code} {re.escape(entry.name)}\n(.*?)(?=^## |\Z)", text,
                      re.S | re.M)
    body = found.group(1).strip() if found else "(no documentation: see docs/checks.md)"
    return (f"{entry.code} {entry.name} ({entry.severity.value})\n{entry.summary}\n\n"
            f"{body}\n")
