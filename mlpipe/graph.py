"""Compiling a PipelineSpec into a networkx DAG of leaf steps with typed edges.

Nested pipelines are flattened (step ids become ``outer.inner``) and every binding is
resolved to where its value really comes from. Compiling never judges; checks do.
networkx is imported when ``Graph.dag`` is first asked for, not by compiling or checking:
importing it costs more than checking a pipeline (docs/performance.md).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlpipe.spec import (
    Binding,
    ComponentSpec,
    Literal,
    Location,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    StepSpec,
)

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True, slots=True)
class FromStep:
    """The value comes from output ``port`` of step node ``node``."""

    node: str
    port: str

    def __str__(self) -> str:
        return f"{self.node}.{self.port}" if self.port else self.node


@dataclass(frozen=True, slots=True)
class FromInput:
    """The value is the top-level pipeline input ``name``, given at submission."""

    name: str

    def __str__(self) -> str:
        return f"inputs.{self.name}"


@dataclass(frozen=True, slots=True)
class FromLiteral:
    """A constant; ``base`` is the folder a relative path in it is relative to (None: the
    current directory); ``yaml``: read from Azure ML YAML (see ``Literal``)."""

    value: Any
    base: str | None = field(default=None, compare=False)
    yaml: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Unbound:
    """Nothing provides a value (a nested pipeline's input left unbound)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Dangling:
    """The binding names a step, output or input that does not exist."""

    reason: str


Endpoint = FromStep | FromInput | FromLiteral | Unbound | Dangling


def input_node(name: str) -> str:
    return f"in:{name}"


def output_node(name: str) -> str:
    return f"out:{name}"


@dataclass(slots=True)
class StepNode:
    """A leaf step of the flattened graph, with its bindings resolved."""

    id: str
    step: StepSpec
    component: ComponentSpec
    pipeline: PipelineSpec
    scope: tuple[str, ...]
    bindings: dict[str, Endpoint] = field(default_factory=dict)
    #: where a setting's value comes from: ``compute`` when a pipeline input names it
    settings: dict[str, Endpoint] = field(default_factory=dict)

    @property
    def location(self) -> Location | None:
        return self.step.location


class Links:
    """The DAG's nodes and edges as compiling adds them (``add_node``/``add_edge`` as in
    networkx), kept in networkx's order: nodes as added, each node's edges by target as first
    linked, then by key. ``Graph.dag`` builds the networkx graph from them."""

    __slots__ = ("nodes", "succ")

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.succ: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}

    def add_node(self, node: str, **attrs: Any) -> None:
        self.nodes.setdefault(node, {}).update(attrs)
        self.succ.setdefault(node, {})

    def add_edge(self, u: str, v: str, key: str, **attrs: Any) -> None:
        self.add_node(u)
        self.add_node(v)
        self.succ[u].setdefault(v, {}).setdefault(key, {}).update(attrs)

    def edges(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        for u, targets in self.succ.items():
            for v, keyed in targets.items():
                for key, data in keyed.items():
                    yield u, v, key, data

    def out_degree(self, node: str) -> int:
        return sum(len(keyed) for keyed in self.succ.get(node, {}).values())

    def predecessors(self) -> dict[str, set[str]]:
        """Each node's direct predecessors (networkx's ``predecessors``, for every node)."""
        pred: dict[str, set[str]] = {node: set() for node in self.succ}
        for u, targets in self.succ.items():
            for v in targets:
                pred[v].add(u)
        return pred

    def descendants(self, node: str) -> set[str]:
        """Every node reachable from ``node``, not ``node`` itself (as ``nx.descendants``)."""
        seen: set[str] = set()
        todo = list(self.succ.get(node, ()))
        while todo:
            v = todo.pop()
            if v not in seen:
                seen.add(v)
                todo.extend(self.succ[v])
        seen.discard(node)  # on a cycle through it, as networkx
        return seen

    def is_acyclic(self) -> bool:
        """Whether the edges form no cycle (Kahn's algorithm: linear in nodes and edges)."""
        indegree = dict.fromkeys(self.succ, 0)
        for targets in self.succ.values():
            for v in targets:
                indegree[v] += 1
        ready = [n for n, d in indegree.items() if d == 0]
        seen = 0
        while ready:
            node = ready.pop()
            seen += 1
            for v in self.succ[node]:
                indegree[v] -= 1
                if indegree[v] == 0:
                    ready.append(v)
        return seen == len(indegree)

    def to_networkx(self) -> nx.MultiDiGraph:
        import networkx as nx

        dag = nx.MultiDiGraph()
        dag.add_nodes_from(self.nodes.items())
        # a MultiDiGraph takes (u, v, key, data) edges; networkx's stubs list only 2- and 3-tuples
        dag.add_edges_from(
            (u, v, key, data)  # pyright: ignore[reportArgumentType]
            for u, v, key, data in self.edges())
        return dag


@dataclass(slots=True)
class Graph:
    """A compiled pipeline: the spec, the DAG and the resolved step nodes.

    DAG nodes are step ids (``prepare``, ``features.prepare``), ``in:NAME`` for pipeline
    inputs and ``out:NAME`` for pipeline outputs; each edge carries ``src_port`` and
    ``dst_port``. ``links`` holds them as plain data; ``dag`` is the same as a networkx
    ``MultiDiGraph``, built on first use.
    """

    spec: PipelineSpec
    links: Links
    steps: dict[str, StepNode]
    outputs: dict[str, Endpoint]
    duplicates: list[tuple[PipelineSpec, str, list[StepSpec]]]
    _dag: nx.MultiDiGraph | None = None

    @property
    def dag(self) -> nx.MultiDiGraph:
        if self._dag is None:
            self._dag = self.links.to_networkx()
        return self._dag

    def step_nodes(self) -> Iterator[StepNode]:
        return iter(self.steps.values())

    def input(self, name: str) -> PipelineInputSpec | None:
        return self.spec.input(name)

    def edges(self) -> Iterator[tuple[str, str, str, str]]:
        """Every connection as ``(source node, source port, target node, target port)``."""
        for u, v, _key, data in self.links.edges():
            yield u, data["src_port"], v, data["dst_port"]


class _Scope:
    """Resolves bindings inside one (possibly nested) pipeline."""

    __slots__ = ("by_name", "env", "inner", "path", "prefix", "spec")

    def __init__(self, spec: PipelineSpec, prefix: str, env: Callable[[str], Endpoint],
                 path: tuple[str, ...]) -> None:
        self.spec = spec
        self.prefix = prefix
        self.env = env
        self.path = path
        self.by_name: dict[str, StepSpec] = {}
        for step in spec.steps:
            self.by_name.setdefault(step.name, step)
        self.inner: dict[str, _Scope] = {}

    def resolve(self, binding: Binding) -> Endpoint:
        if isinstance(binding, Literal):
            return FromLiteral(binding.value, binding.base, binding.yaml)
        if isinstance(binding, PipelineInput):
            return self.env(binding.name)
        step = self.by_name.get(binding.step)
        if step is None:
            return Dangling(f"pipeline {self.spec.name!r} has no step {binding.step!r}")
        if isinstance(step.target, ComponentSpec):
            return FromStep(self.prefix + step.name, binding.port)
        inner = self.inner_scope(step)
        out = step.target.output(binding.port)
        if out is None:
            if not binding.port:
                return FromStep(self.prefix + step.name, "")
            return Dangling(f"nested pipeline step {self.prefix + step.name!r} has no output "
                            f"{binding.port!r}")
        return inner.resolve(out)

    def inner_scope(self, step: StepSpec) -> "_Scope":
        scope = self.inner.get(step.name)
        if scope is None:
            target: PipelineSpec = step.target  # type: ignore[assignment]
            qualified = self.prefix + step.name

            def env(name: str, step=step, target=target, qualified=qualified) -> Endpoint:
                bound = step.binding(name)
                if bound is not None:
                    return self.resolve(bound)
                declared = target.input(name)
                if declared is None:
                    return Dangling(f"pipeline {target.name!r} has no input {name!r}")
                if not declared.required:
                    return FromLiteral(declared.default, declared.base, declared.yaml)
                return Unbound(f"step {qualified!r} (pipeline {target.name!r}) leaves its "
                               f"input {name!r} unbound")

            scope = _Scope(target, qualified + ".", env, (*self.path, step.name))
            self.inner[step.name] = scope
        return scope


def compile_pipeline(spec: PipelineSpec) -> Graph:
    """Flatten ``spec`` into a Graph. Never raises for wiring problems: checks report them.

    Example:
        >>> graph = compile_pipeline(defect_classifier.spec)
        >>> sorted(graph.steps)
        ['evaluate', 'prepare', 'train']
    """
    dag = Links()
    for inp in spec.inputs:
        dag.add_node(input_node(inp.name), kind="input", spec=inp)
    names = {i.name for i in spec.inputs}

    def top_env(name: str) -> Endpoint:
        if name in names:
            return FromInput(name)
        return Dangling(f"pipeline {spec.name!r} has no input {name!r}")

    steps: dict[str, StepNode] = {}
    duplicates: list[tuple[PipelineSpec, str, list[StepSpec]]] = []
    root = _Scope(spec, "", top_env, ())
    _add_scope(root, dag, steps, duplicates)

    for node in steps.values():
        for key, endpoint in node.bindings.items():
            if isinstance(endpoint, FromStep) and endpoint.node in steps:
                dag.add_edge(endpoint.node, node.id, key=f"{endpoint.port}->{key}",
                             src_port=endpoint.port, dst_port=key)
            elif isinstance(endpoint, FromInput):
                dag.add_edge(input_node(endpoint.name), node.id, key=f"->{key}",
                             src_port="", dst_port=key)
        for key, endpoint in node.settings.items():
            if isinstance(endpoint, FromInput):  # the input names where the step runs
                dag.add_edge(input_node(endpoint.name), node.id, key=f"->${key}",
                             src_port="", dst_port=f"${key}")
    outputs: dict[str, Endpoint] = {}
    for name, binding in spec.outputs:
        endpoint = root.resolve(binding)
        outputs[name] = endpoint
        dag.add_node(output_node(name), kind="output")
        if isinstance(endpoint, FromStep) and endpoint.node in steps:
            dag.add_edge(endpoint.node, output_node(name), key=f"{endpoint.port}->",
                         src_port=endpoint.port, dst_port="")
        elif isinstance(endpoint, FromInput):
            dag.add_edge(input_node(endpoint.name), output_node(name), key="->",
                         src_port="", dst_port="")
    return Graph(spec, dag, steps, outputs, duplicates)


def _add_scope(scope: _Scope, dag: Links, steps: dict[str, StepNode],
               duplicates: list) -> None:
    seen: dict[str, list[StepSpec]] = {}
    for step in scope.spec.steps:
        seen.setdefault(step.name, []).append(step)
        if isinstance(step.target, PipelineSpec):
            _add_scope(scope.inner_scope(step), dag, steps, duplicates)
            continue
        node_id = scope.prefix + step.name
        if node_id in steps:
            node_id = f"{node_id}#{len(seen[step.name])}"
        node = StepNode(node_id, step, step.target, scope.spec, scope.path,
                        {key: scope.resolve(b) for key, b in step.bindings})
        compute = step.target.compute
        if compute is not None and compute.input is not None:
            node.settings["compute"] = scope.resolve(PipelineInput(compute.input))
        steps[node_id] = node
        dag.add_node(node_id, kind="step")
    for name, group in seen.items():
        if len(group) > 1:
            duplicates.append((scope.spec, scope.prefix + name, group))
