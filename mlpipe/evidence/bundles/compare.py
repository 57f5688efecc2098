"""Where two bundles differ, as readable JSON paths:
``predicate.steps[evaluate].metrics[accuracy].value``.

Pure: compares two JSON values, knows nothing of the store.
"""
from __future__ import annotations

from typing import Any

_KEYS = ("step", "name", "input", "port", "code", "from", "digest")
MAX_DIFFERENCES = 50


def _label(item: Any, index: int) -> str:
    if isinstance(item, dict):
        for key in _KEYS:
            if isinstance(item.get(key), str):
                extra = f"@{item['rank']}" if isinstance(item.get("rank"), int) else ""
                return f"{item[key]}{extra}"
    return str(index)


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else (
        f"{{{len(value)} fields}}" if isinstance(value, dict) else f"[{len(value)} items]")
    return text if len(text) <= 80 else text[:77] + "..."


def _walk(a: Any, b: Any, path: str, out: list[str]) -> None:
    if len(out) >= MAX_DIFFERENCES or a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        _walk_keys(a, b, [(key, f"{path}.{key}" if path else key) for key in keys], out)
        return
    if isinstance(a, list) and isinstance(b, list):
        la, lb = _labelled(a), _labelled(b)
        if len(la) == len(a) and len(lb) == len(b):
            keys = list(la) + [k for k in lb if k not in la]
            _walk_keys(la, lb, [(key, f"{path}[{key}]") for key in keys], out)
            return
    out.append(f"{path}: {_short(a)} -> {_short(b)}")


def _walk_keys(a: dict[str, Any], b: dict[str, Any], places: list[tuple[str, str]],
               out: list[str]) -> None:
    """Each ``(key, path)`` of ``places`` compared in ``a`` and ``b``, absent on one side or not."""
    for key, sub in places:
        if key not in a:
            out.append(f"{sub}: (absent) -> {_short(b[key])}")
        elif key not in b:
            out.append(f"{sub}: {_short(a[key])} -> (absent)")
        else:
            _walk(a[key], b[key], sub, out)


def _labelled(items: list[Any]) -> dict[str, Any]:
    """A list's items by their labels (a step by its name); the first of a repeated label."""
    found: dict[str, Any] = {}
    for i, item in enumerate(items):
        found.setdefault(_label(item, i), item)
    return found


def differences(sealed: Any, rebuilt: Any) -> list[str]:
    """Each place ``rebuilt`` differs from ``sealed``, as ``path: old -> new`` (at most 50).

    Example:
        >>> differences({"m": [{"name": "acc", "value": 0.9}]},
        ...             {"m": [{"name": "acc", "value": 0.99}]})
        ['m[acc].value: 0.9 -> 0.99']
    """
    out: list[str] = []
    _walk(sealed, rebuilt, "", out)
    return out
