"""What a component's body does, read from its source without importing or running anything:
the modules it imports, the names it uses, the environment variables it sets, the launchers
and worker processes it starts, and where it puts work on an accelerator.

The body is the component's function, the module-level statements of its file, and the
functions of that file it calls by name (transitively); ``names_used`` follows it further,
into the local modules it imports. A script component's body is its script (``python x.py``
in its code folder). A body whose source cannot be read (a function built at run time, a
script that is not there) has no facts (None), and the checks that need them stay silent.
The checks of docs/rules.md that read code (MP509, MP518, MP519, MP528-MP532, MP630, MP632, MP633)
take their facts from here.
"""
from __future__ import annotations

import ast
import os
import re
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mlpipe.modules import module_file
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
#: Libraries that put a model on the GPU by themselves when one is there (a Lightning or
#: Hugging Face ``Trainer``, ``accelerate``): importing one is a placement.
PLACING_MODULES = frozenset({"lightning", "pytorch_lightning", "accelerate", "transformers",
                             "deepspeed", "ultralytics", "fastai"})
#: Libraries whose saved models are torch pickles (``torch.save``, ``mlflow.pytorch``).
TORCH_MODULES = frozenset({"torch", "torchvision", "torchaudio", "lightning",
                           "pytorch_lightning", "timm", "transformers", "accelerate",
                           "deepspeed", "ultralytics", "fastai", "detectron2"})
_ENV_METHODS = {"setdefault", "update", "__setitem__"}
_PROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen",
                  "execv", "execve", "execvp", "execvpe", "execl", "execlp", "spawnv", "spawnvp",
                  "spawnl", "spawnlp"}
_NOT_LOCAL = tuple(os.path.realpath(p) + os.sep for p in {
    sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"),
    sysconfig.get_path("purelib"), sysconfig.get_path("platlib")} if p)


@dataclass(frozen=True, slots=True)
class BodyFacts:
    """What the source of one component's body shows.

    ``imports``: every module imported by the body (dotted names; relative imports resolved
    against the module's package). ``env_sets``: each environment variable the body sets,
    with its line; ``env_overwrites`` the same, less those set only where unset
    (``os.environ.setdefault``). ``commands``: each command line started through
    ``subprocess``/``os``, with its line. ``devices``: each place the code names an
    accelerator (``.cuda()``, ``"cuda:0"``, ``"nccl"``, ``torch.cuda.set_device``,
    ``mlpipe.runtime.device()``), with its line; ``cpu_moves``: each place it moves something
    to the CPU (``.cpu()``, ``.to("cpu")``, ``map_location=``). ``names``: each dotted name the
    body uses that resolves through its imports (``torch.distributed.init_process_group``),
    with its first line. ``gpu_calls``: each call that puts work on a GPU whatever is there
    (``.cuda()``, ``torch.device("cuda")``, ``backend="nccl"``) outside any condition, with its
    line; ``device_checked``: whether the body asks if a GPU is there at all
    (``torch.cuda.is_available()`` and the like).
    ``empty``: the function's body is only a docstring, ``pass`` or ``...`` (a stub).
    ``package``: the package its module lies in. ``env_reads``: the environment variables it
    reads by name (``os.environ["RANK"]``, ``os.environ.get``, ``os.getenv``).
    """

    file: str
    imports: frozenset[str]
    env_sets: tuple[tuple[str, int], ...]
    commands: tuple[tuple[str, int], ...]
    devices: tuple[tuple[str, int], ...] = ()
    cpu_moves: tuple[tuple[str, int], ...] = ()
    env_overwrites: tuple[tuple[str, int], ...] = ()
    names: tuple[tuple[str, int], ...] = ()
    gpu_calls: tuple[tuple[str, int], ...] = ()
    device_checked: bool = False
    empty: bool = False
    package: str | None = None
    env_reads: frozenset[str] = frozenset()

    def uses(self, *prefixes: str) -> tuple[str, int] | None:
        """The first name used (or module imported) that is one of ``prefixes`` or lies
        below one, with its line (0 for an import alone); None when there is none."""
        hits = [(line, -len(name), name) for name, line in self.names
                if any(name == p or name.startswith(p + ".") for p in prefixes)]
        if hits:
            line, _, name = min(hits)
            return name, line
        for name in sorted(self.imports):
            if any(name == p or name.startswith(p + ".") for p in prefixes):
                return name, 0
        return None


