"""Drawing a compiled pipeline: plain text, Graphviz DOT and Mermaid, each port with its
contract (the transport kind only where a port declares none) and each distributed step with
its topology.

Reads a Graph; knows nothing of checks, backends or the store.
"""
from __future__ import annotations

import re

import networkx as nx

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import contract_label
from mlpipe.graph import Graph, StepNode, input_node, output_node
from mlpipe.spec import ComponentSpec, InputRole, PipelineInputSpec, PortSpec


def _order(graph: Graph) -> list[StepNode]:
    try:
        order = [n for n in nx.topological_sort(graph.dag) if n in graph.steps]
    except nx.NetworkXUnfeasible:  # a cycle: fall back to declaration order
        order = list(graph.steps)
    return [graph.steps[n] for n in order]


def _input_label(inp: PipelineInputSpec) -> str:
    if inp.role is InputRole.PARAM:
        kind = f"param {inp.param.type.value}" if inp.param else "param"
    else:
        kind = inp.port.type_label if inp.port else (inp.kind.value if inp.kind else "artifact")
    default = "" if inp.required else f" = {inp.default!r}"
    return f"{kind}{default}"


_KINDS = tuple(kind.value for kind in AssetType)


def _topology(comp: ComponentSpec) -> str | None:
    """``2x4 pytorch``: instances x processes per instance and the launcher, if distributed."""
    if comp.instances <= 1 and comp.distribution is None:
        return None
    dist = comp.distribution
    per = dist.processes_per_instance() if dist else 1
    return f"{comp.instances}x{per} {dist.type if dist else 'nodes'}"


def _port_type(port: PortSpec | None) -> str | None:
    """A port's contract label, else its transport kind (None: not an artifact port)."""
    if port is None:
        return None
    return contract_label(port.contract) if port.contract is not None else port.kind.value


def _ends(graph: Graph, u: str, src_port: str, v: str, dst_port: str
          ) -> tuple[str | None, str | None]:
    """What the edge's producer promises and its consumer requires (contract or kind)."""
    if u in graph.steps:
        made = _port_type(graph.steps[u].component.output(src_port))
    else:
        inp = graph.input(u.removeprefix("in:")) if u.startswith("in:") else None
        made = _port_type(inp.port) if inp is not None and inp.role is not InputRole.PARAM \
            else None
    wanted = _port_type(graph.steps[v].component.input(dst_port)) if v in graph.steps else None
    return made, wanted


def _edge_contract(made: str | None, wanted: str | None, kinds: tuple[str, ...] = ()
                   ) -> str | None:
    """Both sides where two contracts differ; else the contract (a bare kind only where
    neither side declares one)."""
    if made in kinds and wanted is not None:
        return wanted
    if wanted in kinds and made is not None:
        return made
    if made and wanted and made != wanted:
        return f"{made} → {wanted}"
    return made or wanted


def render_text(graph: Graph) -> str:
    """A readable listing: inputs, steps in topological order with their bindings, outputs."""
    spec = graph.spec
    lines = [f"pipeline {spec.name}  ({len(graph.steps)} steps)  {spec.digest}"]
    if spec.inputs:
        lines.append("inputs:")
        width = max(len(i.name) for i in spec.inputs)
        lines += [f"  {i.name:<{width}}  {_input_label(i)}" for i in spec.inputs]
    lines.append("steps:")
    nodes = _order(graph)
    width = max((len(n.id) for n in nodes), default=0)
    for node in nodes:
        comp = node.component
        topology = _topology(comp)
        head = f"  {node.id:<{width}}  {comp.name} {comp.version}"
        if topology:
            head += f"  [{topology}]"
        lines.append(head)
        for key, endpoint in node.bindings.items():
            port = comp.input(key)
            shown = f"  {_port_type(port)}" if port is not None else ""
            lines.append(f"  {'':<{width}}    {key} <- {endpoint}{shown}")
        for port in comp.outputs:
            lines.append(f"  {'':<{width}}    {port.name} -> {_port_type(port)}")
    if graph.outputs:
        lines.append("outputs:")
        width = max(len(k) for k in graph.outputs)
        for name, endpoint in graph.outputs.items():
            lines.append(f"  {name:<{width}}  <- {endpoint}")
    if spec.candidate is not None:
        c = spec.candidate
        parts = [f"model <- {graph.outputs[c.model]}"]
        if c.evaluation:
            parts.append(f"evaluation <- {graph.outputs[c.evaluation]}")
        lines.append(f"candidate{' ' + c.name if c.name else ''}: {', '.join(parts)}")
    return "\n".join(lines)


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _edge_label(src_port: str, dst_port: str) -> str:
    if src_port and dst_port and src_port != dst_port:
        return f"{src_port} → {dst_port}"
    return src_port or dst_port


