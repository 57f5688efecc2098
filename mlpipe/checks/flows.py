"""Where values go in a component's body, read from its source (nothing is imported or run):
the literal parts of an input the body names (``Path(rows) / "test"``) and the arguments of
the calls it makes. The facts ``checks.body`` keeps are names; these are what the names hold.
"""
from __future__ import annotations

import ast
import os

from mlpipe.checks.body import BodyFacts
from mlpipe.source import parse_file
from mlpipe.spec import ComponentSpec

_JOINS = {"join", "joinpath"}   # os.path.join(rows, "test"), Path(rows).joinpath("test")
_PATHS = {"Path", "PurePath", "PosixPath"}   # Path(rows, "test")


def _function(component: ComponentSpec) -> ast.AST | None:
    if component.function is None or component.location is None:
        return None
    tree = parse_file(component.location.file)
    if tree is None:
        return None
    name = component.function.partition(":")[2].rsplit(".", 1)[-1]
    line = component.location.line
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                and (node.lineno == line or any(d.lineno == line for d in node.decorator_list)):
            return node
    return None


def _root(node: ast.AST, names: dict[str, str]) -> str | None:
    """The input a path expression starts from: ``rows``, ``Path(rows)``, ``str(rows)`` or a
    local name bound to one of them."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        return _root(node.args[0], names)
    return None


def _first_part(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip("/").split("/")[0] or None
    return None


def _part_of(node: ast.AST, names: dict[str, str]) -> tuple[str, str] | None:
    """(input, first literal part below it) of one path expression, if it is one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        root, part = _root(node.left, names), _first_part(node.right)
        if root is None and isinstance(node.left, ast.BinOp):
            return _part_of(node.left, names)
        return (root, part) if root and part else None
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not node.keywords and \
            getattr(node.func, "id", getattr(node.func, "attr", None)) in _PATHS:
        root, part = _root(node.args[0], names), _first_part(node.args[1])
        return (root, part) if root and part else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _JOINS:
        args = list(node.args)
        if node.func.attr == "joinpath":
            args = [node.func.value, *args]
        if len(args) >= 2:
            root, part = _root(args[0], names), _first_part(args[1])
            return (root, part) if root and part else None
    if isinstance(node, ast.JoinedStr) and len(node.values) >= 2:
        head, tail = node.values[0], node.values[1]
        if isinstance(head, ast.FormattedValue) and isinstance(tail, ast.Constant):
            root, part = _root(head.value, names), _first_part(tail)
            return (root, part) if root and part else None
    return None


def input_parts(component: ComponentSpec) -> dict[str, frozenset[str]]:
    """For each input of a function component, the literal folders or files directly below
    it that its body names (``Path(rows) / "train"``, ``Path(rows, "train")``,
    ``os.path.join(rows, "test")``,
    ``f"{rows}/test/..."``, also through a local name bound to the input); empty when the
    source cannot be read.

    Example:
        >>> input_parts(prepare.spec)
        {'rows': frozenset({'train', 'test'})}
    """
    fn = _function(component)
    if fn is None:
        return {}
    inputs = {p.name for p in component.inputs}
    names = {n: n for n in inputs}
    for node in ast.walk(fn):   # one level of aliases: root = Path(rows)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            root = _root(node.value, names)
            if root is not None:
                names[node.targets[0].id] = root
    found: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        hit = _part_of(node, names)
        if hit is not None:
            found.setdefault(hit[0], set()).add(hit[1])
    return {k: frozenset(v) for k, v in found.items()}


def call_at(facts: BodyFacts, line: int, name: str) -> ast.Call | None:
    """The call of ``name`` (its last dotted part) on ``line`` of the body's file, to read the
    arguments it is given; None when there is none or the file cannot be read."""
    if not line or not os.path.exists(facts.file):
        return None
    tree = parse_file(facts.file)
    if tree is None:
        return None
    last = name.rsplit(".", 1)[-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node, "lineno", 0) == line:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called == last:
                return node
    return None
