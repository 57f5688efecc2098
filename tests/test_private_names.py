"""No private names across modules: a module of mlpipe/ never imports or uses another
module's ``_name`` (a function, class, constant or private submodule). What two modules share is
public in the module whose job it is; what only one uses stays private there.

Read from the source (the AST): ``from mlpipe.x import _name``, ``import mlpipe.x as m`` or
``from mlpipe import x`` then ``m._name`` / ``x._name``, and ``Name._attr`` on a name imported
from another mlpipe module. Dunder names (``__version__``) are public by convention.
"""
from __future__ import annotations

import ast
import functools
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "mlpipe"

#: Today's exceptions, in modules other developers are splitting this session; this table may
#: only shrink (a test below fails when an entry no longer occurs). (user, "owner:name")
KNOWN: set[tuple[str, str]] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def crossings(module: str, source: str, is_package: bool,
              known_modules: set[str]) -> set[tuple[str, str]]:
    """``(module, "owner:name")`` for each private name of another mlpipe module it reaches."""
    tree = ast.parse(source)
    found: set[tuple[str, str]] = set()
    names: dict[str, str] = {}  # local name -> the dotted mlpipe name it stands for

    def owner_of(target: str) -> str:
        return target if target in known_modules else target.rpartition(".")[0]

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            if base != "mlpipe" and not base.startswith("mlpipe."):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names[alias.asname or alias.name] = full
                if _private(alias.name) and base != module:
                    found.add((module, f"{base}:{alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "mlpipe" or alias.name.startswith("mlpipe."):
                    names[alias.asname or alias.name.partition(".")[0]] = (
                        alias.name if alias.asname else alias.name.partition(".")[0])
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        chain: list[str] = []
        value = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if not (isinstance(value, ast.Name) and value.id in names):
            continue
        target = ".".join([names[value.id], *reversed(chain)])
        owner = owner_of(target)
        if owner != module:
            found.add((module, f"{owner}:{node.attr}"))
    return found


@functools.cache
def all_crossings() -> frozenset[tuple[str, str]]:
    mods = modules()
    known = set(mods)
    found: set[tuple[str, str]] = set()
    for name, path in mods.items():
        found |= crossings(name, path.read_text(encoding="utf-8"),
                           path.name == "__init__.py", known)
    return frozenset(found)


def test_no_module_reaches_into_another_modules_private_names():
    new = sorted(all_crossings() - KNOWN)
    assert not new, ("private names used across modules (make the name public in the module "
                     "whose job it is, or move the code there):\n"
                     + "\n".join(f"  {user} uses {name}" for user, name in new))


def test_the_known_exceptions_only_shrink():
    gone = sorted(KNOWN - all_crossings())
    assert not gone, f"no longer used across modules: remove from KNOWN: {gone}"


def test_the_reader_sees_each_form_of_reaching_in():
    known = {"mlpipe.a", "mlpipe.b", "mlpipe.pkg", "mlpipe.pkg.c"}
    source = ("from mlpipe.b import _helper, public\n"
              "from mlpipe import b\n"
              "import mlpipe.pkg.c as c\n"
              "from .pkg import c as c2\n"
              "from mlpipe.b import Thing\n"
              "b._const\n"
              "c._fn()\n"
              "c2._other\n"
              "Thing._cache\n"
              "b.__name__\n"
              "public.x\n")
    assert crossings("mlpipe.a", source, False, known) == {
        ("mlpipe.a", "mlpipe.b:_helper"), ("mlpipe.a", "mlpipe.b:_const"),
        ("mlpipe.a", "mlpipe.pkg.c:_fn"), ("mlpipe.a", "mlpipe.pkg.c:_other"),
        ("mlpipe.a", "mlpipe.b:_cache")}
    # its own private names are its own
    assert crossings("mlpipe.b", "from mlpipe.b import _helper\n", False, known) == set()
