"""Imports flow one way: every import in mlpipe/ (module level, inside functions, under
TYPE_CHECKING) goes to the importer's own layer or to one it may use. docs/architecture.md
states the same order in prose; change both together.
"""
from __future__ import annotations

import ast
import itertools
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "mlpipe"

#: Layer -> the modules in it (a name covers its submodules), bottom to top.
LAYERS: dict[str, tuple[str, ...]] = {
    "base": ("mlpipe.paths", "mlpipe.errors", "mlpipe.diagnostics", "mlpipe.codes",
             "mlpipe.digests", "mlpipe.version", "mlpipe.modules", "mlpipe.localimport",
             "mlpipe.wheel", "mlpipe.procstat", "mlpipe.writing",
             "mlpipe.userfiles"),
    "contracts": ("mlpipe.artifacts", "mlpipe.contracts"),
    "spec": ("mlpipe.spec", "mlpipe.distribution", "mlpipe.params", "mlpipe.source",
             "mlpipe.compute", "mlpipe.environments", "mlpipe.references", "mlpipe.secret"),
    "dsl": ("mlpipe.dsl", "mlpipe.annotations", "mlpipe.signature", "mlpipe.tracing"),
    "graph": ("mlpipe.graph", "mlpipe.drawing"),
    "checks": ("mlpipe.checks",),
    "judgements": ("mlpipe.judgements",),
    "runtime": ("mlpipe.runtime",),
    # the evidence store's sub-packages, bottom to top; "evidence" is the package's face
    "evidence.storage": ("mlpipe.evidence.storage",),
    "evidence.signatures": ("mlpipe.evidence.signatures",),
    "evidence.records": ("mlpipe.evidence.records",),
    "evidence.bundles": ("mlpipe.evidence.bundles",),
    "evidence.qualification": ("mlpipe.evidence.qualification",),
    "evidence.reports": ("mlpipe.evidence.reports",),
    "evidence": ("mlpipe.evidence",),
    "backends.local": ("mlpipe.backends.local",),
    "backends.azure": ("mlpipe.backends.azure",),
    "loader": ("mlpipe.loader",),
    "commands": ("mlpipe.commands",),
    "cli": ("mlpipe.cli",),
    "package": ("mlpipe", "mlpipe.backends"),
}

_BELOW_DSL = {"base", "contracts", "spec"}
#: The evidence sub-packages, bottom to top: each may import those before it.
EVIDENCE = ("evidence.storage", "evidence.signatures", "evidence.records", "evidence.bundles",
            "evidence.qualification", "evidence.reports", "evidence")
_BELOW_BACKENDS = _BELOW_DSL | {"dsl", "graph", "checks", "judgements", "runtime", *EVIDENCE}

#: Layer -> the other layers it may import (its own is always allowed).
MAY_IMPORT: dict[str, set[str]] = {
    "base": set(),
    "contracts": {"base"},
    "spec": {"base", "contracts"},
    "dsl": _BELOW_DSL,
    "graph": _BELOW_DSL | {"dsl"},
    "checks": _BELOW_DSL | {"dsl", "graph"},
    # what a step did, judged after it ran: the graph it ran in, no check, backend or store
    "judgements": _BELOW_DSL | {"dsl", "graph"},
    # inside a step: the declarations and the contracts it validates, nothing that compiles
    "runtime": _BELOW_DSL,
    # the store, bundles and verification know no graph, no check and no backend; inside,
    # storage < signatures < records < bundles < qualification < reports < the package's face
    **{layer: _BELOW_DSL | set(EVIDENCE[:i]) for i, layer in enumerate(EVIDENCE)},
    # side by side, never importing each other
    "backends.local": _BELOW_BACKENDS,
    "backends.azure": _BELOW_BACKENDS,
    # what a command points at: a Python file (the DSL) or Azure ML YAML (the Azure backend)
    "loader": _BELOW_BACKENDS | {"backends.azure"},
    # one library call per command: the orchestration the CLI only renders
    "commands": _BELOW_BACKENDS | {"backends.local", "backends.azure", "loader"},
    "cli": set(LAYERS) - {"cli", "package"},
    # the public surface re-exports the DSL and loads component YAML on first use
    "package": {"base", "contracts", "spec", "dsl", "backends.azure"},
}


def _module_name(path: pathlib.Path, package: pathlib.Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: pathlib.Path = PACKAGE) -> dict[str, pathlib.Path]:
    # Alembic's migration scripts are loaded by Alembic, not imported by mlpipe
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))
            if "versions" not in p.parts}


def layer_of(module: str) -> str | None:
    """The layer of ``module``: the layer naming its longest prefix (the two package
    ``__init__`` modules of "package" only by their exact names)."""
    best = None
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            exact_only = layer == "package"
            if module == prefix or (not exact_only and module.startswith(prefix + ".")):
                if best is None or len(prefix) > len(best[1]):
                    best = (layer, prefix)
    return None if best is None else best[0]


