"""Stage literals that must agree (MP418): the normalisation (mean/std), class order, feature
order and input size a training step states, against what each step that reads its model
states. A value is read where a step states it as a literal: an argument of its command
(``--mean 0.5 0.5 0.5``), a literal given to one of its parameters (or the parameter's
default), or its body's source (``Normalize(mean=..., std=...)``, ``CLASSES = [...]``, an
``add_argument("--classes", default=...)``). The same for mlpipe Python, Azure ML YAML and
azure-ai-ml Python; the source is read, nothing is imported or run.

Steps that take the value from one pipeline input agree by construction and are not compared.
"""
from __future__ import annotations

import ast
import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mlpipe import codes
from mlpipe.artifacts import AssetType
from mlpipe.checks.body import body_facts
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step, help_for, written_in
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import FromLiteral, Graph, StepNode, Unbound
from mlpipe.paths import display_path
from mlpipe.source import parse_file
from mlpipe.spec import ComponentSpec

#: What a name states, by its spelling without case, ``_`` and ``-``.
_KINDS: dict[str, str] = {
    **dict.fromkeys(("mean", "normmean", "normalizemean", "normalisemean", "pixelmean",
                     "imagemean", "imgmean", "rgbmean", "channelmean", "datasetmean"), "mean"),
    **dict.fromkeys(("std", "normstd", "normalizestd", "normalisestd", "pixelstd", "imagestd",
                     "imgstd", "rgbstd", "channelstd", "datasetstd"), "std"),
    **dict.fromkeys(("classes", "classnames", "classorder", "classlist", "labelnames",
                     "labelorder", "labellist", "categories", "categorynames", "idtolabel",
                     "id2label", "label2id", "labeltoid", "labelmap", "classtoidx",
                     "class2idx", "labelencoding", "classindex", "classindices"), "classes"),
    **dict.fromkeys(("features", "featurecolumns", "featurecols", "featurenames",
                     "featureorder", "featurelist", "inputcolumns"), "features"),
    **dict.fromkeys(("imagesize", "imgsize", "inputsize", "inputresolution", "cropsize",
                     "maxlength", "maxseqlength", "maxseqlen", "maxlen", "sequencelength",
                     "seqlen"), "size"),
}
#: How a message names each kind.
_SAID = {"mean": "normalisation mean", "std": "normalisation standard deviation",
         "classes": "class order (label encoding)", "features": "feature order",
         "size": "input size"}
_WHY = {"mean": "a model evaluated with another normalisation than it was trained with is "
                "measured on inputs it never saw",
        "std": "a model evaluated with another normalisation than it was trained with is "
               "measured on inputs it never saw",
        "classes": "class index i means one class in training and another where the model is "
                   "read, so its predictions are scored against the wrong labels",
        "features": "the model reads its columns by position, so every feature is fed into "
                    "another feature's weight",
        "size": "the model is read at another input size than it was trained at"}


@dataclass(frozen=True, slots=True)
class Stated:
    """One literal a step states: its kind, the name it was written as, the value, where."""

    kind: str
    name: str
    value: Any
    file: str | None
    line: int | None


def _kind(name: str) -> str | None:
    return _KINDS.get(name.lstrip("-").replace("_", "").replace("-", "").lower())


