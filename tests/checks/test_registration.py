"""A check registers by construction: every module of mlpipe/checks is imported
(``registry.load_families``), so a family with an ``@check`` function runs without being
listed anywhere, and no ``@check`` lives outside the folder."""
from __future__ import annotations

import ast
import pathlib
import sys

from mlpipe.checks import CHECKS
from mlpipe.checks.registry import load_families

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "mlpipe"


def _decorated_with_check(path: pathlib.Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                func = deco.func if isinstance(deco, ast.Call) else deco
                if (isinstance(func, ast.Name) and func.id == "check") or (
                        isinstance(func, ast.Attribute) and func.attr == "check"):
                    return True
    return False


def _module(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def test_every_module_with_a_check_is_registered_and_only_those():
    with_checks = {_module(p) for p in PACKAGE.rglob("*.py") if _decorated_with_check(p)}
    registered = {c.fn.__module__ for c in CHECKS}
    assert registered == with_checks
    assert all(m.startswith("mlpipe.checks.") for m in registered)


def test_a_family_registers_by_being_in_the_folder(tmp_path, monkeypatch):
    family = tmp_path / "morechecks"
    family.mkdir()
    (family / "__init__.py").write_text("")
    (family / "newfamily.py").write_text(
        "from mlpipe.checks.registry import check\n"
        "from mlpipe.codes import CHECK_CRASHED\n\n\n"
        "@check(CHECK_CRASHED)\n"
        "def never_listed(graph):\n"
        "    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(CHECKS)
    try:
        assert load_families("morechecks") == ["morechecks.newfamily"]
        assert [c.name for c in CHECKS[len(before):]] == ["never_listed"]
    finally:
        CHECKS[:] = before
        for name in ("morechecks.newfamily", "morechecks"):
            sys.modules.pop(name, None)
