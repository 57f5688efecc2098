"""Structure checks (MP1xx): cycles, unbound and unknown ports, dangling and odd bindings."""
from __future__ import annotations

import difflib
from collections.abc import Iterator

from mlpipe.checks.registry import check
from mlpipe.checks.where import at_edge, at_pipeline, at_step
from mlpipe.codes import (
    AMBIGUOUS_STEP_REFERENCE,
    BINDING_KIND_MISMATCH,
    DANGLING_BINDING,
    DEPENDENCY_CYCLE,
    DUPLICATE_STEP_NAME,
    OUTPUT_BOUND_TWICE_IN_STEP,
    OUTPUT_GIVEN_A_VALUE,
    REQUIRED_INPUT_UNBOUND,
    UNKNOWN_OUTPUT,
    UNKNOWN_PORT,
    UNUSED_PIPELINE_INPUT,
    UNUSED_STEP_OUTPUTS,
)
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import (
    Dangling,
    FromInput,
    FromLiteral,
    FromStep,
    Graph,
    StepNode,
    Unbound,
    input_node,
)
from mlpipe.references import REGISTERED_COMPONENT
from mlpipe.spec import InputRole


@check(DEPENDENCY_CYCLE)
def cycles(graph: Graph) -> Iterator[Diagnostic]:
    if graph.links.is_acyclic():
        return
    import networkx as nx  # only to name a cycle's steps: a pipeline has none as a rule

    step_graph = graph.dag.subgraph(graph.steps)
    for component in nx.strongly_connected_components(step_graph):
        first = min(component)
        if len(component) == 1 and not step_graph.has_edge(first, first):
            continue
        loop = nx.find_cycle(step_graph.subgraph(component), source=first)
        hops = [f"{u}.{step_graph.edges[u, v, k]['src_port']} -> "
                f"{v}.{step_graph.edges[u, v, k]['dst_port']}" for u, v, k in loop]
        yield Diagnostic.of(
            DEPENDENCY_CYCLE,
            f"steps {', '.join(repr(n) for n in sorted(component))} form a cycle: "
            f"{'; '.join(hops)}",
            hint="a step cannot consume an output that depends on its own outputs; bind one "
                 "of these inputs to an upstream artifact instead",
            **at_step(graph.steps[first]))


@check(REQUIRED_INPUT_UNBOUND, UNKNOWN_PORT, OUTPUT_GIVEN_A_VALUE, BINDING_KIND_MISMATCH,
       DANGLING_BINDING, UNKNOWN_OUTPUT, AMBIGUOUS_STEP_REFERENCE)
