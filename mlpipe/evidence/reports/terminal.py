"""Text from the store made safe to print: control characters (ESC sequences that recolour,
move the cursor, set the window title or hide text; carriage returns; bidirectional overrides)
shown as escapes, never sent to the terminal or the Markdown a reviewer reads.

Used by the text and Markdown renderings; the JSON ones escape by their nature.
"""
from __future__ import annotations

import re
from typing import Any

# C0 but tab and newline, DEL and C1, and the invisible direction marks and overrides
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile(f"{_CONTROL.pattern[:-1]}\n\t]")


def _escaped(match: re.Match[str]) -> str:
    ch = match.group()
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch) or (
        f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def escape(text: str, *, lines: bool = True) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``); newlines and tabs
    kept when ``lines`` (a rendering's own layout), escaped otherwise (a single value).

    Example:
        >>> escape("\\x1b[31mred\\x1b[0m")
        '\\\\x1b[31mred\\\\x1b[0m'
    """
    return (_CONTROL if lines else _CONTROL_OR_NEWLINE).sub(_escaped, text)


def shown(value: Any) -> Any:
    """A copy of a JSON-like document with every string (keys too) escaped as one value, so a
    name cannot start a line of its own in a rendering."""
    if isinstance(value, str):
        return escape(value, lines=False)
    if isinstance(value, dict):
        return {shown(k): shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value
