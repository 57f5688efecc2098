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
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else key
            if key not in a:
                out.append(f"{sub}: (absent) -> {_short(b[key])}")
            elif key not in b:
                out.append(f"{sub}: {_short(a[key])} -> (absent)")
            else:
                _walk(a[key], b[key], sub, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        la = {}
        for i, item in enumerate(a):
            la.setdefault(_label(item, i), item)
        lb = {}
        for i, item in enumerate(b):
            lb.setdefault(_label(item, i), item)
        if len(la) == len(a) and len(lb) == len(b):
            for key in list(la) + [k for k in lb if k not in la]:
                sub = f"{path}[{key}]"
                if key not in lb:
                    out.append(f"{sub}: {_short(la[key])} -> (absent)")
                elif key not in la:
                    out.append(f"{sub}: (absent) -> {_short(lb[key])}")
                else:
                    _walk(la[key], lb[key], sub, out)
            return
    out.append(f"{path}: {_short(a)} -> {_short(b)}")


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
