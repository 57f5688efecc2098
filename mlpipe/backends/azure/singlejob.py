"""A single command job (``type: command`` at the top of the file, such as a one-step
distributed training job) as a one-step pipeline: every check applies to it, it runs here
(under the local launcher when it is distributed) and it exports back as the job it was.

Each input of the job becomes an input of the pipeline with the job's value as its default,
so ``--input NAME=PATH`` and ``--param NAME=VALUE`` override it by the job's own names; each
output becomes a pipeline output. Never imports azure-ai-ml.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import nodes, vocabulary
from mlpipe.backends.azure.component_yaml import (
    Problems,
    Where,
    named_entries,
    read_command_component,
    read_resources,
)
from mlpipe.digests import script_code_digest
from mlpipe.paths import lexical
from mlpipe.spec import (
    Compute,
    InputRole,
    Location,
    Origin,
    ParamSpec,
    ParamType,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    PortSpec,
    StepOutput,
    StepSpec,
)


def single_job_pipeline(doc: Any, path: Path, problems: Problems) -> PipelineSpec:
    """The one-step pipeline of the command job ``doc`` read from ``path``.

    Problems (a missing command, an input type Azure ML does not have) are added to
    ``problems``; the caller raises them.
    """
    where = Where(str(path))
    base = str(lexical(path).parent)
    name = _name(doc.get("name") or path.stem)
    declared = named_entries(where, problems, doc, "inputs", "inputs", "input")
    command = doc.get("command") if isinstance(doc.get("command"), str) else ""
    optional = nodes.optional_names(command)
    ports: list[PortSpec] = []
    params: list[ParamSpec] = []
    inputs: list[PipelineInputSpec] = []
    for key in declared:
        entry = declared[key]
        loc = where.location(declared, key)
        kind = entry.get("type") if isinstance(entry, dict) else None
        value = entry.get("path", entry.get("value")) if isinstance(entry, dict) else entry
        if kind in vocabulary.ASSET_TYPES or (kind is None and isinstance(entry, dict)
                                               and "path" in entry):
            asset = vocabulary.ASSET_TYPES.get(kind) if kind is not None else None
            port = PortSpec(key, asset or vocabulary.ASSET_TYPES["uri_folder"],
                            optional=key in optional)
            ports.append(port)
            inputs.append(PipelineInputSpec(key, InputRole.ARTIFACT, required=value is None,
                                            default=value, kind=asset, port=port, location=loc,
                                            base=base))
            continue
        if kind is not None and kind not in vocabulary.AZURE_PARAM_TYPES:
            problems.add(where, declared, key, f"has type {kind!r}, which is not an Azure ML "
                         f"input type", field=f"inputs.{key}.type")
            continue
        ptype = (vocabulary.AZURE_PARAM_TYPES[kind] if kind is not None
                 else vocabulary.LITERAL_PARAM_TYPES.get(type(value), ParamType.STR))
        try:
            value = vocabulary.azure_value(ptype, value)
        except ValueError as exc:
            problems.add(where, declared, key, str(exc), field=f"inputs.{key}")
            continue
        param = ParamSpec(key, ptype, required=value is None, default=value)
        params.append(dataclasses.replace(param, required=True, default=None))
        inputs.append(PipelineInputSpec(key, InputRole.PARAM, required=value is None,
                                        default=value, param=param, location=loc))
    outputs = []
    declared_outputs = named_entries(where, problems, doc, "outputs", "outputs", "output")
    for key in declared_outputs:
        entry = declared_outputs[key]
        kind = entry.get("type") if isinstance(entry, dict) else None
        outputs.append(PortSpec(key, (vocabulary.ASSET_TYPES.get(kind) if kind is not None
                                      else None) or
                                vocabulary.ASSET_TYPES["uri_folder"]))
    component_doc = {k: v for k, v in doc.items() if k in (
        "command", "code", "environment", "distribution", "resources", "is_deterministic",
        "display_name", "description", "tags", "environment_variables")}
    component = read_command_component(component_doc, path, name=name, problems=problems,
                                       keep_origin=False, job=True)
    compute = vocabulary.parse_compute(doc.get("compute"))
    _, sku = read_resources(where, problems, doc, "resources")
    if compute is not None or sku is not None:
        compute = Compute(compute.name if compute else None, sku)
    component = dataclasses.replace(
        component, inputs=tuple(ports), outputs=tuple(outputs), params=tuple(params),
        compute=compute, code_digest=script_code_digest(doc.get("code"), command,
                                                        lexical(path).parent),
        location=where.location(doc, "command" if "command" in doc else "type"))
    step = StepSpec(name, component,
                    tuple((i.name, PipelineInput(i.name)) for i in inputs),
                    where.location(doc, "command" if "command" in doc else "type"),
                    explicit_name=True)
    return PipelineSpec(
        name=str(doc.get("display_name") or doc.get("name") or path.stem), inputs=tuple(inputs),
        steps=(step,), outputs=tuple((p.name, StepOutput(name, p.name)) for p in outputs),
        description=doc.get("description"), location=Location(where.file, 1),
        function=str(path), origin=Origin.of(str(lexical(path)), doc))


def _name(text: Any) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in str(text).lower())
    return cleaned if cleaned[:1].isalpha() else f"job_{cleaned}"


__all__ = ["single_job_pipeline"]
