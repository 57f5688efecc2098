"""Parameter checks (MP2xx): wrong type, out of range, not in choices, missing value."""
from __future__ import annotations

from collections.abc import Iterator

from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.codes import (
    PARAM_NOT_IN_CHOICES,
    PARAM_OUT_OF_RANGE,
    PARAM_TYPE_MISMATCH,
    REQUIRED_PARAM_MISSING,
    VALUE_CHANGED_BY_AZURE,
)
from mlpipe.diagnostics import Diagnostic
from mlpipe.errors import with_article
from mlpipe.graph import FromInput, FromLiteral, Graph, StepNode, Unbound
from mlpipe.params import check_value, describe_constraint, read_as_azure
from mlpipe.spec import InputRole, ParamSpec, ParamType

_BY_KIND = {"type": PARAM_TYPE_MISMATCH, "range": PARAM_OUT_OF_RANGE,
            "choices": PARAM_NOT_IN_CHOICES}


def _hint(param: ParamSpec, kind: str) -> str:
    if kind == "type":
        return f"pass {with_article(param.type.value)}"
    return f"pass a value {describe_constraint(param)}"


@check(PARAM_TYPE_MISMATCH, PARAM_OUT_OF_RANGE, PARAM_NOT_IN_CHOICES, REQUIRED_PARAM_MISSING,
       VALUE_CHANGED_BY_AZURE)
def parameter_values(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        for param in node.component.params:
            yield from _one(graph, node, param)


def _one(graph: Graph, node: StepNode, param: ParamSpec) -> Iterator[Diagnostic]:
    endpoint = node.bindings.get(param.name)
    label = f"'{node.id}.{param.name}'"
    if endpoint is None or isinstance(endpoint, Unbound):
        if param.required:
            why = f" ({endpoint.reason})" if isinstance(endpoint, Unbound) else ""
            yield Diagnostic.of(
                REQUIRED_PARAM_MISSING,
                f"parameter {label} ({param.type.value}) has no value "
                f"and no default{why}",
                hint=f"pass {param.name}=... when calling "
                     f"{node.component.name}, or give it a default",
                **at_step(node, param.name))
        return
    if isinstance(endpoint, FromLiteral):
        if endpoint.value is None and not param.required and param.default is None:
            return
        value = endpoint.value
        if endpoint.yaml:
            value, changed = read_as_azure(param, value)
            if changed:
                yield _changed(node, param, endpoint.value, value, "")
        problem = check_value(param, value)
        if problem is not None:
            yield Diagnostic.of(_BY_KIND[problem.kind], f"parameter {label}: {problem.message}",
                                hint=_hint(param, problem.kind), **at_step(node, param.name))
        return
    if isinstance(endpoint, FromInput):
        source = graph.input(endpoint.name)
        assert source is not None  # compiling makes a FromInput only of a declared input
        if source.role is not InputRole.PARAM:
            return  # an artifact bound to a parameter is MP110's finding
        declared = source.param
        if declared is not None and ParamType.SECRET in (declared.type, param.type):
            return  # a secret meeting a parameter that is not one is MP962's finding
        if declared is not None and declared.type is not param.type and not (
                declared.type is ParamType.INT and param.type is ParamType.FLOAT):
            yield Diagnostic.of(
                PARAM_TYPE_MISMATCH,
                f"parameter {label} ({param.type.value}) is bound to "
                f"pipeline parameter {endpoint.name!r} "
                f"({declared.type.value})",
                hint=f"declare {endpoint.name!r} as Param[{param.type.value}]",
                **at_step(node, param.name))
            return
        if not source.required and source.default is not None:
            value = source.default
            if source.yaml:
                value, changed = read_as_azure(param, value)
                if changed:
                    yield _changed(node, param, source.default, value,
                                   f" from pipeline input {endpoint.name!r}")
            problem = check_value(param, value)
            if problem is not None:
                yield Diagnostic.of(
                    _BY_KIND[problem.kind], f"parameter {label} gets the default of pipeline "
                                            f"parameter {endpoint.name!r}: {problem.message}",
                    hint=_hint(param, problem.kind), **at_step(node, param.name))


def _changed(node: StepNode, param: ParamSpec, given: object, read: object,
             source: str) -> Diagnostic:
    return Diagnostic.of(
        VALUE_CHANGED_BY_AZURE,
        f"parameter '{node.id}.{param.name}' ({param.type.value}) gets {given!r}{source}, "
        f"which Azure ML reads as {read!r}",
        hint=f"give {with_article(param.type.value)} ({read!r}) if that is what you mean",
        **at_step(node, param.name))
