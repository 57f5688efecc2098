"""Reading the user's source: where a function is declared, and its code digest.

The code digest is taken over parsed code (AST without docstrings, comments or positions), so
an edit to a docstring or a comment keeps it, while any change to the code changes it.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import CodeType, FunctionType
from typing import TypeGuard, cast

from mlpipe.digests import digest_of
from mlpipe.localimport import is_local
from mlpipe.modules import module_file
from mlpipe.spec import Location

_PARSED: dict[str, tuple[tuple[int, int], ast.Module]] = {}
_MODULE_DIGESTS: dict[str, tuple[tuple[int, int], str]] = {}


def parse_file(path: str) -> ast.Module | None:
    """The parsed module at ``path``, cached while the file's size and mtime are unchanged."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (st.st_mtime_ns, st.st_size)
    cached = _PARSED.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    _PARSED[path] = (key, tree)
    return tree


def _source_file(fn: FunctionType) -> str | None:
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        return None
    return os.path.abspath(path) if path else None


def _function_node(tree: ast.Module, fn: FunctionType
                   ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    first = fn.__code__.co_firstlineno
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            lines = {node.lineno, *(d.lineno for d in node.decorator_list)}
            if first in lines:
                return node
    return None


@dataclass(frozen=True, slots=True)
class FunctionSource:
    """Where a function lives: its file, its ``def`` line, and each parameter's line."""

    file: str | None
    line: int
    param_lines: tuple[tuple[str, int], ...] = ()

    def location(self, param: str | None = None) -> Location | None:
        if self.file is None:
            return None
        line = dict(self.param_lines).get(param, self.line) if param else self.line
        return Location(self.file, line)


def function_source(fn: FunctionType) -> FunctionSource:
    """File, ``def`` line and per-parameter lines of ``fn`` (the def line where unknown)."""
    path = _source_file(fn)
    line = fn.__code__.co_firstlineno
    if path is None:
        return FunctionSource(None, line)
    tree = parse_file(path)
    node = _function_node(tree, fn) if tree is not None else None
    if node is None:
        return FunctionSource(path, line)
    a = node.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return FunctionSource(path, node.lineno, tuple((p.arg, p.lineno) for p in params))


# --- code digest --------------------------------------------------------------------------

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _dump(node: ast.AST) -> str:
    """``ast.dump`` of ``node`` as a module of its own, without docstrings or positions.

    The docstrings are cut out of the (cached) tree for the dump and put back after it: the
    same text as dumping a fresh parse of ``ast.unparse(node)`` with them stripped, without
    the unparse and parse (most of a code digest's time).
    """
    module = node if isinstance(node, ast.Module) else ast.Module([cast(ast.stmt, node)], [])
    cut = []
    for sub in ast.walk(module):
        body = getattr(sub, "body", None)
        if (isinstance(sub, _DOCUMENTED) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            cut.append((sub, body))
            sub.body = body[1:] or [ast.Pass()]
    try:
        return ast.dump(module, annotate_fields=False, include_attributes=False)
    finally:
        for sub, body in reversed(cut):
            sub.body = body


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_COMPOUND = tuple(t for t in (ast.If, ast.Try, getattr(ast, "TryStar", None), ast.With,
                               ast.AsyncWith, ast.For, ast.AsyncFor, ast.While) if t)
_BUILTINS = frozenset(dir(builtins))


def _top_level_definitions(tree: ast.Module) -> tuple[dict[str, list[ast.stmt]], list[ast.stmt]]:
    """Module-level name -> the top-level statements that bind it, and the star imports.

    A name bound inside a top-level ``if``/``try``/``with``/``for``/``while`` maps to that
    whole statement, so its condition is part of what the name means.
    """
    defs: dict[str, list[ast.stmt]] = {}
    stars: list[ast.stmt] = []

    def add(name: str, owner: ast.stmt) -> None:
        found = defs.setdefault(name, [])
        if owner not in found:
            found.append(owner)

    def names_in(target: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]

    def bind(stmt: ast.AST, owner: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            add(stmt.name, owner)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for name in names_in(target):
                    add(name, owner)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name == "*":
                    stars.append(owner)
                else:
                    add((alias.asname or alias.name).split(".")[0], owner)
        elif isinstance(stmt, _COMPOUND):
            for name in names_in(getattr(stmt, "target", ast.Pass())):
                add(name, owner)
            for item in getattr(stmt, "items", ()):
                if item.optional_vars is not None:
                    for name in names_in(item.optional_vars):
                        add(name, owner)
            for field in ("body", "orelse", "finalbody"):
                for sub in getattr(stmt, field, ()):
                    bind(sub, owner)
            for handler in getattr(stmt, "handlers", ()):
                if handler.name:
                    add(handler.name, owner)
                for sub in handler.body:
                    bind(sub, owner)

    for stmt in tree.body:
        bind(stmt, stmt)
    return defs, stars


def _is_local_file(path: str | None) -> TypeGuard[str]:
    return path is not None and path.endswith(".py") and is_local(path)


def _module_file(name: str) -> str | None:
    # found without importing it: a body's ``import torch.distributed`` must not import torch
    return module_file(name)[0] or None


def _maybe_local(name: str) -> bool:
    """False when nothing under ``name``'s top-level package can be a local file: an installed
    or standard library (or mlpipe), or nothing found. Saves looking up every name of
    ``from numpy import a, b, c`` as a possible submodule."""
    file, is_package = module_file(name.partition(".")[0])
    if file is None:
        return False
    return (file == "" and is_package) or _is_local_file(file)


def _imported_modules(stmt: ast.Import | ast.ImportFrom, package: str | None) -> Iterator[str]:
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            yield alias.name
        return
    base = stmt.module or ""
    if stmt.level:
        if not package:
            return
        parts = package.split(".")
        parts = parts[: len(parts) - stmt.level + 1]
        base = ".".join([*parts, base] if base else parts)
    if base and not _maybe_local(base):
        yield base  # not local, whichever of its names are modules
        return
    for alias in stmt.names:
        sub = f"{base}.{alias.name}" if base else alias.name
        yield sub if _module_file(sub) else base


def _package_of(path: str | None) -> str | None:
    if path is None:
        return None
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and (file == path or (not os.path.isabs(file) and os.path.abspath(file) == path)):
            return name if path.endswith("__init__.py") else name.rpartition(".")[0]
    return None


def _local_imports(stmts: Iterable[ast.AST], path: str | None) -> Iterator[tuple[str, str]]:
    """``(module name, absolute file)`` for each local module the import statements among
    ``stmts`` name, ``path`` being the file they stand in."""
    package = _package_of(path)
    for stmt in stmts:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        for name in _imported_modules(stmt, package):
            if not _maybe_local(name):
                continue
            file = _module_file(name)
            if _is_local_file(file):
                yield name, os.path.abspath(file)


def _local_import_digests(stmts: Sequence[ast.stmt], path: str | None,
                          seen: set[str]) -> dict[str, str]:
    return {name: _module_digest(file, seen) for name, file in _local_imports(stmts, path)}


def _module_digest(path: str, seen: set[str]) -> str:
    """Digest of a whole local module and, transitively, the local modules it imports."""
    tree = parse_file(path)
    if tree is None:
        return "unreadable"
    key = _PARSED[path][0]
    cached = _MODULE_DIGESTS.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    if path in seen:
        return "cycle"
    seen.add(path)
    imports = [s for s in ast.walk(tree) if isinstance(s, (ast.Import, ast.ImportFrom))]
    material = {"module": _dump(tree),
                "imports": _local_import_digests(imports, path, seen)}
    digest = digest_of(material)
    _MODULE_DIGESTS[path] = (key, digest)
    return digest


def local_module_files(path: str) -> set[str]:
    """The local module files (the user's project, not the standard library or an installed
    package) the module at ``path`` imports anywhere in it, transitively; ``path`` excluded.
    The same modules the code digests follow, found without importing them.

    Example:
        >>> sorted(local_module_files("components/defect.py"))
        ['/proj/components/images.py']
    """
    found: set[str] = set()
    pending = [os.path.abspath(path)]
    while pending:
        current = pending.pop()
        tree = parse_file(current)
        if tree is None:
            continue
        for _, file in _local_imports(ast.walk(tree), current):
            if file not in found and file != os.path.abspath(path):
                found.add(file)
                pending.append(file)
    return found


def _bytecode_material(code: CodeType) -> list:
    consts = [_bytecode_material(c) if isinstance(c, CodeType) else repr(c)
              for c in code.co_consts]
    return [code.co_code.hex(), consts, list(code.co_names)]


def code_digest(fn: FunctionType) -> str:
    """Digest of ``fn``'s code: its parsed body, the module-level names it uses, local imports.

    A module-level name the function uses (a helper, a constant, a class) is followed
    transitively; an import of a local module (a file of the user's project, not the standard
    library or an installed package) contributes that whole module's digest. Where no source
    is available (a function built at run time), the bytecode is digested instead.
    """
    path = _source_file(fn)
    tree = parse_file(path) if path else None
    node = _function_node(tree, fn) if tree is not None else None
    if node is None:
        material = {"bytecode": _bytecode_material(fn.__code__)}
        return digest_of(material)

    assert tree is not None  # a node was found in it
    defs, stars = _top_level_definitions(tree)
    included: list[ast.stmt] = []
    included_ids: set[int] = set()
    pending = list(_names_used(node))
    visited: set[str] = set()
    while pending:
        name = pending.pop()
        if name in visited:
            continue
        visited.add(name)
        for stmt in defs.get(name, ()):
            if id(stmt) in included_ids or stmt is node:
                continue
            included_ids.add(id(stmt))
            included.append(stmt)
            if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                pending.extend(_names_used(stmt))
    if stars and visited - set(defs) - _BUILTINS:
        # A name nothing here binds may come from ``from x import *``: count those imports in.
        for stmt in stars:
            if id(stmt) not in included_ids:
                included_ids.add(id(stmt))
                included.append(stmt)
    included.sort(key=lambda s: s.lineno)
    # Local modules imported anywhere in what the function runs (its body included), not only
    # at module level: ``from components.images import read_pgm`` inside the body counts.
    imports = [sub for stmt in (node, *included) for sub in ast.walk(stmt)
               if isinstance(sub, (ast.Import, ast.ImportFrom))]
    material = {
        "function": _dump(node),
        "globals": [_dump(s) for s in included if not isinstance(s, (ast.Import, ast.ImportFrom))],
        "imports": sorted(ast.unparse(s) for s in included
                          if isinstance(s, (ast.Import, ast.ImportFrom))),
        "local_modules": _local_import_digests(imports, path, set()),
    }
    return digest_of(material)