def _function_node(tree: ast.Module, name: str, line: int) -> ast.AST | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                and (node.lineno == line or any(d.lineno == line for d in node.decorator_list)):
            return node
    return None


def is_environ(node: ast.AST) -> bool:
    """Whether ``node`` names the process environment: ``os.environ`` or a bare ``environ``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) \
            and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = [_text(e) for e in node.elts]
        return " ".join(p for p in parts if p is not None) or None
    return None


def _env_names(call: ast.Call) -> list[str]:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _ENV_METHODS and is_environ(func.value):
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


_CUDA = re.compile(r"^(cuda(:\d+)?|nccl|gpu|/gpu:\d+|/device:gpu:\d+)$", re.I)
#: ``torch.cuda`` calls that only ask (they put nothing on a GPU).
_ASKING = {"is_available", "device_count", "is_initialized", "get_device_name"}


def _device_uses(sub: ast.AST) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(accelerator placements, CPU moves) that one AST node shows."""
    gpu: list[tuple[str, int]] = []
    cpu: list[tuple[str, int]] = []
    line = getattr(sub, "lineno", 0)
    if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and _CUDA.match(sub.value):
        gpu.append((repr(sub.value), line))
    elif isinstance(sub, ast.Call):
        func = sub.func
        if isinstance(func, ast.Attribute):
            if func.attr == "cuda" and not sub.args[1:]:
                gpu.append((".cuda()", line))
            elif func.attr == "cpu" and not sub.args:
                cpu.append((".cpu()", line))
            elif func.attr == "to" and sub.args and isinstance(sub.args[0], ast.Constant) \
                    and sub.args[0].value == "cpu":
                cpu.append((".to('cpu')", line))
            elif func.attr == "device" and isinstance(func.value, ast.Name) \
                    and func.value.id == "runtime":
                gpu.append(("mlpipe.runtime.device()", line))
            elif isinstance(func.value, ast.Attribute) and func.value.attr == "cuda" \
                    and func.attr not in _ASKING:
                gpu.append((f"{ast.unparse(func)}()", line))
        elif isinstance(func, ast.Name) and func.id == "device" and not sub.args:
            gpu.append(("device()", line))  # kept only where it is mlpipe.runtime's
        if any(kw.arg == "map_location" for kw in sub.keywords):
            cpu.append(("map_location=", line))
    return gpu, cpu


def _from_base(stmt: ast.ImportFrom, package: str | None) -> str | None:
    base = stmt.module or ""
    if stmt.level:
        if not package:
            return None
        parts = package.split(".")
        parts = parts[: len(parts) - stmt.level + 1]
        base = ".".join([*parts, base] if base else parts)
    return base


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


_GPU_GUARDS = ("torch.cuda.is_available", "torch.cuda.device_count",
               "torch.cuda.is_initialized", "torch.backends.mps",
               "tensorflow.config.list_physical_devices",
               "tensorflow.config.experimental.list_physical_devices",
               "tensorflow.test.is_gpu_available",
               "tensorflow.test.is_built_with_cuda", "jax.devices", "jax.device_count",
               "mlpipe.runtime.device", "mlpipe.runtime.backend", "mlpipe.runtime.devices",
               "accelerate", "lightning", "pytorch_lightning", "transformers")