def imports_of(module: str, path: pathlib.Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported mlpipe module) for every import statement anywhere in the file."""
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "mlpipe"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "mlpipe":
                continue
            for alias in node.names:
                # ``from mlpipe.x import y``: the module mlpipe.x.y when it is one, else mlpipe.x
                sub = f"{source}.{alias.name}"
                found.append((node.lineno, sub if sub in known else source))
    return found


def violations(package: pathlib.Path = PACKAGE) -> list[str]:
    """One line per import that runs against the layers: ``file:line: who imports what``."""
    modules = _modules(package)
    known = set(modules)
    found = []
    for module, path in modules.items():
        layer = layer_of(module)
        for line, target in imports_of(module, path, known):
            target_layer = layer_of(target)
            if target_layer == layer:
                continue
            if target_layer not in MAY_IMPORT[layer]:
                found.append(f"{path.relative_to(package.parent)}:{line}: {module} ({layer}) "
                             f"imports {target} ({target_layer})")
    return list(dict.fromkeys(found))


def import_graph(package: pathlib.Path = PACKAGE) -> dict[str, dict[str, str]]:
    """module -> {imported module -> ``file:line`` of the first such import}, over every
    import in ``package`` (module level, inside functions, under TYPE_CHECKING)."""
    modules = _modules(package)
    known = set(modules)
    graph: dict[str, dict[str, str]] = {m: {} for m in modules}
    for module, path in modules.items():
        for line, target in imports_of(module, path, known):
            if target != module and target in known:
                graph[module].setdefault(target, f"{path.relative_to(package.parent)}:{line}")
    return graph


def _strong_components(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _one_cycle(graph: dict[str, dict[str, str]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, as its modules in order."""
    inside = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                return paths[v] + [start]
            if w in inside and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError("a strong component without a circle")


def circles(package: pathlib.Path = PACKAGE) -> list[str]:
    """One line per import circle: ``a -> b (where b is imported) -> ... -> a``."""
    graph = import_graph(package)
    found = []
    for component in _strong_components(graph):
        cycle = _one_cycle(graph, component)
        steps = [f"{b} ({graph[a][b]})" for a, b in itertools.pairwise(cycle)]
        found.append(" -> ".join([cycle[0], *steps]))
    return found


def test_every_module_has_a_layer():
    # a new top-level module or package must be placed in LAYERS (and docs/architecture.md)
    assert [m for m in _modules() if layer_of(m) is None] == []
    assert layer_of("mlpipe.newthing") is None


def test_imports_follow_the_layers():
    assert violations() == []


def test_a_back_edge_is_reported_even_inside_a_function(tmp_path):
    package = tmp_path / "mlpipe"
    for name, text in {
        "__init__.py": "",
        "evidence/__init__.py": "",
        "evidence/verify.py": "def f():\n    from mlpipe.backends.local import snapshot\n",
        "backends/__init__.py": "",
        "backends/local/__init__.py": "",
        "backends/local/snapshot.py": "",
        "backends/azure/__init__.py": "",
        "backends/azure/record.py": "from ..local.snapshot import snapshot\n",
        "spec.py": "import mlpipe.dsl\n",
        "dsl.py": "from mlpipe.spec import x\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert violations(package) == [
        "mlpipe/backends/azure/record.py:1: mlpipe.backends.azure.record (backends.azure) "
        "imports mlpipe.backends.local.snapshot (backends.local)",
        "mlpipe/evidence/verify.py:2: mlpipe.evidence.verify (evidence) imports "
        "mlpipe.backends.local.snapshot (backends.local)",
        "mlpipe/spec.py:1: mlpipe.spec (spec) imports mlpipe.dsl (dsl)",
    ]


def test_the_two_backends_never_import_each_other():
    assert "backends.azure" not in MAY_IMPORT["backends.local"]
    assert "backends.local" not in MAY_IMPORT["backends.azure"]
    for layer in EVIDENCE:
        assert not MAY_IMPORT[layer] & {"backends.local", "backends.azure", "graph", "checks"}
    assert MAY_IMPORT["runtime"] <= {"base", "contracts", "spec"}


def test_no_import_circle():
    # every import counts, the ones inside functions and under TYPE_CHECKING too: a circle held
    # together by a late import is still a circle. Open one by moving the shared piece down.
    assert circles() == []


def test_a_circle_is_reported_even_through_a_function(tmp_path):
    package = tmp_path / "mlpipe"
    for name, text in {
        "__init__.py": "",
        "evidence/__init__.py": "",
        "evidence/bundle.py": "def f():\n    from mlpipe.evidence.promotion import entry\n",
        "evidence/promotion.py": "from mlpipe.evidence import seal\n",
        "evidence/seal.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from .bundle import build\n",
        "evidence/keys.py": "from mlpipe.evidence.seal import x\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert circles(package) == [
        "mlpipe.evidence.bundle -> mlpipe.evidence.promotion (mlpipe/evidence/bundle.py:2) -> "
        "mlpipe.evidence.seal (mlpipe/evidence/promotion.py:1) -> "
        "mlpipe.evidence.bundle (mlpipe/evidence/seal.py:3)"]