def _step_label(node: StepNode) -> str:
    """The step's id, component and version, and its topology where it is distributed."""
    comp = node.component
    topology = _topology(comp)
    return f"{node.id}\n{comp.name} {comp.version}" + (f"\n[{topology}]" if topology else "")


def _with_contract(ports: str, contract: str | None) -> str:
    return f"{ports}\n{contract}" if contract else ports


def _clusters(graph: Graph) -> list[tuple[tuple[str, ...], list[StepNode]]]:
    """The steps grouped by the nested pipeline they stand in (``()``: the top level)."""
    clusters: dict[tuple[str, ...], list[StepNode]] = {}
    for node in graph.step_nodes():
        clusters.setdefault(node.scope, []).append(node)
    return list(clusters.items())


def render_dot(graph: Graph) -> str:
    """Graphviz DOT; nested pipelines are drawn as clusters."""
    spec = graph.spec
    out = [f"digraph {_dot_quote(spec.name)} {{", "  rankdir=LR;",
           '  node [shape=box, style="rounded", fontname="Helvetica"];',
           '  edge [fontname="Helvetica", fontsize=10];']
    for inp in spec.inputs:
        out.append(f"  {_dot_quote(input_node(inp.name))} [label="
                   f"{_dot_quote(inp.name + chr(10) + _input_label(inp))}, shape=ellipse];")
    for scope, nodes in _clusters(graph):
        indent = "    " if scope else "  "
        if scope:
            out.append(f"  subgraph {_dot_quote('cluster_' + '.'.join(scope))} {{")
            out.append(f"    label={_dot_quote('.'.join(scope))}; style=dashed;")
        for node in nodes:
            out.append(f"{indent}{_dot_quote(node.id)} [label={_dot_quote(_step_label(node))}"
                       f"{', peripheries=2' if _topology(node.component) else ''}];")
        if scope:
            out.append("  }")
    for name in graph.outputs:
        out.append(f"  {_dot_quote(output_node(name))} [label={_dot_quote(name)}, shape=ellipse, "
                   f"style=bold];")
    for u, src_port, v, dst_port in graph.edges():
        label = _with_contract(_edge_label(src_port, dst_port),
                               _edge_contract(*_ends(graph, u, src_port, v, dst_port), _KINDS))
        out.append(f"  {_dot_quote(u)} -> {_dot_quote(v)} [label={_dot_quote(label)}];")
    out.append("}")
    return "\n".join(out)


def _mermaid_ids(graph: Graph) -> dict[str, str]:
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for node in graph.dag.nodes:
        base = re.sub(r"[^A-Za-z0-9_]", "_", node)
        candidate, i = base, 1
        while candidate in taken:
            i += 1
            candidate = f"{base}_{i}"
        taken.add(candidate)
        ids[node] = candidate
    return ids


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("\n", "<br/>")


def render_mermaid(graph: Graph) -> str:
    """A Mermaid flowchart; nested pipelines are drawn as subgraphs."""
    ids = _mermaid_ids(graph)
    out = ["flowchart LR"]
    for inp in graph.spec.inputs:
        label = _mermaid_text(f"{inp.name}: {_input_label(inp)}")
        out.append(f'  {ids[input_node(inp.name)]}(["{label}"])')
    for scope, nodes in _clusters(graph):
        indent = "    " if scope else "  "
        if scope:
            out.append(f"  subgraph sg_{re.sub(r'[^A-Za-z0-9_]', '_', '.'.join(scope))}"
                       f"[\"{_mermaid_text('.'.join(scope))}\"]")
        for node in nodes:
            label = _mermaid_text(_step_label(node))
            # a distributed step keeps its marker in the shape too: a subroutine box [[...]]
            shape = ('[["', '"]]') if _topology(node.component) else ('["', '"]')
            out.append(f'{indent}{ids[node.id]}{shape[0]}{label}{shape[1]}')
        if scope:
            out.append("  end")
    for name in graph.outputs:
        out.append(f'  {ids[output_node(name)]}(["{_mermaid_text(name)}"])')
    for u, src_port, v, dst_port in graph.edges():
        label = _with_contract(_edge_label(src_port, dst_port),
                               _edge_contract(*_ends(graph, u, src_port, v, dst_port), _KINDS))
        arrow = f'-->|"{_mermaid_text(label)}"|' if label else "-->"
        out.append(f"  {ids[u]} {arrow} {ids[v]}")
    return "\n".join(out)


RENDERERS = {"text": render_text, "dot": render_dot, "mermaid": render_mermaid}
