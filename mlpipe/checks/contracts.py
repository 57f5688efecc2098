"""Contract checks (MP4xx): on every edge, the producer's contract must satisfy the consumer's.

Pure: graph in, diagnostics out. The rules live with the contract types
(``mlpipe.contracts.compatibility``); this module only places and names them.
"""
from __future__ import annotations

import os
import traceback
from collections.abc import Iterator

from mlpipe import codes
from mlpipe.artifacts import can_connect
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_edge, at_step
from mlpipe.contracts import compatibility, contract_label
from mlpipe.contracts.base import Contract, missing_requirements
from mlpipe.diagnostics import Code, Diagnostic
from mlpipe.graph import FromInput, FromStep, Graph, StepNode
from mlpipe.paths import display_path
from mlpipe.spec import PortSpec

_MLPIPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
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


def _edges(graph: Graph) -> Iterator[tuple[StepNode, str, PortSpec, Contract | type[Contract],
                                           str, PortSpec]]:
    """(consumer node, consumer key, consumer port, its contract, source label, producer port)
    per edge whose consumer declares a contract."""
    for node in graph.step_nodes():
        for key, endpoint in node.bindings.items():
            consumer = node.component.input(key)
            if consumer is None or consumer.contract is None:
                continue
            required = consumer.contract
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
                yield node, key, consumer, required, str(endpoint), producer


@check(*_BY_NAME.values())
def contract_edges(graph: Graph) -> Iterator[Diagnostic]:
    for node, key, consumer, required, source, producer in _edges(graph):
        edge = f"{source} -> {node.id}.{key}"
        where = at_edge(graph, source, f"{node.id}.{key}", node)
        if not can_connect(producer.kind, consumer.kind):
            continue  # MP301 already reports this edge
        if producer.contract is None:
            yield Diagnostic.of(
                codes.CONTRACT_UNVERIFIED,
                f"{edge}: {contract_label(required)} is required but '{source}' "
                f"declares no contract ({producer.kind})",
                hint=f"annotate '{source}' as Output[...] with the contract it produces",
                **where)
            continue
        try:
            differences = compatibility(producer.contract, required)
        except Exception as exc:  # a rule that raises spoils one edge, not all
            yield Diagnostic.of(
                codes.CHECK_CRASHED, f"{edge}: the compatibility rule of "
                f"{contract_label(required)} raised {type(exc).__name__}: {exc}",
                hint=_crash_hint(producer.contract, exc), **where)
            continue
        for diff in differences:
            code = _BY_NAME.get(diff.kind, codes.CONTRACT_REQUIREMENT_UNMET)
            yield Diagnostic.of(code, f"{edge}: {diff.message}", hint=diff.hint, **where)


def _crash_hint(contract: object, exc: BaseException) -> str:
    """Who must fix a compatibility rule that raised: mlpipe when its own code raised (the
    user's pipeline is not at fault), else the author of the user-defined contract type."""
    cls = contract if isinstance(contract, type) else type(contract)
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    where = f" (at {display_path(last.filename)}:{last.lineno})" if last else ""
    in_mlpipe = last is not None and os.path.abspath(last.filename).startswith(_MLPIPE_DIR)
    if in_mlpipe or (last is None and cls.__module__.startswith("mlpipe.")):
        return (f"this is a bug in mlpipe{where}, not in the pipeline; report it with the "
                f"contracts of this edge")
    return (f"fix the differences() method of the contract type {cls.__qualname__} "
            f"(module {cls.__module__}){where}")


@check(codes.CONTRACT_EXTRA_MISSING)
def contract_requirements(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        reported: set[str] = set()
        for port in (*node.component.inputs, *node.component.outputs):
            if port.contract is None:
                continue
            for module, install in missing_requirements(port.contract):
                if module in reported:
                    continue
                reported.add(module)
                yield Diagnostic.of(
                    codes.CONTRACT_EXTRA_MISSING,
                    f"'{node.id}.{port.name}' is a {contract_label(port.contract)}, whose "
                    f"validation needs {module}, which is not installed here: a local run "
                    f"fails when it validates this artifact",
                    hint=f"{install} (and install it in the step's environment)",
                    **at_step(node, port.name))
