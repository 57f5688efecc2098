"""Where values go in a component's body, read from its source (nothing is imported or run):
the literal parts of an input the body names (``Path(rows) / "test"``), the arguments of the
calls it makes, and the collectives only some ranks reach (under a condition on the rank). The
facts ``checks.body`` keeps are names; these are what the names hold and where they lead.
"""
from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable
from typing import Any

from mlpipe.checks.body import BodyFacts, body_facts, dotted
from mlpipe.source import parse_file
from mlpipe.spec import ComponentSpec

_JOINS = {"join", "joinpath"}   # os.path.join(rows, "test"), Path(rows).joinpath("test")
_PATHS = {"Path", "PurePath", "PosixPath"}   # Path(rows, "test")
_FLAGS = re.compile(r"--([\w-]+)[=\s]+\$\{\{\s*inputs\.(\w+)\s*\}\}")


def _once(fn: Callable[[ComponentSpec], Any]) -> Callable[[ComponentSpec], Any]:
    """Read once per component: a pipeline of a thousand steps of one component walks its
    source once, not a thousand times (as ``checks.body.step_facts``)."""
    memo: dict[int, tuple[ComponentSpec, Any]] = {}

    @functools.wraps(fn)
    def once(component: ComponentSpec) -> Any:
        hit = memo.get(id(component))
        if hit is None or hit[0] is not component:
            hit = memo[id(component)] = (component, fn(component))
        return hit[1]
    return once


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
    if isinstance(node, ast.Attribute):   # a script's argparse value: args.raw
        return names.get(ast.unparse(node))
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


@_once
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
    inputs = {p.name for p in component.inputs}
    names = {n: n for n in inputs}
    if fn is None and component.function is None and component.command:
        # a script component: the flag its command passes each input by (--raw
        # ${{inputs.raw}}) is the argparse value the script reads it from (args.raw)
        facts = body_facts(component)
        fn = parse_file(facts.file) if facts is not None else None
        names = {f"args.{flag.replace('-', '_')}": port
                 for flag, port in _FLAGS.findall(component.command) if port in inputs}
    if fn is None:
        return {}
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


#: torch.distributed's collectives (every rank of the group must call them) and mlpipe's.
COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "broadcast",
    "broadcast_object_list", "barrier", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "gather", "gather_object", "scatter", "scatter_object_list", "all_to_all",
    "all_to_all_single", "monitored_barrier",
    # Horovod's (hvd.allreduce, hvd.broadcast_parameters, ...)
    "allreduce", "allgather", "allgather_object", "broadcast_parameters",
    "broadcast_optimizer_state", "broadcast_variables", "broadcast_object", "alltoall",
    "grouped_allreduce"})
_COLLECTIVE_HOMES = ("torch.distributed", "horovod.torch", "horovod.tensorflow")
_MLPIPE_COLLECTIVES = ("mlpipe.runtime.all_reduce_metric",
                       "mlpipe.runtime.distributed.all_reduce_metric")
#: What gives a process its rank.
_RANK_CALLS = ("torch.distributed.get_rank", "mlpipe.runtime.rank", "mlpipe.runtime.local_rank",
               "mlpipe.runtime.node_rank", "mlpipe.runtime.is_writer", "horovod.torch.rank",
               "horovod.torch.local_rank", "horovod.tensorflow.rank",
               "torch.distributed.get_node_local_rank")
_RANK_VARIABLES = {"RANK", "LOCAL_RANK", "NODE_RANK", "OMPI_COMM_WORLD_RANK",
                   "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK"}


def _imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from every import in ``tree``."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name.split(".")[0]] = a.name if a.asname else \
                    a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                found[a.asname or a.name] = f"{node.module}.{a.name}"
    return found


def _collective(call: ast.Call, aliases: dict[str, str]) -> str | None:
    name = dotted(call.func, aliases, unaliased=True)
    if name is None:
        return None
    if name in _MLPIPE_COLLECTIVES:
        return name
    home, _, last = name.rpartition(".")
    return name if last in COLLECTIVES and home in _COLLECTIVE_HOMES else None


