"""What a job's inputs and outputs bind to, read from YAML: a parent input, a sibling's output,
or a literal as Azure ML reads it; and the kinds of the ports a job binds to a sibling's output,
settled once every sibling is read.

Builds spec values; an expression it cannot follow is a diagnostic (MP601), never a judgement.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import nodes, vocabulary, yamlfile
from mlpipe.backends.azure.component_yaml import Where
from mlpipe.codes import UNREADABLE_BINDING_EXPRESSION
from mlpipe.diagnostics import Diagnostic
from mlpipe.spec import (
    Binding,
    ComponentSpec,
    InputRole,
    Literal,
    PipelineInput,
    PipelineSpec,
    PortSpec,
    StepOutput,
    StepSpec,
)

#: The key under which a control-flow node waits for its body's outputs.
BODY = "$body"


def input_binding(diagnostics: list[Diagnostic], where: Where, doc: Any, key: str,
                  given: nodes.Given, field: str, target: ComponentSpec | PipelineSpec,
                  base: str) -> Binding | None:
    """What a job's input ``key`` binds to: a parent input, a sibling's output or a literal
    (None for an input that states only its type or mode); an expression of another form is
    MP601 in ``diagnostics``."""
    value = given.value
    if isinstance(given.raw, dict) and "path" not in given.raw and "value" not in given.raw:
        return None  # a type or mode only: the job states the port, it binds nothing
    if value is None:
        return None
    body = nodes.expression(value)
    if body is None:
        return literal(given, target, base)
    m = nodes.PARENT_INPUT.match(body)
    if m:
        return PipelineInput(m["name"])
    m = nodes.SIBLING_OUTPUT.match(body)
    if m:
        return StepOutput(m["job"], m["port"])
    bad_expression(diagnostics, where, doc, key, field, value,
                   "an input binds to ${{parent.inputs.NAME}} or "
                   "${{parent.jobs.JOB.outputs.NAME}}")
    return None

def literal(given: nodes.Given, target: ComponentSpec | PipelineSpec,
            base: str) -> Literal:
    """A literal as Azure ML reads it: a data path keeps the folder it is relative to; a
    parameter's text in the form Azure ML parses (``"false"`` for a boolean)."""
    value = given.value
    if isinstance(target, ComponentSpec):
        param = target.param(given.key)
        if param is not None and given.declared not in vocabulary.ASSET_TYPES:
            return Literal(value, yaml=True)  # the checks read it as Azure ML does
        port = target.input(given.key)
    else:
        declared = target.input(given.key)
        port = declared if declared is not None and declared.role is InputRole.ARTIFACT \
            else None
    if port is not None or given.declared in vocabulary.ASSET_TYPES:
        return Literal(value, base=base)
    return Literal(value, yaml=True)

def bad_expression(diagnostics: list[Diagnostic], where: Where, doc: Any, key: str, field: str,
                   value: Any, rule: str) -> None:
    """MP601: a binding expression mlpipe cannot follow, with the forms it can."""
    diagnostics.append(Diagnostic.of(
        UNREADABLE_BINDING_EXPRESSION,
        f"{field} is {value!r}, which mlpipe cannot follow: {rule}",
        hint="write the binding in one of those forms", step=field.split(".")[1],
        port=key, file=where.file, line=doc.line_of(key) if isinstance(
            doc, yamlfile.Mapping) else None))


def output_bindings(diagnostics: list[Diagnostic], where: Where, node: Any, name: str,
                    field: str, produced: dict[str, StepOutput]) -> None:
    """Each pipeline output job ``name`` binds (``${{parent.outputs.NAME}}``) into
    ``produced``; an output expression of another form is MP601 in ``diagnostics``."""
    for key in node.get("outputs") or {}:
        value = _binding_value(node["outputs"][key])
        body = nodes.expression(value)
        if body is None:
            continue
        m = nodes.PARENT_OUTPUT.match(body)
        if m is None:
            bad_expression(diagnostics, where, node["outputs"], key, f"{field}.outputs.{key}",
                           value, "an output binds only to ${{parent.outputs.NAME}}")
            continue
        produced[m["name"]] = StepOutput(name, key)


def _binding_value(value: Any) -> Any:
    if isinstance(value, dict):
        return value.get("path", value.get("value"))
    return value


def settle_sibling_kinds(steps: dict[str, StepSpec],
                         pending: dict[str, dict[str, tuple[str, str]]]) -> None:
    """Give each implied port bound to a sibling's output that output's kind (the sibling may
    come later in the YAML than the job that reads it)."""
    for name, ports in pending.items():
        step = steps.get(name)
        if step is None or not isinstance(step.target, ComponentSpec):
            continue
        comp = step.target
        kinds = {}
        outputs = list(comp.outputs)
        for key, (job, port) in ports.items():
            if key == BODY:
                body = steps.get(job)
                have = {p.name for p in outputs}
                if body is not None:
                    outputs += [p for p in _outputs_of(body) if p.name not in have]
                continue
            kind = _output_kind(steps.get(job), port)
            if kind is not None:
                kinds[key] = kind
        new_inputs = tuple(dataclasses.replace(p, kind=kinds[p.name]) if p.name in kinds
                           else p for p in comp.inputs)
        steps[name] = dataclasses.replace(step, target=dataclasses.replace(
            comp, inputs=new_inputs, outputs=tuple(outputs)))


def _outputs_of(step: StepSpec) -> tuple[PortSpec, ...]:
    target = step.target
    if isinstance(target, ComponentSpec):
        return target.outputs
    return tuple(PortSpec(name, _output_kind(step, name) or AssetType.URI_FOLDER)
                 for name, _ in target.outputs)


def _output_kind(step: StepSpec | None, port: str) -> AssetType | None:
    if step is None:
        return None
    target = step.target
    if isinstance(target, ComponentSpec):
        found = target.output(port)
        return None if found is None else found.kind
    binding = target.output(port)
    if isinstance(binding, StepOutput):
        return _output_kind(target.step(binding.step), binding.port)
    return None
