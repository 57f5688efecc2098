"""Size ceilings that only go down: every module under mlpipe/ stays under MAX_MODULE_LINES
lines and every function under MAX_FUNCTION_LINES, except the few in the tables below, each
held at its size today. A table entry may only be lowered or removed, never raised.
"""
from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "mlpipe"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

#: module (path under the repository) -> its ceiling in lines, for the modules over
#: MAX_MODULE_LINES today. Lower an entry when its module shrinks; drop it below the default.
MODULE_EXCEPTIONS: dict[str, int] = {}

#: "module::qualified.name" -> its ceiling in lines (``def`` line to last line), for the
#: functions over MAX_FUNCTION_LINES today. Same rule: lower or remove, never raise.
FUNCTION_EXCEPTIONS: dict[str, int] = {
    "mlpipe/backends/local/launcher/__init__.py::launch": 85,
}

_SPLIT_MODULE = (
    "split it along its jobs into modules of one job each (STYLE.md: one job per module, "
    "split past ~600 lines), each opening with a true one-line docstring")
_SPLIT_FUNCTION = "split it into named parts, each a step of what it does"


def _rel(path: pathlib.Path, package: pathlib.Path) -> str:
    return path.relative_to(package.parent).as_posix()


def _is_migration(path: pathlib.Path, package: pathlib.Path) -> bool:
    # Alembic's migration scripts are history: a landed revision is never edited, so its
    # functions are not held to the ceiling (the module still is)
    return "versions" in path.relative_to(package).parts


def module_sizes(package: pathlib.Path = PACKAGE) -> dict[str, int]:
    """Path under the repository -> line count, for every module of the package."""
    return {_rel(p, package): len(p.read_text().splitlines()) for p in sorted(package.rglob("*.py"))}


def function_sizes(package: pathlib.Path = PACKAGE) -> dict[str, int]:
    """"module::qualified.name" -> lines from ``def`` to the function's last line, for every
    function and method (nested ones included) outside the migration scripts."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    sizes[f"{path}::{name}"] = child.end_lineno - child.lineno + 1
                visit(child, path, name + ".")
            else:
                visit(child, path, prefix)

    for p in sorted(package.rglob("*.py")):
        if not _is_migration(p, package):
            visit(ast.parse(p.read_text(), str(p)), _rel(p, package), "")
    return sizes


def ceiling_problems(sizes: dict[str, int], exceptions: dict[str, int], default: int,
                     what: str, fix: str) -> list[str]:
    """One line per thing over its ceiling and per table entry that no longer holds."""
    problems = []
    for name, size in sorted(sizes.items()):
        ceiling = exceptions.get(name, default)
        if size > ceiling:
            problems.append(
                f"{name}: {size} lines, over its ceiling of {ceiling}: {fix}; "
                f"never raise its entry in the table")
    for name, ceiling in sorted(exceptions.items()):
        if name not in sizes:
            problems.append(f"{name}: in the {what} table but no such {what} exists any more: "
                            f"remove its entry")
        elif sizes[name] <= default:
            problems.append(f"{name}: {sizes[name]} lines, under the default of {default}: "
                            f"remove its entry from the {what} table")
        elif sizes[name] < ceiling:
            problems.append(f"{name}: shrank to {sizes[name]} lines: lower its entry in the "
                            f"{what} table from {ceiling} to {sizes[name]}")
    return problems


def test_every_module_is_under_its_ceiling():
    assert ceiling_problems(module_sizes(), MODULE_EXCEPTIONS, MAX_MODULE_LINES,
                            "module", _SPLIT_MODULE) == []


def test_every_function_is_under_its_ceiling():
    assert ceiling_problems(function_sizes(), FUNCTION_EXCEPTIONS, MAX_FUNCTION_LINES,
                            "function", _SPLIT_FUNCTION) == []


def test_the_tables_only_hold_exceptions():
    # an entry at or under the default would let a module grow back to it unnoticed
    assert all(v > MAX_MODULE_LINES for v in MODULE_EXCEPTIONS.values())
    assert all(v > MAX_FUNCTION_LINES for v in FUNCTION_EXCEPTIONS.values())


def test_the_measure_counts_nested_functions_and_methods_and_reports_each_case(tmp_path):
    package = tmp_path / "mlpipe"
    (package / "sub").mkdir(parents=True)
    body = "\n".join(["    x = 1"] * 5)
    deeper = "\n".join(["        x = 1"] * 5)
    (package / "sub" / "m.py").write_text(
        f"def outer():\n    def inner():\n{deeper}\n\n"
        f"class C:\n    def method(self):\n{deeper}\n")
    (package / "big.py").write_text("\n" * 12)
    (package / "sub" / "versions").mkdir()
    (package / "sub" / "versions" / "0001_x.py").write_text(f"def upgrade():\n{body}\n")
    functions = function_sizes(package)
    modules = module_sizes(package)
    assert functions == {"mlpipe/sub/m.py::outer": 7, "mlpipe/sub/m.py::outer.inner": 6,
                         "mlpipe/sub/m.py::C.method": 6}
    assert modules["mlpipe/big.py"] == 12
    big = {"mlpipe/big.py": modules["mlpipe/big.py"]}
    assert ceiling_problems(big, {"mlpipe/big.py": 20}, 10, "module", "split it") == [
        "mlpipe/big.py: shrank to 12 lines: lower its entry in the module table from 20 to 12"]
    assert ceiling_problems(big, {"mlpipe/big.py": 20}, 12, "module", "split it") == [
        "mlpipe/big.py: 12 lines, under the default of 12: remove its entry from the module "
        "table"]
    assert ceiling_problems(functions, {"mlpipe/sub/m.py::outer": 9, "mlpipe/gone.py::f": 9,
                                        "mlpipe/sub/m.py::C.method": 5}, 5, "function",
                            "split it") == [
        "mlpipe/sub/m.py::C.method: 6 lines, over its ceiling of 5: split it; "
        "never raise its entry in the table",
        "mlpipe/sub/m.py::outer.inner: 6 lines, over its ceiling of 5: split it; "
        "never raise its entry in the table",
        "mlpipe/gone.py::f: in the function table but no such function exists any more: "
        "remove its entry",
        "mlpipe/sub/m.py::outer: shrank to 7 lines: lower its entry in the function table "
        "from 9 to 7",
    ]