def _number(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _plain(value: Any) -> Any:
    """A value as compared: sequences as lists, numbers as floats, a string that lists values
    (``"0.5,0.5"``, ``"[0.5, 0.5]"``) as its list, a one-element list as its element."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{":
            try:
                return _plain(json.loads(text))
            except ValueError:
                return text
        if "," in text:
            return _plain([_number(p.strip()) for p in text.split(",") if p.strip()])
        number = _number(text)
        return float(number) if isinstance(number, int) else number
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return items[0] if len(items) == 1 else items
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


def _fits(kind: str, value: Any) -> bool:
    """Whether ``value`` is what a name of ``kind`` states (not an accumulator's ``0``, an
    empty list being filled, or a file name)."""
    if kind in ("mean", "std"):
        return isinstance(value, float) or (
            isinstance(value, list) and bool(value) and all(isinstance(v, float) for v in value))
    if kind == "size":
        return (isinstance(value, float) and value.is_integer() and value > 0) or (
            isinstance(value, list) and bool(value) and all(isinstance(v, float) for v in value))
    if isinstance(value, dict):   # a label map: {"ok": 0, ...} or {0: "ok", ...}
        return len(value) >= 2 and all(isinstance(v, (str, float)) for v in value.values())
    return isinstance(value, list) and len(value) >= 2 and \
        all(isinstance(v, (str, float)) for v in value)


def _literal(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _stated(kind: str | None, name: str, value: Any, file: str | None,
            line: int | None) -> Stated | None:
    if kind is None or value is None:
        return None
    value = _plain(value)
    return Stated(kind, name, value, file, line) if _fits(kind, value) else None


def _from_tree(roots: list[ast.AST], file: str) -> Iterator[Stated]:
    for root in roots:
        for node in ast.walk(root):
            found: list[Stated | None] = []
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found += [_stated(_kind(t.id), t.id, _literal(node.value), file, node.lineno)
                          for t in targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.Call):
                name = ast.unparse(node.func).rsplit(".", 1)[-1]
                keywords = {k.arg: k.value for k in node.keywords if k.arg}
                if name == "Normalize":
                    given = dict(zip(("mean", "std"), node.args)) | keywords
                    found += [_stated(k, f"Normalize({k}=...)", _literal(given.get(k)), file,
                                      node.lineno) for k in ("mean", "std")]
                elif name == "add_argument" and node.args and "default" in keywords:
                    flag = _literal(node.args[0])
                    if isinstance(flag, str) and flag.startswith("--"):
                        found.append(_stated(_kind(flag), flag, _literal(keywords["default"]),
                                             file, node.lineno))
            yield from (s for s in found if s is not None)


def _function(component: ComponentSpec) -> ast.AST | None:
    """The component's function in its module's source (as ``checks.flows`` finds it)."""
    if component.function is None or component.location is None:
        return None
    tree = parse_file(component.location.file)
    name = component.function.partition(":")[2].rsplit(".", 1)[-1]
    line = component.location.line
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                and (node.lineno == line or any(d.lineno == line for d in node.decorator_list)):
            return node
    return None


def _module_constants(tree: ast.Module, fn: ast.AST) -> list[ast.AST]:
    """The module's top-level assignments of names the function reads."""
    read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    return [s for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id in read
        for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))]


def _in_body(component: ComponentSpec) -> list[Stated]:
    fn = _function(component)
    if fn is not None and component.location is not None:
        tree = parse_file(component.location.file)
        roots = [fn, *(_module_constants(tree, fn) if tree is not None else [])]
        return list(_from_tree(roots, component.location.file))
    facts = body_facts(component) if component.function is None else None
    tree = parse_file(facts.file) if facts is not None else None
    return list(_from_tree([tree], facts.file)) if tree is not None and facts else []


def _in_command(node: StepNode) -> list[Stated]:
    try:
        words = shlex.split(node.component.command or "")
    except ValueError:
        return []
    # a YAML component file's command: its own line (azure-ai-ml's: the user's Python line)
    loc = (node.component.location if written_in(node) == "yaml" else None) or node.location
    found = []
    for i, word in enumerate(words):
        flag, _, inline = word.partition("=")
        kind = _kind(flag) if flag.startswith("--") else None
        if kind is None:
            continue
        values = [inline] if inline else []
        for value in [] if inline else words[i + 1:]:
            if (value.startswith("-") and _number(value) == value) or value in (
                    "&&", "||", ";", "|") or "${{" in value:
                break
            values.append(value)
        if values and not any("${{" in v for v in values):
            s = _stated(kind, flag, [_number(v) for v in values] if len(values) > 1
                        else values[0], loc.file if loc else None, loc.line if loc else None)
            found += [s] if s is not None else []
    return found


