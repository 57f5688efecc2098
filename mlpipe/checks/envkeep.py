"""Which writes to ``os.environ`` keep a launch variable the launcher injected (MP529): a
write that only fills the variable in where it is unset, or sets it to its own value.

``if "RANK" not in os.environ: os.environ["RANK"] = "0"`` and
``os.environ["WORLD_SIZE"] = os.environ.get("WORLD_SIZE", "1")`` leave every process the
value Azure ML gave it, as ``os.environ.setdefault`` does; only the syntax differs. Reads the
file's syntax tree only; imports and runs nothing.
"""
from __future__ import annotations

import ast

from mlpipe.checks.body import is_environ
from mlpipe.source import parse_file


def keeps_injected(file: str, line: int, variable: str) -> bool:
    """Whether every write of ``variable`` at ``line`` of ``file`` keeps a value already in
    the environment (set only where unset, or to the variable's own value).

    Example:
        >>> keeps_injected("train.py", 3, "RANK")  # if "RANK" not in os.environ: ... = "0"
        True
    """
    writes = _writes(file).get((line, variable))
    return bool(writes) and all(writes)


def _writes(file: str) -> dict[tuple[int, str], tuple[bool, ...]]:
    """``(line, variable) -> (keeps, ...)`` for each ``os.environ[VAR] = ...`` in ``file``."""
    try:
        tree = parse_file(file)  # cached while the file is unchanged
    except (OSError, SyntaxError, ValueError):
        return {}
    if tree is None:
        return {}
    found: dict[tuple[int, str], list[bool]] = {}
    _visit(tree, frozenset(), found)
    return {k: tuple(v) for k, v in found.items()}


def _visit(node: ast.AST, unset: frozenset[str], found: dict[tuple[int, str], list[bool]]
           ) -> None:
    if isinstance(node, ast.If):
        _visit(node.test, unset, found)
        for child in node.body:
            _visit(child, unset | _unset_in(node.test), found)
        for child in node.orelse:
            _visit(child, unset, found)
        return
    if isinstance(node, ast.Assign):
        for target in node.targets:
            key = _environ_key(target)
            if key is not None:
                keeps = key in unset or key in _reads(node.value)
                found.setdefault((node.lineno, key), []).append(keeps)
    for child in ast.iter_child_nodes(node):
        _visit(child, unset, found)


def _environ_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and is_environ(node.value) and \
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _read_key(node: ast.AST) -> str | None:
    """``VAR`` of ``os.environ["VAR"]``, ``os.environ.get("VAR", ...)``, ``os.getenv("VAR")``."""
    key = _environ_key(node)
    if key is not None:
        return key
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
            isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        func = node.func
        if (func.attr == "get" and is_environ(func.value)) or (
                func.attr == "getenv" and isinstance(func.value, ast.Name)
                and func.value.id == "os"):
            return node.args[0].value
    return None


def _reads(value: ast.AST) -> set[str]:
    """The variables ``value`` reads when it is the variable's own value (``int(...)`` and
    ``str(...)`` of it included): ``os.environ.get("RANK", "0")``."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in ("str", "int") and len(value.args) == 1:
        value = value.args[0]
    key = _read_key(value)
    if key is not None:
        return {key}
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and value.values:
        return _reads(value.values[0])  # os.environ.get("RANK") or "0"
    return set()


def _unset_in(test: ast.AST) -> frozenset[str]:
    """The variables a condition holds only while unset: ``"RANK" not in os.environ``,
    ``os.environ.get("RANK") is None``, ``not os.getenv("RANK")``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return frozenset().union(*(_unset_in(v) for v in test.values))
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        key = _read_key(test.operand)
        return frozenset({key}) if key else frozenset()
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, ast.NotIn) and is_environ(right) and \
                isinstance(test.left, ast.Constant) and isinstance(test.left.value, str):
            return frozenset({test.left.value})
        if isinstance(op, (ast.Is, ast.Eq)) and isinstance(right, ast.Constant) and \
                right.value in (None, ""):
            key = _read_key(test.left)
            return frozenset({key}) if key else frozenset()
    return frozenset()


__all__ = ["keeps_injected"]