def bindings(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        comp = node.component
        for port in comp.inputs:
            endpoint = node.bindings.get(port.name)
            if port.optional:
                continue
            if endpoint is None or isinstance(endpoint, Unbound):
                why = f" ({endpoint.reason})" if isinstance(endpoint, Unbound) else ""
                yield Diagnostic.of(
                    REQUIRED_INPUT_UNBOUND,
                    f"required input '{node.id}.{port.name}' ({port.type_label}) is "
                    f"not bound{why}",
                    hint=f"pass {port.name}=... when calling {comp.name}, or declare it "
                         f"optional with a default of None", **at_step(node, port.name))
        for key, endpoint in node.bindings.items():
            yield from _binding(graph, node, key, endpoint)


def _binding(graph: Graph, node: StepNode, key: str, endpoint) -> Iterator[Diagnostic]:
    comp = node.component
    # an input and an output may share a name in Azure ML YAML: then the binding is the input's
    if comp.output(key) is not None and comp.input(key) is None and comp.param(key) is None:
        yield Diagnostic.of(
            OUTPUT_GIVEN_A_VALUE,
            f"'{node.id}.{key}' is an output of {comp.name!r} but the call gives "
            f"it the value {endpoint}",
            hint=f"remove {key}=... from the call; mlpipe provides output paths",
            **at_step(node, key))
        return
    port, param = comp.input(key), comp.param(key)
    if port is None and param is None:
        names = [p.name for p in comp.inputs] + [p.name for p in comp.params]
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        yield Diagnostic.of(
            UNKNOWN_PORT, f"{comp.name!r} has no input or parameter {key!r} (step '{node.id}')",
            hint=f"{hint}{comp.name!r} takes: {', '.join(names) or 'nothing'}",
            **at_step(node, key))
        return
    if isinstance(endpoint, Dangling):
        yield Diagnostic.of(
            DANGLING_BINDING,
            f"'{node.id}.{key}' is bound to something that does not "
            f"exist: {endpoint.reason}",
            hint="bind it to an existing step output or pipeline input",
            **at_step(node, key))
        return
    if isinstance(endpoint, FromStep):
        yield from _step_reference(graph, node, key, endpoint)
        if param is not None:
            yield Diagnostic.of(
                BINDING_KIND_MISMATCH, f"parameter '{node.id}.{key}' is bound to the artifact "
                               f"'{endpoint}'", hint=f"pass a {param.type.value} value, or a "
                               f"pipeline parameter", **at_edge(graph, str(endpoint),
                                                              f"{node.id}.{key}", node))
    elif isinstance(endpoint, FromInput):
        source = graph.input(endpoint.name)
        assert source is not None  # compiling makes a FromInput only of a declared input
        role = source.role
        if param is not None and role is InputRole.ARTIFACT:
            yield Diagnostic.of(
                BINDING_KIND_MISMATCH, f"parameter '{node.id}.{key}' is bound to pipeline input "
                               f"{endpoint.name!r}, which is also used as an artifact",
                hint=f"use one pipeline input per role, or annotate {endpoint.name!r} as "
                     f"Param[...] or Input[...]", **at_step(node, key))
        elif port is not None and role is InputRole.PARAM:
            yield Diagnostic.of(
                BINDING_KIND_MISMATCH, f"input '{node.id}.{key}' is bound to pipeline input "
                               f"{endpoint.name!r}, which is a parameter",
                hint=f"annotate {endpoint.name!r} as Input[...] or give it no scalar default",
                **at_step(node, key))
    elif (isinstance(endpoint, FromLiteral) and port is not None
          and not isinstance(endpoint.value, str)):
        yield Diagnostic.of(
            BINDING_KIND_MISMATCH,
            f"input '{node.id}.{key}' is given the value {endpoint.value!r}; an "
            f"input takes an artifact or a data reference (a path or URI string)",
            hint="bind a step output or a pipeline input", **at_step(node, key))


def _step_reference(graph: Graph, node: StepNode, key: str, endpoint: FromStep
                    ) -> Iterator[Diagnostic]:
    producer = graph.steps[endpoint.node].component
    outputs = [p.name for p in producer.outputs]
    if not endpoint.port:
        yield Diagnostic.of(
            AMBIGUOUS_STEP_REFERENCE,
            f"'{node.id}.{key}' is given the whole step '{endpoint.node}', which "
            f"has {len(outputs)} outputs ({', '.join(outputs) or 'none'})",
            hint=f"pass one output, e.g. {endpoint.node}.{outputs[0]}" if outputs else
                 f"{producer.name!r} produces nothing to bind", **at_step(node, key))
    elif producer.output(endpoint.port) is None:
        close = difflib.get_close_matches(endpoint.port, outputs, n=1)
        hint = f"did you mean '{endpoint.node}.{close[0]}'? " if close else ""
        yield Diagnostic.of(
            UNKNOWN_OUTPUT, f"step '{endpoint.node}' has no output {endpoint.port!r}, bound "
                            f"to '{node.id}.{key}'",
            hint=f"{hint}its outputs are: {', '.join(outputs) or 'none'}",
            **at_edge(graph, str(endpoint), f"{node.id}.{key}", node))


@check(DANGLING_BINDING, UNKNOWN_OUTPUT)
def pipeline_outputs(graph: Graph) -> Iterator[Diagnostic]:
    for name, endpoint in graph.outputs.items():
        where = at_pipeline(graph)
        if isinstance(endpoint, Dangling):
            yield Diagnostic.of(
                DANGLING_BINDING,
                f"pipeline output {name!r} is bound to something that "
                f"does not exist: {endpoint.reason}",
                hint="return an existing step output", **where)
        elif isinstance(endpoint, FromStep) and endpoint.node in graph.steps:
            producer = graph.steps[endpoint.node].component
            if endpoint.port and producer.output(endpoint.port) is None:
                outputs = ", ".join(p.name for p in producer.outputs) or "none"
                yield Diagnostic.of(
                    UNKNOWN_OUTPUT, f"pipeline output {name!r} names '{endpoint}', but step "
                                    f"'{endpoint.node}' has no output {endpoint.port!r}",
                    hint=f"its outputs are: {outputs}", **where)


@check(OUTPUT_BOUND_TWICE_IN_STEP)
def same_output_twice(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        if (node.component.azure_only or "").startswith(REGISTERED_COMPONENT):
            # its ports are known only as the job binds them: whether two of them are meant
            # for one artifact (a metrics component's ground_truth and prediction, read from
            # one predictions file) is the registered component's to say, and unseen here
            continue
        by_source: dict[str, list[str]] = {}
        for key, endpoint in node.bindings.items():
            if (node.component.input(key) is not None
                    and isinstance(endpoint, (FromStep, FromInput))):
                by_source.setdefault(str(endpoint), []).append(key)
        for source, keys in by_source.items():
            if len(keys) > 1:
                ports = " and ".join(f"'{node.id}.{k}'" for k in keys)
                yield Diagnostic.of(
                    OUTPUT_BOUND_TWICE_IN_STEP, f"'{source}' is bound to both {ports}",
                    hint="bind each input to the artifact it is meant to read (e.g. training "
                         "and test data from different outputs); if one artifact really "
                         "serves both, merge the inputs into one",
                    **at_edge(graph, source, f"{node.id}.{keys[1]}", node))


@check(DUPLICATE_STEP_NAME)
def duplicate_names(graph: Graph) -> Iterator[Diagnostic]:
    for pipeline, qualified, steps in graph.duplicates:
        lines = ", ".join(str(s.location.line) for s in steps if s.location)
        last = steps[-1].location
        yield Diagnostic.of(
            DUPLICATE_STEP_NAME, f"{len(steps)} steps of pipeline {pipeline.name!r} are named "
                       f"{steps[0].name!r}" + (f" (lines {lines})" if lines else ""),
            hint="give each step its own name with .named(...)", step=qualified,
            file=last.file if last else None, line=last.line if last else None)


@check(UNUSED_STEP_OUTPUTS)
def unused_outputs(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        outs = node.component.outputs
        if "#" in node.id:
            # a second step with a taken name: MP106 reports it, references reach the first
            continue
        if outs and graph.links.out_degree(node.id) == 0:
            names = ", ".join(p.name for p in outs)
            yield Diagnostic.of(
                UNUSED_STEP_OUTPUTS, f"the outputs of step '{node.id}' ({names}) reach no step and "
                                f"no pipeline output",
                hint="return them from the pipeline, bind them to a step, or remove the step",
                **at_step(node))


@check(UNUSED_PIPELINE_INPUT)
def unused_inputs(graph: Graph) -> Iterator[Diagnostic]:
    for inp in graph.spec.inputs:
        if graph.links.out_degree(input_node(inp.name)) == 0:
            yield Diagnostic.of(
                UNUSED_PIPELINE_INPUT,
                f"pipeline input {inp.name!r} is bound to no step and no output",
                hint=f"pass {inp.name} to the step that needs it, or remove it",
                **at_pipeline(graph, inp.name))