def _aliases(nodes: list[ast.AST], package: str | None) -> dict[str, str]:
    """Local name -> the dotted module or object it is bound to by an import."""
    found: dict[str, str] = {}
    for root in nodes:
        for sub in ast.walk(root):
            if isinstance(sub, ast.Import):
                for alias in sub.names:
                    if alias.asname:
                        found[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        found.setdefault(top, top)
            elif isinstance(sub, ast.ImportFrom):
                base = _from_base(sub, package)
                for alias in sub.names:
                    if alias.name != "*" and base is not None:
                        found[alias.asname or alias.name] = \
                            f"{base}.{alias.name}" if base else alias.name
    return found


def dotted(node: ast.AST, aliases: dict[str, str], *, unaliased: bool = False) -> str | None:
    """``a.b.c`` with its head as imported (``aliases``); a head not imported: as written
    with ``unaliased``, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not (unaliased or node.id in aliases):
        return None
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


def _is_cuda_text(node: ast.AST | None) -> bool:
    text = _text(node) if node is not None else None
    if text is None:
        return False
    low = text.strip().lower()
    return low == "cuda" or low.startswith("cuda:")


def _device_use(call: ast.Call, name: str | None) -> str | None:
    """What in this call puts work on a GPU whatever is there, or None."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda" and not call.args[1:] and \
            name is None:
        return ".cuda()"
    if name == "torch.cuda.set_device":
        return "torch.cuda.set_device(...)"
    if name == "torch.device" and call.args and _is_cuda_text(call.args[0]):
        return f"{name.replace('tensorflow', 'tf')}({_text(call.args[0])!r})"
    if name in ("torch.distributed.init_process_group", "deepspeed.init_distributed"):
        backend = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg in ("backend", "dist_backend")), None)
        if _text(backend) == "nccl" if backend is not None else False:
            return f"{name.rsplit('.', 1)[-1]}(backend='nccl')"
    if isinstance(func, ast.Attribute) and func.attr == "to" and call.args and \
            _is_cuda_text(call.args[0]):
        return f".to({_text(call.args[0])!r})"
    for kw in call.keywords:
        if kw.arg in ("device", "map_location") and _is_cuda_text(kw.value):
            return f"{kw.arg}={_text(kw.value)!r}"
    return None


class _Scan:
    """One pass over a body's nodes: what each fact of BodyFacts needs."""

    def __init__(self, package: str | None) -> None:
        self.package = package
        self.imports: set[str] = set()
        self.env: list[tuple[str, int]] = []
        self.overwrites: list[tuple[str, int]] = []
        self.commands: list[tuple[str, int]] = []
        self.names: dict[str, int] = {}
        self.devices: list[tuple[str, int]] = []
        self.gpu: list[tuple[str, int]] = []
        self.cpu: list[tuple[str, int]] = []
        self.env_reads: set[str] = set()
        self.called: set[str] = set()
        self.guarded: set[int] = set()

    def run(self, nodes: list[ast.AST], aliases: dict[str, str]) -> None:
        for root in nodes:
            for sub in ast.walk(root):
                if isinstance(sub, (ast.If, ast.IfExp, ast.Try, ast.While)) or (
                        isinstance(sub, ast.BoolOp)):
                    # what runs only on some condition is not "unconditionally on a GPU"
                    self.guarded.update(id(n) for part in ast.iter_child_nodes(sub)
                                        for n in ast.walk(part))
            for sub in ast.walk(root):
                self._one(sub, aliases)

    def _one(self, sub: ast.AST, aliases: dict[str, str]) -> None:
        found_gpu, found_cpu = _device_uses(sub)
        self.gpu += found_gpu
        self.cpu += found_cpu
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            self.imports.update(_resolve(sub, self.package))
        elif isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and is_environ(t.value):
                    key = _text(t.slice)
                    if key:
                        self.env.append((key, sub.lineno))
                        self.overwrites.append((key, sub.lineno))
        elif isinstance(sub, ast.Subscript) and is_environ(sub.value) and isinstance(
                sub.ctx, ast.Load):
            key = _text(sub.slice)
            if key:
                self.env_reads.add(key)
        elif isinstance(sub, (ast.Attribute, ast.Name)) and isinstance(
                getattr(sub, "ctx", None), ast.Load):
            if isinstance(sub, ast.Name):
                self.called.add(sub.id)  # called, or passed on (a spawn's target, a callback)
            name = dotted(sub, aliases)
            if name is not None and (name not in self.names or sub.lineno < self.names[name]):
                self.names[name] = sub.lineno
        elif isinstance(sub, ast.Call):
            found = _env_names(sub)
            self.env += [(n, sub.lineno) for n in found]
            if not (isinstance(sub.func, ast.Attribute) and sub.func.attr == "setdefault"):
                self.overwrites += [(n, sub.lineno) for n in found]
            cmd = _command(sub)
            if cmd:
                self.commands.append((cmd, sub.lineno))
            if isinstance(sub.func, ast.Name):
                self.called.add(sub.func.id)
            func = sub.func
            if sub.args and isinstance(func, ast.Attribute) and (
                    (func.attr == "get" and is_environ(func.value)) or (
                    func.attr == "getenv" and isinstance(func.value, ast.Name)
                    and func.value.id == "os")):
                key = _text(sub.args[0])
                if key:
                    self.env_reads.add(key)
            device = _device_use(sub, dotted(sub.func, aliases))
            if device is not None and id(sub) not in self.guarded:
                self.devices.append((device, sub.lineno))


