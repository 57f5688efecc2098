"""Contract checks (MP4xx): on every edge, the producer's contract must satisfy the consumer's.

Pure: graph in, diagnostics out. The rules live with the contract types
(``mlpipe.contracts.compatibility``); this module only places and names them.
"""
from __future__ import annotations

from collections.abc import Iterator

from mlpipe import codes
from mlpipe.artifacts import can_connect
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_edge
from mlpipe.contracts import compatibility, contract_label
from mlpipe.diagnostics import Code, Diagnostic
from mlpipe.graph import FromInput, FromStep, Graph, StepNode
from mlpipe.spec import PortSpec

#: The codes of this family by name: a compatibility rule names its difference's kind.
_BY_NAME: dict[str, Code] = {c.name: c for c in (
    codes.CONTRACT_KIND_MISMATCH,
    codes.CONTRACT_VERSION_INCOMPATIBLE,
    codes.SCHEMA_COLUMN_MISSING,
    codes.SCHEMA_DTYPE_MISMATCH,
    codes.SCHEMA_UNIT_MISMATCH,
    codes.SCHEMA_NULLABILITY_MISMATCH,
    codes.FEATURE_ORDER_MISMATCH,
    codes.LABEL_ENCODING_MISMATCH,
    codes.SPLIT_DISJOINTNESS_NOT_PROMISED,
    codes.SPLIT_MISSING,
    codes.METRIC_SCOPE_MISMATCH,
    codes.CONTRACT_REQUIREMENT_UNMET,
    codes.CONTRACT_UNVERIFIED,
)}


def _edges(graph: Graph) -> Iterator[tuple[StepNode, str, PortSpec, str, PortSpec]]:
    """(consumer node, consumer key, consumer port, source label, producer port) per edge."""
    for node in graph.step_nodes():
        for key, endpoint in node.bindings.items():
            consumer = node.component.input(key)
            if consumer is None or consumer.contract is None:
                continue
            producer: PortSpec | None = None
            if isinstance(endpoint, FromStep) and endpoint.node in graph.steps:
                producer = graph.steps[endpoint.node].component.output(endpoint.port)
            elif isinstance(endpoint, FromInput):
                declared = graph.input(endpoint.name)
                producer = declared.port if declared is not None else None
                if producer is None or producer.contract is None:
                    continue  # data given at submission: validated when the run starts
            else:
                continue
            if producer is not None:
                yield node, key, consumer, str(endpoint), producer


@check(*_BY_NAME.values())
def contract_edges(graph: Graph) -> Iterator[Diagnostic]:
    for node, key, consumer, source, producer in _edges(graph):
        edge = f"{source} -> {node.id}.{key}"
        where = at_edge(graph, source, f"{node.id}.{key}", node)
        if not can_connect(producer.kind, consumer.kind):
            continue  # MP301 already reports this edge
        if producer.contract is None:
            yield Diagnostic.of(
                codes.CONTRACT_UNVERIFIED,
                f"{edge}: {contract_label(consumer.contract)} is required but '{source}' "
                f"declares no contract ({producer.kind})",
                hint=f"annotate '{source}' as Output[...] with the contract it produces",
                **where)
            continue
        try:
            differences = compatibility(producer.contract, consumer.contract)
        except Exception as exc:  # a user-defined rule that raises spoils one edge, not all
            yield Diagnostic.of(
                codes.CHECK_CRASHED, f"{edge}: the compatibility rule of "
                f"{contract_label(consumer.contract)} raised {type(exc).__name__}: {exc}",
                hint="fix the contract type's differences() method", **where)
            continue
        for diff in differences:
            code = _BY_NAME.get(diff.kind, codes.CONTRACT_REQUIREMENT_UNMET)
            yield Diagnostic.of(code, f"{edge}: {diff.message}", hint=diff.hint, **where)
