"""The inputs and outputs of an exported job: a pipeline input's kind and parameter, its entry
on the pipeline job and on a pipeline component, the value a node binds to a component input.

Plain dicts and strings from the specs; never decides what a pipeline may wire (the checks do).
"""
from __future__ import annotations

import json
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import vocabulary
from mlpipe.backends.azure.command import coerce_param
from mlpipe.errors import ExportError
from mlpipe.spec import (
    Binding,
    ComponentSpec,
    InputRole,
    Literal,
    ParamType,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    PortSpec,
    StepOutput,
    plain_value,
)


def _uses(spec: PipelineSpec, name: str):
    for step in spec.steps:
        for key, binding in step.bindings:
            if isinstance(binding, PipelineInput) and binding.name == name:
                target = step.target
                if isinstance(target, ComponentSpec):
                    yield target.input(key) or target.param(key)
                else:
                    yield target.input(key)


def _input_kind(spec: PipelineSpec, inp: PipelineInputSpec) -> AssetType:
    if inp.kind is not None:
        return inp.kind
    for use in _uses(spec, inp.name):
        if isinstance(use, PortSpec):
            return use.kind
        if isinstance(use, PipelineInputSpec) and use.role is InputRole.ARTIFACT:
            return _input_kind(spec, use) if use.kind is None else use.kind
    return AssetType.URI_FOLDER


def input_param(spec: PipelineSpec, inp: PipelineInputSpec):
    if inp.param is not None:
        return inp.param
    for use in _uses(spec, inp.name):
        if use is not None and not isinstance(use, (PortSpec, PipelineInputSpec)):
            return use
        if isinstance(use, PipelineInputSpec) and use.param is not None:
            return use.param
    return None


def _param_literal(value: Any) -> Any:
    value = plain_value(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def job_input(spec: PipelineSpec, inp: PipelineInputSpec, given: dict[str, Any]) -> Any:
    value = given.get(inp.name, inp.default)
    if inp.role is InputRole.ARTIFACT:
        entry: dict[str, Any] = {"type": _input_kind(spec, inp).value}
        if value is not None:
            entry["path"] = str(value)
        return entry
    param = input_param(spec, inp)
    if isinstance(value, str) and inp.name in given and param is not None:
        value = coerce_param(param, value)
    if value is None:
        if inp.required:
            raise ExportError(f"pipeline input {inp.name!r} of {spec.name!r} is a parameter "
                              f"with no value; an Azure ML pipeline job needs one",
                              hint=f"pass --input {inp.name}=VALUE (inputs={{{inp.name!r}: ...}}) "
                                   f"or give it a default")
        return None
    if param is not None and param.type is ParamType.ENUM:
        return str(plain_value(value))
    return _param_literal(value)


def declared_input(spec: PipelineSpec, inp: PipelineInputSpec) -> dict[str, Any] | None:
    if inp.role is InputRole.ARTIFACT:
        entry: dict[str, Any] = {"type": _input_kind(spec, inp).value}
        if not inp.required:
            entry["optional"] = True
        return entry
    param = input_param(spec, inp)
    if param is None:
        entry = {"type": "string"}
    else:
        entry = vocabulary.param_input(param)
        entry.pop("default", None)
        entry.pop("optional", None)
    if inp.required:
        return entry
    if inp.default is None:
        entry["optional"] = True
    else:
        entry["default"] = _param_literal(inp.default) if param is None or \
            param.type is not ParamType.ENUM else str(plain_value(inp.default))
    return entry


def output_kind(spec: PipelineSpec, binding: Binding) -> AssetType:
    if isinstance(binding, StepOutput):
        step = spec.step(binding.step)
        if step is not None:
            if isinstance(step.target, ComponentSpec):
                port = step.target.output(binding.port)
                if port is not None:
                    return port.kind
            else:
                inner = step.target.output(binding.port)
                if inner is not None:
                    return output_kind(step.target, inner)
    return AssetType.URI_FOLDER


def node_input(target: ComponentSpec | PipelineSpec, key: str, binding: Binding,
                declared: set[str]) -> Any:
    if isinstance(binding, PipelineInput):
        if binding.name not in declared:
            return None  # an optional pipeline parameter left without a value
        return f"${{{{parent.inputs.{binding.name}}}}}"
    if isinstance(binding, StepOutput):
        return f"${{{{parent.jobs.{binding.step}.outputs.{binding.port}}}}}"
    assert isinstance(binding, Literal)
    if binding.value is None:
        return None
    port = target.input(key)
    if isinstance(port, PortSpec):
        return {"type": port.kind.value, "path": str(binding.value)}
    if isinstance(port, PipelineInputSpec) and port.role is InputRole.ARTIFACT:
        return {"type": (port.kind or AssetType.URI_FOLDER).value, "path": str(binding.value)}
    param = target.param(key) if isinstance(target, ComponentSpec) else None
    if param is not None and param.type is ParamType.ENUM:
        return str(plain_value(binding.value))
    return _param_literal(binding.value)