def _is_rank_source(node: ast.AST, aliases: dict[str, str], ranks: set[str]) -> bool:
    """Whether an expression reads the process's rank: a rank variable, a rank call, the
    launch's rank environment variable, ``args.rank``-like attributes."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in ranks:
            return True
        if isinstance(sub, ast.Call) and dotted(sub.func, aliases, unaliased=True) in _RANK_CALLS:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in ("rank", "local_rank",
                                                           "global_rank", "is_main_process",
                                                           "is_local_main_process"):
            return True
        if isinstance(sub, ast.Constant) and sub.value in _RANK_VARIABLES:
            return True
    return False


def _ranked_body(component: ComponentSpec
                 ) -> tuple[ast.AST, dict[str, str], set[str]] | None:
    """The body (a function, or a script component's script read whole), its imports, and
    the local names that hold the process's rank (``rank = dist.get_rank()``)."""
    fn, tree = _function(component), None
    if fn is not None and component.location is not None:
        tree = parse_file(component.location.file)
    elif component.function is None and component.command:
        facts = body_facts(component)
        fn = tree = parse_file(facts.file) if facts is not None else None
    if fn is None or tree is None:
        return None
    aliases = _imports(tree)
    ranks: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and _is_rank_source(node.value, aliases, ranks):
            ranks.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return fn, aliases, ranks


@_once
def rank_guarded_collectives(component: ComponentSpec) -> list[tuple[str, int, str]]:
    """Each collective the body calls in one branch of a condition on the process's rank
    (``if rank == 0: dist.all_reduce(t)``) that the other branch does not call too: only
    some ranks reach it, and the rest never join, so it waits for ever. ``(collective, line,
    the condition's source)``.

    Example:
        >>> rank_guarded_collectives(train.spec)
        [('torch.distributed.barrier', 14, 'rank == 0')]
    """
    read = _ranked_body(component)
    if read is None:
        return []
    fn, aliases, ranks = read
    sharded = {t.id for node in ast.walk(fn) if isinstance(node, ast.Assign)
               and isinstance(node.value, ast.Call)
               and dotted(node.value.func, aliases, unaliased=True) in _SHARDED_WRAPPERS
               for t in node.targets if isinstance(t, ast.Name)}
    found: list[tuple[str, int, str]] = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.If) or not _is_rank_source(node.test, aliases, ranks):
            continue
        branches = [_calls(node.body, aliases, sharded), _calls(node.orelse, aliases, sharded)]
        for mine, other in (branches, branches[::-1]):
            names = {n for n, _ in other}
            found += [(n, line, ast.unparse(node.test)) for n, line in mine if n not in names]
    return sorted(set(found), key=lambda x: x[1])


#: A model wrapped by one of these gathers its shards from every rank when its state dict is
#: taken: ``model.state_dict()`` is a collective.
_SHARDED_WRAPPERS = ("torch.distributed.fsdp.FullyShardedDataParallel",
                     "torch.distributed.fsdp.fully_sharded_data_parallel."
                     "FullyShardedDataParallel")
_SHARDED_GATHERS = {"state_dict", "full_optim_state_dict", "optim_state_dict",
                    "summon_full_params"}


def _calls(body: list[ast.stmt], aliases: dict[str, str],
           sharded: set[str]) -> list[tuple[str, int]]:
    found = []
    for sub in (s for stmt in body for s in ast.walk(stmt) if isinstance(s, ast.Call)):
        name = _collective(sub, aliases)
        func = sub.func
        if name is None and isinstance(func, ast.Attribute) and func.attr in _SHARDED_GATHERS \
                and isinstance(func.value, ast.Name) and func.value.id in sharded:
            name = f"FullyShardedDataParallel.{func.attr}"   # the model's shards, gathered
        if name is not None:
            found.append((name, sub.lineno))
    return found


#: Calls that fetch data or weights from remote storage into a local folder.
_DOWNLOADS = ("urllib.request.urlretrieve", "huggingface_hub.hf_hub_download",
              "huggingface_hub.snapshot_download", "wget.download", "gdown.download",
              "torchvision.datasets.utils.download_url",
              "torchvision.datasets.utils.download_and_extract_archive",
              "torch.hub.download_url_to_file", "azure.storage.blob.BlobClient.download_blob")


def _guarded(fn: ast.AST, aliases: dict[str, str], ranks: set[str]) -> set[int]:
    """The ids of every node under a condition on the rank (either branch)."""
    inside: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and _is_rank_source(node.test, aliases, ranks):
            inside.update(id(sub) for stmt in [*node.body, *node.orelse]
                          for sub in ast.walk(stmt))
    return inside


def _fetches(call: ast.Call, aliases: dict[str, str]) -> str | None:
    """What a call downloads: a known download function, or a data set built with
    ``download=True`` (torchvision, torchaudio, ...)."""
    name = dotted(call.func, aliases, unaliased=True)
    if name is not None and name in _DOWNLOADS:
        return name
    for kw in call.keywords:
        if kw.arg == "download" and getattr(kw.value, "value", None) is True:
            return f"{name or ast.unparse(call.func)}(download=True)"
    return None


@_once
def every_rank_downloads(component: ComponentSpec) -> list[tuple[str, int]]:
    """Each download the body (or a script component's script) makes outside any condition
    on the rank, so every process makes it: ``(what, line)``.

    Example:
        >>> every_rank_downloads(train.spec)
        [('torchvision.datasets.CIFAR10(download=True)', 21)]
    """
    read = _ranked_body(component)
    if read is None:
        return []
    fn, aliases, ranks = read
    inside = _guarded(fn, aliases, ranks)
    return [(what, node.lineno) for node in ast.walk(fn)
            if isinstance(node, ast.Call) and id(node) not in inside
            and (what := _fetches(node, aliases)) is not None]