def _scan(nodes: list[ast.AST], package: str | None
          ) -> tuple[set[str], list[tuple[str, int]], list[tuple[str, int]]]:
    scan = _Scan(package)
    scan.run(nodes, {})
    return scan.imports, scan.env, scan.commands


def _helpers(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _is_stub(node: ast.AST) -> bool:
    body = getattr(node, "body", [])
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(
        s.value, ast.Constant)) for s in body)


def _facts_of(path: str, tree: ast.Module, roots: list[ast.AST], package: str | None,
              empty: bool) -> BodyFacts:
    """The facts of ``roots`` and of the functions of ``tree`` they call by name."""
    helpers = _helpers(tree)
    nodes = [*roots, *_top_level(tree)]
    aliases = _aliases([*nodes, *helpers.values()], package)
    scan = _Scan(package)
    # a body's own parameters shadow the module's functions of the same name (an output
    # port called `train` is no call of the module's `train` step)
    shadowed = {a.arg for r in roots if isinstance(r, (ast.FunctionDef, ast.AsyncFunctionDef))
                for a in [*r.args.posonlyargs, *r.args.args, *r.args.kwonlyargs]}
    pending, seen = list(nodes), set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        scan.run([node], aliases)
        pending += [h for n in scan.called if n not in shadowed
                    and (h := helpers.get(n)) is not None and id(h) not in seen]
    names = tuple(sorted(scan.names.items(), key=lambda e: (e[1], e[0])))
    checked = any(n == g or n.startswith(g + ".") for n, _ in names for g in _GPU_GUARDS) or \
        any(i.split(".")[0] in _GPU_GUARDS for i in scan.imports)
    gpu = scan.gpu
    if "mlpipe.runtime.device" not in scan.imports:
        gpu = [g for g in gpu if g[0] != "device()"]
    else:
        gpu = [("mlpipe.runtime.device()", g[1]) if g[0] == "device()" else g for g in gpu]
    return BodyFacts(
        path, frozenset(scan.imports), tuple(sorted(set(scan.env), key=lambda e: e[1])),
        tuple(scan.commands), devices=tuple(sorted(set(gpu), key=lambda e: e[1])),
        cpu_moves=tuple(sorted(set(scan.cpu), key=lambda e: e[1])),
        env_overwrites=tuple(sorted(set(scan.overwrites), key=lambda e: e[1])), names=names,
        gpu_calls=tuple(sorted(set(scan.devices), key=lambda e: e[1])),
        device_checked=checked, empty=empty, package=package,
        env_reads=frozenset(scan.env_reads))


_CACHE: dict[tuple[str, str, int, int], BodyFacts | None] = {}
_SCRIPT = re.compile(r"(?:^|[\s;&|(])python[\d.]*\s+(?:-u\s+)?([\w./-]+\.py)\b")


