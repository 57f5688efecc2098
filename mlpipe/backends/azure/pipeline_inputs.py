"""A pipeline job's declared inputs read from YAML: a data input (typed, or a bare path whose
type Azure ML takes from what it names), a typed parameter, or a bare value.

Builds spec values and records what it cannot read in ``Problems``; never judges.
"""
from __future__ import annotations

from typing import Any

from mlpipe.backends.azure import vocabulary
from mlpipe.backends.azure.component_yaml import Problems, Where, read_param, read_port
from mlpipe.spec import InputRole, Location, PipelineInputSpec


def read_pipeline_input(where: Where, problems: Problems, doc: Any, name: str,
                        base: str) -> PipelineInputSpec | None:
    """Pipeline input ``name`` of ``doc`` (its ``inputs``), or None where ``problems`` says
    why it cannot be read; data paths are relative to the folder ``base``."""
    value = doc[name]
    loc = where.location(doc, name)
    if isinstance(value, dict):
        kind = value.get("type")
        if kind is None and "value" in value:
            return _value_input(name, value["value"], loc)
        if kind is None and "path" in value:
            # a path without a type: Azure ML takes the type from what it names
            return PipelineInputSpec(name, InputRole.ARTIFACT, required=False,
                                     default=value["path"], location=loc, base=base)
        if kind in vocabulary.ASSET_TYPES:
            path = value.get("path")
            port = read_port(where, problems, {name: {"type": kind, **{
                k: v for k, v in value.items() if k in ("optional", "description")}}},
                name, f"inputs.{name}")
            optional = port is not None and port.optional
            return PipelineInputSpec(name, InputRole.ARTIFACT, required=path is None and
                                     not optional, default=path,
                                     kind=vocabulary.ASSET_TYPES[kind], port=port,
                                     location=loc, base=base)
        if kind in vocabulary.AZURE_PARAM_TYPES:
            entry = {k: v for k, v in value.items() if k != "value"}
            if "value" in value and "default" not in entry:
                entry["default"] = value["value"]
            param = read_param(where, problems, {name: entry}, name, f"inputs.{name}")
            if param is None:
                return None
            return PipelineInputSpec(name, InputRole.PARAM, required=param.required,
                                     default=param.default, param=param, location=loc)
        known = ", ".join([*vocabulary.ASSET_TYPES, *vocabulary.AZURE_PARAM_TYPES])
        problems.add(where, doc, name, f"has type {kind!r}, which is not an Azure ML "
                     f"input type", hint=f"use one of {known}", field=f"inputs.{name}.type")
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return _value_input(name, value, loc)
    problems.add(where, doc, name, f"is {value!r}; a pipeline input is a value or a "
                 f"mapping with a type or path", field=f"inputs.{name}")
    return None


def _value_input(name: str, value: Any, loc: Location) -> PipelineInputSpec:
    """A pipeline job's input given as a value: it declares no type; Azure ML passes the value
    and each consumer reads it as its own type."""
    return PipelineInputSpec(name, InputRole.PARAM, required=False, default=value,
                             location=loc, yaml=True)
