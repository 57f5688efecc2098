"""Drawing a compiled pipeline: plain text, Graphviz DOT and Mermaid.

Reads a Graph; knows nothing of checks, backends or the store.
"""
from __future__ import annotations

import re

import networkx as nx

from mlpipe.graph import Graph, StepNode, input_node, output_node
from mlpipe.spec import InputRole, PipelineInputSpec


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
        extra = []
        if comp.instances > 1 or comp.distribution is not None:
            dist = comp.distribution
            per = dist.processes_per_instance() if dist else 1
            extra.append(f"{comp.instances}x{per} {dist.type if dist else 'nodes'}")
        head = f"  {node.id:<{width}}  {comp.name} {comp.version}"
        if extra:
            head += f"  [{', '.join(extra)}]"
        lines.append(head)
        for key, endpoint in node.bindings.items():
            lines.append(f"  {'':<{width}}    {key} <- {endpoint}")
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


def render_dot(graph: Graph) -> str:
    """Graphviz DOT; nested pipelines are drawn as clusters."""
    spec = graph.spec
    out = [f"digraph {_dot_quote(spec.name)} {{", "  rankdir=LR;",
           '  node [shape=box, style="rounded", fontname="Helvetica"];',
           '  edge [fontname="Helvetica", fontsize=10];']
    for inp in spec.inputs:
        out.append(f"  {_dot_quote(input_node(inp.name))} [label="
                   f"{_dot_quote(inp.name + chr(10) + _input_label(inp))}, shape=ellipse];")
    clusters: dict[tuple[str, ...], list[StepNode]] = {}
    for node in graph.step_nodes():
        clusters.setdefault(node.scope, []).append(node)
    for scope, nodes in clusters.items():
        indent = "  "
        if scope:
            out.append(f"  subgraph {_dot_quote('cluster_' + '.'.join(scope))} {{")
            out.append(f"    label={_dot_quote('.'.join(scope))}; style=dashed;")
            indent = "    "
        for node in nodes:
            label = f"{node.id}\n{node.component.name} {node.component.version}"
            out.append(f"{indent}{_dot_quote(node.id)} [label={_dot_quote(label)}];")
        if scope:
            out.append("  }")
    for name in graph.outputs:
        out.append(f"  {_dot_quote(output_node(name))} [label={_dot_quote(name)}, shape=ellipse, "
                   f"style=bold];")
    for u, src_port, v, dst_port in graph.edges():
        out.append(f"  {_dot_quote(u)} -> {_dot_quote(v)} "
                   f"[label={_dot_quote(_edge_label(src_port, dst_port))}];")
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
    clusters: dict[tuple[str, ...], list[StepNode]] = {}
    for node in graph.step_nodes():
        clusters.setdefault(node.scope, []).append(node)
    for scope, nodes in clusters.items():
        indent = "  "
        if scope:
            out.append(f"  subgraph sg_{re.sub(r'[^A-Za-z0-9_]', '_', '.'.join(scope))}"
                       f"[\"{_mermaid_text('.'.join(scope))}\"]")
            indent = "    "
        for node in nodes:
            label = _mermaid_text(f"{node.id}\n{node.component.name} {node.component.version}")
            out.append(f'{indent}{ids[node.id]}["{label}"]')
        if scope:
            out.append("  end")
    for name in graph.outputs:
        out.append(f'  {ids[output_node(name)]}(["{_mermaid_text(name)}"])')
    for u, src_port, v, dst_port in graph.edges():
        label = _edge_label(src_port, dst_port)
        arrow = f"-->|{_mermaid_text(label)}|" if label else "-->"
        out.append(f"  {ids[u]} {arrow} {ids[v]}")
    return "\n".join(out)


RENDERERS = {"text": render_text, "dot": render_dot, "mermaid": render_mermaid}