def _script_facts(component: ComponentSpec) -> BodyFacts | None:
    """A script component's facts: the script its command runs, read whole."""
    m = _SCRIPT.search(component.command or "")
    if m is None or component.code is None:
        return None
    path = os.path.join(component.code, m.group(1))
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    key = (path, "", 0, mtime)
    if key not in _CACHE:
        tree = parse_file(path)
        _CACHE[key] = None if tree is None else _facts_of(
            path, tree, [tree], None, not any(
                not isinstance(s, (ast.Import, ast.ImportFrom)) for s in tree.body))
    return _CACHE[key]


def body_facts(component: ComponentSpec) -> BodyFacts | None:
    """The facts of ``component``'s body, or None when its source cannot be read."""
    if component.function is None:
        return _script_facts(component) if component.command else None
    if component.location is None:
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
        facts = _facts_of(path, tree, [node], _package(module), _is_stub(node))
    _CACHE[key] = facts
    return facts


def _is_local(path: str | None) -> bool:
    return bool(path) and path.endswith(".py") and \
        not os.path.realpath(path).startswith(_NOT_LOCAL)


def uses_accelerator(facts: BodyFacts) -> bool | None:
    """Whether the body (or a local module it imports, transitively) imports a library that
    runs on accelerators; None when a module it imports cannot be told (not loaded here)."""
    found, complete = names_used(facts)
    if any(name.split(".")[0] in ACCELERATOR_MODULES for name in found):
        return True
    return False if complete else None


_MODULE_NAMES: dict[str, tuple[frozenset[str], frozenset[str]]] = {}


def _module_names(path: str, package: str | None) -> tuple[frozenset[str], frozenset[str]]:
    """(names used, modules imported) anywhere in the module at ``path``."""
    if path not in _MODULE_NAMES:
        tree = parse_file(path)
        if tree is None:
            _MODULE_NAMES[path] = (frozenset(), frozenset({""}))  # "" marks unreadable
        else:
            scan = _Scan(package)
            scan.run([tree], _aliases([tree], package))
            _MODULE_NAMES[path] = (frozenset(scan.names), frozenset(scan.imports))
    return _MODULE_NAMES[path]


_NAMES_USED: dict[int, tuple[BodyFacts, tuple[frozenset[str], bool]]] = {}


def names_used(facts: BodyFacts) -> tuple[frozenset[str], bool]:
    """Every dotted name (and imported module) the body uses, followed into the local modules
    it imports (transitively), and whether that reading is complete: False when a module it
    imports cannot be told (not installed here, or unreadable), so an absence proves nothing.
    """
    cached = _NAMES_USED.get(id(facts))
    if cached is not None and cached[0] is facts:
        return cached[1]
    found = {n for n, _ in facts.names} | set(facts.imports)
    pending = list(facts.imports)
    seen: set[str] = set()
    complete = True
    while pending:
        name = pending.pop()
        if name in seen or not name:
            continue
        seen.add(name)
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top == "mlpipe" or top in ACCELERATOR_MODULES:
            continue
        file, is_package = module_file(name)
        if file is None:
            if name == top or module_file(top)[0] is None:
                complete = False
            continue
        if not _is_local(file):
            continue
        pkg = name if is_package else name.rpartition(".")[0]
        names, imports = _module_names(os.path.abspath(file), pkg or None)
        if "" in imports:
            complete = False
        found |= names | imports
        pending += [i for i in imports if i]
    _NAMES_USED[id(facts)] = (facts, (frozenset(found), complete))
    return frozenset(found), complete


def step_facts(graph) -> Iterator[tuple[Any, BodyFacts | None]]:
    """``(node, facts)`` for each step of ``graph``, each component's facts read once (a
    pipeline of a thousand steps of one component stats its file once, not a thousand times).
    """
    seen: dict[int, tuple[ComponentSpec, BodyFacts | None]] = {}
    for node in graph.step_nodes():
        c = node.component
        hit = seen.get(id(c))
        if hit is None or hit[0] is not c:
            hit = seen[id(c)] = (c, body_facts(c))
        yield node, hit[1]
