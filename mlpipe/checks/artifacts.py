"""Artifact type checks (MP3xx): producer and consumer kinds that cannot connect."""
from __future__ import annotations

from collections.abc import Iterator

from mlpipe.artifacts import CONNECTS, AssetType, can_connect
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_edge, at_pipeline
from mlpipe.codes import ARTIFACT_KIND_MISMATCH, PIPELINE_INPUT_KIND_CONFLICT
from mlpipe.diagnostics import Diagnostic, Severity
from mlpipe.graph import FromInput, FromStep, Graph
from mlpipe.spec import InputRole


def _feeds(kind: AssetType) -> str:
    return ", ".join(sorted(k.value for k in CONNECTS[kind]))


@check(ARTIFACT_KIND_MISMATCH)
def artifact_kinds(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        for key, endpoint in node.bindings.items():
            consumer = node.component.input(key)
            if consumer is None or not isinstance(endpoint, FromStep):
                continue
            producer_node = graph.steps.get(endpoint.node)
            producer = producer_node.component.output(endpoint.port) if producer_node else None
            if producer is None or can_connect(producer.kind, consumer.kind):
                continue
            yield Diagnostic.of(
                ARTIFACT_KIND_MISMATCH,
                f"'{node.id}.{key}' expects {consumer.kind} but '{endpoint}' produces "
                f"{producer.kind}",
                hint=f"a {producer.kind} output can feed {_feeds(producer.kind)} inputs; change "
                     f"the kind of one of the two ports, or add a step that converts it",
                **at_edge(graph, str(endpoint), f"{node.id}.{key}", node))


@check(PIPELINE_INPUT_KIND_CONFLICT)
def pipeline_input_kinds(graph: Graph) -> Iterator[Diagnostic]:
    for inp in graph.spec.inputs:
        if inp.role is not InputRole.ARTIFACT:
            continue
        consumers: list[tuple[str, AssetType]] = []
        for node in graph.step_nodes():
            for key, endpoint in node.bindings.items():
                port = node.component.input(key)
                if (port is not None and isinstance(endpoint, FromInput)
                        and endpoint.name == inp.name):
                    consumers.append((f"{node.id}.{key}", port.kind))
        kinds = {kind for _, kind in consumers}
        if inp.port is not None:
            bad = [(c, k) for c, k in consumers if not can_connect(inp.port.kind, k)]
            if bad:
                where = ", ".join(f"'{c}' ({k})" for c, k in bad)
                # Azure ML hands each step the input's value as the step's port declares it
                # (a uri_file input to a uri_folder port runs: azure-ai-ml's own
                # pipeline_with_data test does): right to point out, not a failed run
                yield Diagnostic.of(
                    PIPELINE_INPUT_KIND_CONFLICT,
                    f"pipeline input {inp.name!r} is declared {inp.port.kind} but "
                    f"feeds {where}",
                    hint=f"a {inp.port.kind} artifact can feed {_feeds(inp.port.kind)} inputs; "
                         f"declare the input as the step reads it",
                    severity=Severity.WARNING, **at_pipeline(graph, inp.name))
        elif len(kinds) > 1 and not any(all(can_connect(k, c) for c in kinds) for k in AssetType):
            where = ", ".join(f"'{c}' ({k})" for c, k in consumers)
            yield Diagnostic.of(
                PIPELINE_INPUT_KIND_CONFLICT,
                f"pipeline input {inp.name!r} feeds inputs of different kinds: "
                f"{where}",
                hint="split it into one pipeline input per kind, or align the ports' kinds",
                **at_pipeline(graph, inp.name))
