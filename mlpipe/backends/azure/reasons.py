"""azure-ai-ml's reason for refusing a file, whole and on one line.

azure-ai-ml wraps a schema error in layers ("Validation for CommandSchema failed:" then a
JSON report whose messages are themselves "Validation for CommandJobSchema failed:" and
JSON), followed by boilerplate (links to the schema and to VS Code). Its first line says
only which schema failed; the reason is the innermost field and message. This module reads
the layers down to each ``field: message`` so the user sees what azure-ai-ml objects to.
Never imports azure-ai-ml.
"""
from __future__ import annotations

import json
import re
from typing import Any

_FAILED = re.compile(r"Validation for \w+ failed:\s*")
#: Lines azure-ai-ml appends to every refusal; they say nothing of this one.
_BOILERPLATE = re.compile(r"\s*(If you are trying to configure|Visit this link|The easiest way "
                          r"to author)", re.S)


def refusal_reason(exc: BaseException) -> str:
    """Each ``field: message`` azure-ai-ml reports in ``exc``, joined with ``; `` (its text,
    boilerplate removed, where it carries no report).

    Example:
        >>> refusal_reason(ValueError('Validation for CommandSchema failed:\\n {"limits": '
        ...                           '{"timeout": ["Not a valid integer."]}}'))
        'limits.timeout: Not a valid integer.'
    """
    found: list[tuple[str, str]] = []
    _collect(str(exc), "", found)
    by_field: dict[str, list[str]] = {}
    for where, message in found:
        messages = by_field.setdefault(where, [])
        if message not in messages:
            messages.append(message)
    if by_field:
        return "; ".join(f"{where}: {' / '.join(messages)}" if where else " / ".join(messages)
                         for where, messages in by_field.items())
    return _plain(str(exc)) or type(exc).__name__


def _plain(text: str) -> str:
    text = _BOILERPLATE.split(text, maxsplit=1)[0]
    return " ".join(text.split())


def _collect(text: str, prefix: str, found: list[tuple[str, str]]) -> None:
    m = _FAILED.search(text)
    if m is None:
        plain = _plain(text)
        if plain:
            found.append((prefix, plain))
        return
    start = text.find("{", m.end())
    if start < 0:
        _collect(text[m.end():], prefix, found)
        return
    try:
        report, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        found.append((prefix, _plain(text[m.end():])))
        return
    _walk(report, prefix, found)


def _walk(value: Any, prefix: str, found: list[tuple[str, str]]) -> None:
    if isinstance(value, dict) and isinstance(value.get("errors"), list):
        for error in value["errors"]:
            if not isinstance(error, dict):
                continue
            path = str(error.get("path") or "")
            here = prefix if path in ("", "*") else _join(prefix, path)
            _collect(str(error.get("message", "")), here, found)
        return
    if isinstance(value, dict):
        for key, inner in value.items():
            _walk(inner, prefix if key == "_schema" else _join(prefix, str(key)), found)
        return
    if isinstance(value, list):
        for inner in value:
            _walk(inner, prefix, found)
        return
    _collect(str(value), prefix, found)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


__all__ = ["refusal_reason"]
