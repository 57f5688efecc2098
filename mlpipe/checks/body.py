"""What a component's body does, read from its source without importing or running anything:
the modules it imports, the environment variables it sets, the launchers it starts, where it
puts tensors on an accelerator or back on the CPU.

The facts are what the checks of MP509, MP518, MP519 and MP630 need; a body whose source cannot be
read (a script component, a function built at run time) has no facts (None), and those checks
stay silent about it.
"""
from __future__ import annotations

import ast
import os
import re
import sys
import sysconfig
from dataclasses import dataclass

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
    """What the source of one component function (and its module's top level) shows.

    ``imports``: every module imported by the function or at the top of its module (dotted
    names; relative imports resolved against the module's package). ``env_sets``: each
    environment variable the body (or module top level) sets, with its line. ``commands``:
    each command line started through ``subprocess``/``os``, with its line. ``devices``: each
    place the code names an accelerator (``.cuda()``, ``"cuda:0"``, ``"nccl"``,
    ``torch.cuda.set_device``, ``mlpipe.runtime.device()``), with its line; ``cpu_moves``: each
    place it moves something to the CPU (``.cpu()``, ``.to("cpu")``, ``map_location=``).
    """

    file: str
    imports: frozenset[str]
    env_sets: tuple[tuple[str, int], ...]
    commands: tuple[tuple[str, int], ...]
    devices: tuple[tuple[str, int], ...] = ()
    cpu_moves: tuple[tuple[str, int], ...] = ()


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
    imports, env, commands, _, _ = _scan_all(nodes, package)
    return imports, env, commands


def _scan_all(nodes: list[ast.AST], package: str | None
              ) -> tuple[set[str], list[tuple[str, int]], list[tuple[str, int]],
                         list[tuple[str, int]], list[tuple[str, int]]]:
    imports: set[str] = set()
    env: list[tuple[str, int]] = []
    commands: list[tuple[str, int]] = []
    gpu: list[tuple[str, int]] = []
    cpu: list[tuple[str, int]] = []
    for root in nodes:
        for sub in ast.walk(root):
            found_gpu, found_cpu = _device_uses(sub)
            gpu += found_gpu
            cpu += found_cpu
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
    if "mlpipe.runtime.device" not in imports:
        gpu = [g for g in gpu if g[0] != "device()"]
    else:
        gpu = [("mlpipe.runtime.device()", g[1]) if g[0] == "device()" else g for g in gpu]
    return imports, env, commands, gpu, cpu


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
        imports, env, commands, gpu, cpu = _scan_all([node, *_top_level(tree)], package)
        facts = BodyFacts(path, frozenset(imports), tuple(sorted(set(env), key=lambda e: e[1])),
                          tuple(commands), tuple(sorted(set(gpu), key=lambda e: e[1])),
                          tuple(sorted(set(cpu), key=lambda e: e[1])))
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
        file, is_package = module_file(name)
        if file is None:
            if name == top or module_file(top)[0] is None:
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
