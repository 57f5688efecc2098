"""What a component's body does, read from its source without importing or running anything:
the modules it imports, the environment variables it sets, the launchers it starts.

The facts are what the checks of MP509, MP518 and MP519 need; a body whose source cannot be
read (a script component, a function built at run time) has no facts (None), and those checks
stay silent about it.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import sys
import sysconfig
from dataclasses import dataclass

from mlpipe.source import parse_file
from mlpipe.spec import ComponentSpec

#: Libraries that put work on an accelerator (GPU) when one is there.
ACCELERATOR_MODULES = frozenset({
    "torch", "torchvision", "torchaudio", "tensorflow", "keras", "jax", "jaxlib", "flax",
    "cupy", "cudf", "cuml", "cugraph", "numba", "triton", "tensorrt", "xgboost", "lightgbm",
    "catboost", "mxnet", "paddle", "onnxruntime", "transformers", "deepspeed", "accelerate",
    "lightning", "pytorch_lightning", "horovod", "dask_cuda", "timm", "diffusers",
    "sentence_transformers", "vllm", "bitsandbytes", "peft", "trl", "ultralytics", "fastai",
    "detectron2", "mmcv", "mmdet", "apex", "pycuda", "cuda", "rapids", "nvidia",
})
_ENV_METHODS = {"setdefault", "update", "__setitem__"}
_PROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen",
                  "execv", "execve", "execvp", "execvpe", "execl", "execlp", "spawnv", "spawnvp",
                  "spawnl", "spawnlp"}
_NOT_LOCAL = tuple(os.path.realpath(p) + os.sep for p in {
    sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"),
    sysconfig.get_path("purelib"), sysconfig.get_path("platlib")} if p)


@dataclass(frozen=True, slots=True)
class BodyFacts:
    """What the source of one component function (and its module's top level) shows.

    ``imports``: every module imported by the function or at the top of its module (dotted
    names; relative imports resolved against the module's package). ``env_sets``: each
    environment variable the body (or module top level) sets, with its line. ``commands``:
    each command line started through ``subprocess``/``os``, with its line.
    """

    file: str
    imports: frozenset[str]
    env_sets: tuple[tuple[str, int], ...]
    commands: tuple[tuple[str, int], ...]


def _function_node(tree: ast.Module, name: str, line: int) -> ast.AST | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                and (node.lineno == line or any(d.lineno == line for d in node.decorator_list)):
            return node
    return None


def _is_environ(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) \
            and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = [_text(e) for e in node.elts]
        return " ".join(p for p in parts if p is not None) or None
    return None


def _env_names(call: ast.Call) -> list[str]:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _ENV_METHODS and _is_environ(func.value):
        names = [kw.arg for kw in call.keywords if kw.arg]
        if call.args:
            first = call.args[0]
            if isinstance(first, ast.Dict):
                names += [k.value for k in first.keys
                          if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            elif isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.append(first.value)
        return names
    if isinstance(func, ast.Attribute) and func.attr == "putenv" and call.args and \
            isinstance(func.value, ast.Name) and func.value.id == "os":
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return [first.value]
    return []


def _command(call: ast.Call) -> str | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)
    if name not in _PROCESS_CALLS:
        return None
    if isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id in ("os", "subprocess")):
        return None
    args = list(call.args) + [kw.value for kw in call.keywords if kw.arg == "args"]
    return _text(args[0]) if args else None


def _resolve(stmt: ast.Import | ast.ImportFrom, package: str | None) -> list[str]:
    if isinstance(stmt, ast.Import):
        return [alias.name for alias in stmt.names]
    base = stmt.module or ""
    if stmt.level:
        if not package:
            return []
        parts = package.split(".")
        parts = parts[: len(parts) - stmt.level + 1]
        base = ".".join([*parts, base] if base else parts)
    # `from pkg import name`: name may be a submodule; both are candidates
    found = [base] if base else []
    found += [f"{base}.{a.name}" if base else a.name for a in stmt.names if a.name != "*"]
    return found


def _package(module: str | None) -> str | None:
    if not module:
        return None
    found = sys.modules.get(module)
    if found is not None and getattr(found, "__path__", None) is not None:
        return module
    return module.rpartition(".")[0] or None


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """Module-level statements that run at import (not ``if __name__ == "__main__":``)."""
    out = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test):
            continue
        out.append(stmt)
    return out


def _scan(nodes: list[ast.AST], package: str | None
          ) -> tuple[set[str], list[tuple[str, int]], list[tuple[str, int]]]:
    imports: set[str] = set()
    env: list[tuple[str, int]] = []
    commands: list[tuple[str, int]] = []
    for root in nodes:
        for sub in ast.walk(root):
            if isinstance(sub, (ast.Import, ast.ImportFrom)):
                imports.update(_resolve(sub, package))
            elif isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                for t in targets:
                    if isinstance(t, ast.Subscript) and _is_environ(t.value):
                        key = _text(t.slice)
                        if key:
                            env.append((key, sub.lineno))
            elif isinstance(sub, ast.Call):
                env += [(n, sub.lineno) for n in _env_names(sub)]
                cmd = _command(sub)
                if cmd:
                    commands.append((cmd, sub.lineno))
    return imports, env, commands


_CACHE: dict[tuple[str, str, int, int], BodyFacts | None] = {}


def body_facts(component: ComponentSpec) -> BodyFacts | None:
    """The facts of ``component``'s function, or None when its source cannot be read."""
    if component.function is None or component.location is None:
        return None
    path = component.location.file
    tree = parse_file(path)
    if tree is None:
        return None
    module, _, qualname = component.function.partition(":")
    name = qualname.rsplit(".", 1)[-1]
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    key = (path, component.function, component.location.line, mtime)
    if key in _CACHE:
        return _CACHE[key]
    node = _function_node(tree, name, component.location.line)
    facts = None
    if node is not None:
        package = _package(module)
        imports, env, commands = _scan([node, *_top_level(tree)], package)
        facts = BodyFacts(path, frozenset(imports), tuple(sorted(set(env), key=lambda e: e[1])),
                          tuple(commands))
    _CACHE[key] = facts
    return facts


def _is_local(path: str | None) -> bool:
    return bool(path) and path.endswith(".py") and \
        not os.path.realpath(path).startswith(_NOT_LOCAL)


def uses_accelerator(facts: BodyFacts) -> bool | None:
    """Whether the body (or a local module it imports, transitively) imports a library that
    runs on accelerators; None when a module it imports cannot be told (not loaded here)."""
    pending = list(facts.imports)
    seen: set[str] = set()
    unknown = False
    while pending:
        name = pending.pop()
        if name in seen or not name:
            continue
        seen.add(name)
        top = name.split(".")[0]
        if top in ACCELERATOR_MODULES:
            return True
        if top in sys.stdlib_module_names or top == "mlpipe":
            continue
        file, is_package = _module_file(name)
        if file is None:
            if name == top or _module_file(top)[0] is None:
                unknown = True  # not installed here: it could be anything
            continue  # `from pkg import name` where name is no module: pkg was looked at
        if not _is_local(file):
            continue  # an installed library that is not an accelerator framework
        tree = parse_file(os.path.abspath(file))
        if tree is None:
            unknown = True
            continue
        pkg = name if is_package else name.rpartition(".")[0]
        pending += list(_scan([tree], pkg or None)[0])
    return None if unknown else False


def _module_file(name: str) -> tuple[str | None, bool]:
    """The file of module ``name`` and whether it is a package, found without importing it:
    from ``sys.modules``, else the top-level module's location and the folders below it."""
    module = sys.modules.get(name)
    if module is not None:
        is_package = getattr(module, "__path__", None) is not None
        return getattr(module, "__file__", None) or "", is_package
    top, _, rest = name.partition(".")
    loaded = sys.modules.get(top)
    if loaded is not None:
        paths = list(getattr(loaded, "__path__", None) or [])
        origin = getattr(loaded, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(top)  # a top-level name: nothing is imported
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return None, False
        paths = list(spec.submodule_search_locations or [])
        origin = spec.origin
    if not rest:
        return origin or "", bool(paths)
    for part in rest.split("."):
        found = None
        for folder in paths:
            package = os.path.join(folder, part)
            if os.path.isfile(os.path.join(package, "__init__.py")):
                found = (os.path.join(package, "__init__.py"), [package])
            elif os.path.isfile(package + ".py"):
                found = (package + ".py", [])
            elif os.path.isdir(package):
                found = ("", [package])  # a namespace package
            if found:
                break
        if found is None:
            return None, False
        origin, paths = found
    return origin, bool(paths)