def _in_parameters(node: StepNode) -> list[Stated]:
    loc = node.location
    found = []
    for param in node.component.params:
        endpoint = node.bindings.get(param.name)
        if type(endpoint) is FromLiteral:
            value = endpoint.value
        elif endpoint is None or type(endpoint) is Unbound:
            value = param.default
        else:
            continue   # from a pipeline input or another step: one value for every reader
        s = _stated(_kind(param.name), param.name, value, loc.file if loc else None,
                    loc.line if loc else None)
        found += [s] if s is not None else []
    return found


def stage_literals(node: StepNode, memo: dict[int, list[Stated]]) -> dict[str, Stated]:
    """What ``node`` states of each kind, its command first, then its parameters, then its
    body (a command's argument overrides a default in the script). A kind the body states
    twice with different values is left out: which one is used is not known from the text."""
    c = node.component
    if id(c) not in memo:
        memo[id(c)] = _in_body(c)
    found: dict[str, Stated] = {}
    for group in (_in_command(node), _in_parameters(node)):
        for s in group:
            found.setdefault(s.kind, s)
    body: dict[str, list[Stated]] = {}
    for s in memo[id(c)]:
        body.setdefault(s.kind, []).append(s)
    for kind, all_of in body.items():
        if kind not in found and len({json.dumps(s.value, sort_keys=True, default=repr)
                                      for s in all_of}) == 1:
            found[kind] = all_of[0]
    return found


def _makes_model(node: StepNode) -> list[str]:
    return [p.name for p in node.component.outputs
            if p.kind in (AssetType.MLFLOW_MODEL, AssetType.CUSTOM_MODEL, AssetType.TRITON_MODEL)
            or "model" in p.name.lower()]


def _readers(graph: Graph, node: StepNode, ports: list[str]) -> list[str]:
    """The steps that read one of ``ports`` of ``node``, directly or through a step between."""
    first = {v for u, src, v, _ in graph.edges() if u == node.id and src in ports}
    found: set[str] = set()
    for step in first:
        found |= {step} | graph.links.descendants(step)
    return [s for s in graph.steps if s in found]


def _where(s: Stated) -> str:
    return f"{display_path(s.file)}:{s.line}" if s.file and s.line else "its definition"


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else json.dumps(value, default=repr)


@check(codes.STAGE_LITERALS_DISAGREE)
def stage_literals_disagree(graph: Graph) -> Iterator[Diagnostic]:
    memo: dict[int, list[Stated]] = {}
    for node in graph.step_nodes():
        ports = _makes_model(node)
        mine = stage_literals(node, memo) if ports else {}
        for reader in _readers(graph, node, ports) if mine else []:
            other = graph.steps[reader]
            theirs = stage_literals(other, memo)
            for kind in sorted(set(mine) & set(theirs)):
                a, b = mine[kind], theirs[kind]
                if a.value == b.value:
                    continue
                order = kind in ("classes", "features") and isinstance(a.value, list) and \
                    isinstance(b.value, list) and sorted(map(str, a.value)) == sorted(
                        map(str, b.value))
                where = at_step(other)
                if b.file and b.line:
                    where.update(file=b.file, line=b.line)
                yield Diagnostic.of(
                    codes.STAGE_LITERALS_DISAGREE,
                    f"steps '{node.id}' and '{reader}' disagree on the {_SAID[kind]}: "
                    f"'{node.id}' states {a.name} = {_shown(a.value)} ({_where(a)}), "
                    f"'{reader}' states {b.name} = {_shown(b.value)} ({_where(b)})"
                    f"{' (the same values in another order)' if order else ''}; "
                    f"{_WHY[kind]}",
                    hint=help_for(other, "state the value once: a pipeline input (or a "
                                         "contract, LabelMap/TabularSchema) both steps take, or "
                                         "a constant both import",
                                  "state the value once: a pipeline input both jobs take "
                                  "(${{parent.inputs.NAME}}), or a file both read"),
                    **where)
