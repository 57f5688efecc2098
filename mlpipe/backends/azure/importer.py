"""Import: an Azure ML pipeline job YAML (CLI v2) becomes a PipelineSpec built from spec classes.

The spec may be wrong (cycles, dangling bindings, wrong port names): that is for the checks to
report. The importer reports only what is YAML-specific (MP6xx diagnostics) and raises
LoadError for what it cannot represent (unsupported node types, registered components).
Never imports azure-ai-ml.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import vocabulary, yamlfile
from mlpipe.backends.azure.component_yaml import (
    Where,
    read_command_component,
    read_param,
    read_port,
    read_resources,
)
from mlpipe.codes import PIPELINE_OUTPUT_NOT_PRODUCED, UNREADABLE_BINDING_EXPRESSION
from mlpipe.diagnostics import Diagnostic
from mlpipe.digests import script_code_digest
from mlpipe.spec import (
    Binding,
    ComponentSpec,
    Compute,
    InputRole,
    Literal,
    Location,
    ParamSpec,
    ParamType,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    PortSpec,
    StepOutput,
    StepSpec,
)

UNSUPPORTED_NODES = ("automl", "sweep", "spark", "parallel", "import", "data_transfer")
_EXPR = re.compile(r"^\$\{\{\s*(?P<body>[^}]*?)\s*\}\}$")
_PARENT_INPUT = re.compile(r"^parent\.inputs\.(?P<name>[A-Za-z_][\w]*)$")
_SIBLING_OUTPUT = re.compile(
    r"^parent\.jobs\.(?P<job>[A-Za-z_][\w]*)\.outputs\.(?P<port>[A-Za-z_][\w]*)$")
_PARENT_OUTPUT = re.compile(r"^parent\.outputs\.(?P<name>[A-Za-z_][\w]*)$")
_COMMAND_REF = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z_]\w*)\s*\}\}")
_NODE_FIELDS = {"type", "component", "compute", "inputs", "outputs", "environment_variables",
                "resources", "distribution", "display_name", "description", "tags", "name",
                "command", "code", "environment", "is_deterministic", "$schema"}
_PY_PARAM = {bool: ParamType.BOOL, int: ParamType.INT, float: ParamType.FLOAT, str: ParamType.STR}


@dataclass(slots=True)
class ImportedPipeline:
    """A pipeline read from YAML: its spec and the YAML-specific diagnostics (MP6xx)."""

    spec: PipelineSpec
    diagnostics: list[Diagnostic] = field(default_factory=list)


def load_pipeline_yaml(path: str) -> ImportedPipeline:
    """The PipelineSpec of an Azure ML pipeline job (or pipeline component) YAML file.

    Args:
        path: a ``pipeline.yml`` in the CLI v2 format; component references are read
            relative to it.

    Returns:
        The spec and the YAML-specific diagnostics; run ``check_pipeline`` for the rest.

    Raises:
        LoadError: unreadable YAML, a node type mlpipe cannot run (naming node and type), a
            registered component reference, or a field mlpipe cannot represent.

    Example:
        >>> imported = load_pipeline_yaml("build/pipeline.yml")
        >>> graph, diagnostics = check_pipeline(imported.spec)
    """
    diagnostics: list[Diagnostic] = []
    reader = _Reader(diagnostics)
    spec = reader.pipeline(Path(path), stack=())
    return ImportedPipeline(spec, diagnostics)


def _expression(value: Any) -> str | None:
    if isinstance(value, str):
        m = _EXPR.match(value.strip())
        if m:
            return m["body"]
        if "${{" in value:
            return value
    return None


class _Reader:
    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        self.components: dict[Path, ComponentSpec | PipelineSpec] = {}

    def pipeline(self, path: Path, stack: tuple[Path, ...]) -> PipelineSpec:
        doc = yamlfile.load(path, "an Azure ML pipeline job YAML")
        where = Where(str(path))
        kind = doc.get("type", "pipeline" if "jobs" in doc else None)
        if kind != "pipeline" or not isinstance(doc.get("jobs"), dict):
            raise where.fail(doc, "type" if "type" in doc else "jobs",
                             f"{where.file} is not a pipeline job (type: {kind!r}, "
                             f"{'no' if 'jobs' not in doc else 'malformed'} jobs)",
                             hint="give a pipeline job YAML with type: pipeline and jobs:, or a "
                                  "Python file with a @pipeline")
        settings = doc.get("settings") or {}
        default_compute = vocabulary.parse_compute(settings.get("default_compute"))
        declared_inputs = doc.get("inputs") or {}
        inputs = tuple(self.pipeline_input(where, declared_inputs, n) for n in declared_inputs)
        kinds = {i.name: i for i in inputs}
        declared_outputs = doc.get("outputs") or {}
        outputs: dict[str, Binding] = {}
        output_types: dict[str, AssetType] = {}
        for name in declared_outputs:
            entry = declared_outputs[name]
            if isinstance(entry, dict) and entry.get("type") in vocabulary.ASSET_TYPES:
                output_types[name] = vocabulary.ASSET_TYPES[entry["type"]]
        jobs = doc["jobs"]
        steps = []
        produced: dict[str, StepOutput] = {}
        for name in jobs:
            steps.append(self.step(where, jobs, name, path, stack, default_compute, kinds,
                                   output_types, produced))
        for name in declared_outputs:
            if name in produced:
                outputs[name] = produced.pop(name)
            else:
                self.diagnostics.append(Diagnostic.of(
                    PIPELINE_OUTPUT_NOT_PRODUCED,
                    f"pipeline output {name!r} is declared but no job "
                    f"binds an output to ${{{{parent.outputs.{name}}}}}",
                    hint=f"add outputs: {{PORT: ${{{{parent.outputs.{name}}}}}}} to the job "
                         f"that produces it, or remove the output",
                    file=where.file, line=declared_outputs.line_of(name)))
        outputs.update(produced)
        return PipelineSpec(
            name=str(doc.get("display_name") or doc.get("name") or path.stem),
            inputs=inputs, steps=tuple(steps), outputs=tuple(outputs.items()),
            version=None if doc.get("version") is None else str(doc["version"]),
            description=doc.get("description"), location=Location(where.file, 1),
            function=str(path))

    def pipeline_input(self, where: Where, doc: Any, name: str) -> PipelineInputSpec:
        value = doc[name]
        loc = where.location(doc, name)
        if isinstance(value, dict):
            kind = value.get("type")
            if kind in vocabulary.ASSET_TYPES:
                path = value.get("path")
                port = read_port(where, {name: {k: v for k, v in value.items() if k != "path"}},
                                 name, f"inputs.{name}")
                required = path is None and not port.optional
                return PipelineInputSpec(name, InputRole.ARTIFACT, required=required,
                                         default=path, kind=port.kind, port=port, location=loc)
            if kind in vocabulary.AZURE_PARAM_TYPES:
                param = read_param(where, doc, name, f"inputs.{name}")
                return PipelineInputSpec(name, InputRole.PARAM, required=param.required,
                                         default=param.default, param=param, location=loc)
            known = ", ".join([*vocabulary.ASSET_TYPES, *vocabulary.AZURE_PARAM_TYPES])
            raise where.fail(doc, name, f"has type {kind!r}, which mlpipe does not support",
                             hint=f"use one of {known}",
                             field=f"inputs.{name}.type")
        if isinstance(value, (bool, int, float, str)):
            param = ParamSpec(name, _PY_PARAM[type(value)], required=False, default=value)
            return PipelineInputSpec(name, InputRole.PARAM, required=False, default=value,
                                     param=param, location=loc)
        raise where.fail(doc, name, f"is {value!r}; a pipeline input is a value or a mapping "
                         f"with a type", field=f"inputs.{name}")

    def step(self, where: Where, jobs: Any, name: str, path: Path, stack: tuple[Path, ...],
             default_compute: Compute | None, inputs: dict[str, PipelineInputSpec],
             output_types: dict[str, AssetType], produced: dict[str, StepOutput]) -> StepSpec:
        node = jobs[name]
        field = f"jobs.{name}"
        if not isinstance(node, dict):
            raise where.fail(jobs, name, f"is {node!r}, not a job mapping", field=field)
        kind = node.get("type", "command")
        if kind in UNSUPPORTED_NODES or kind not in ("command", "pipeline"):
            raise where.fail(jobs, name, f"job {name!r} has type {kind!r}, which mlpipe cannot "
                             f"run", hint="mlpipe runs command and pipeline jobs; keep this "
                             f"pipeline in Azure ML, or replace the {kind} job with a command job",
                             field=f"{field}.type")
        extra = sorted(set(node) - _NODE_FIELDS)
        if extra:
            raise where.fail(node, extra[0], f"field {extra[0]!r} is not supported by mlpipe",
                             hint="remove it, or keep this pipeline in Azure ML",
                             field=f"{field}.{extra[0]}")
        loc = where.location(jobs, name)
        target = self.target(where, node, name, path, stack, inputs, output_types, field)
        if isinstance(target, ComponentSpec):
            target = self.with_node_settings(where, node, target, default_compute, field)
        bindings: list[tuple[str, Binding]] = []
        for key in node.get("inputs") or {}:
            binding = self.binding(where, node["inputs"], key, f"{field}.inputs.{key}", loc)
            if binding is not None:
                bindings.append((key, binding))
        for key in node.get("outputs") or {}:
            value = node["outputs"][key]
            if isinstance(value, dict):
                value = value.get("path")
            body = _expression(value)
            if body is None:
                continue
            m = _PARENT_OUTPUT.match(body)
            if m is None:
                self.bad_expression(where, node["outputs"], key, f"{field}.outputs.{key}", value,
                                    "an output binds only to ${{parent.outputs.NAME}}")
                continue
            produced[m["name"]] = StepOutput(name, key)
        return StepSpec(name, target, tuple(bindings), loc, explicit_name=True)

    def target(self, where: Where, node: Any, name: str, path: Path, stack: tuple[Path, ...],
               inputs: dict[str, PipelineInputSpec], output_types: dict[str, AssetType],
               field: str) -> ComponentSpec | PipelineSpec:
        ref = node.get("component")
        kind = node.get("type", "command")
        if ref is None:
            if kind == "pipeline":
                raise where.fail(node, "type", f"pipeline job {name!r} has no component",
                                 hint="add component: ./sub_pipeline.yml", field=field)
            return self.inline_command(where, node, name, path, inputs, output_types, field)
        if isinstance(ref, dict):
            if kind == "pipeline":
                raise where.fail(node, "component", "an inline pipeline component is not "
                                 "supported", hint="move it to its own file and reference it",
                                 field=f"{field}.component")
            return read_command_component(ref, path, field_prefix=f"{field}.component.", name=name)
        if not isinstance(ref, str) or ref.startswith("azureml:"):
            raise where.fail(node, "component", f"component {ref!r} is registered in a "
                             f"workspace; mlpipe reads only local component YAML",
                             hint="download it (az ml component show --name NAME --version V > "
                                  "x.yml) and reference ./x.yml", field=f"{field}.component")
        file = (path.parent / ref.removeprefix("file:")).resolve()
        if file in stack or file == path.resolve():
            raise where.fail(node, "component", f"{ref} includes itself",
                             hint="a pipeline component cannot contain itself",
                             field=f"{field}.component")
        cached = self.components.get(file)
        if cached is not None:
            return cached
        if kind == "pipeline":
            spec: ComponentSpec | PipelineSpec = self.pipeline(file, (*stack, path.resolve()))
        else:
            doc = yamlfile.load(file, "an Azure ML command component YAML")
            spec = read_command_component(doc, file)
        self.components[file] = spec
        return spec

    def inline_command(self, where: Where, node: Any, name: str, path: Path,
                       inputs: dict[str, PipelineInputSpec], output_types: dict[str, AssetType],
                       field: str) -> ComponentSpec:
        """An inline command job: its interface is what it binds and what its command names."""
        command = node.get("command")
        if not isinstance(command, str) or not command.strip():
            raise where.fail(node, "type", f"command job {name!r} has neither a component nor "
                             f"a command", hint="add component: ./x.yml or command: ...",
                             field=field)
        ports: dict[str, PortSpec] = {}
        params: dict[str, ParamSpec] = {}
        optional = _optional_names(command)
        given = node.get("inputs") or {}
        for key in given:
            value = given[key]
            typed = value.get("type") if isinstance(value, dict) else None
            body = _expression(value.get("path") if isinstance(value, dict) else value)
            m = _PARENT_INPUT.match(body or "")
            source = inputs.get(m["name"]) if m else None
            if typed in vocabulary.ASSET_TYPES:
                ports[key] = PortSpec(key, vocabulary.ASSET_TYPES[typed], optional=key in optional)
            elif typed in vocabulary.AZURE_PARAM_TYPES:
                params[key] = ParamSpec(key, vocabulary.AZURE_PARAM_TYPES[typed], required=False)
            elif source is not None and source.role is InputRole.PARAM and source.param:
                params[key] = dataclasses.replace(source.param, name=key, required=True,
                                                  default=None)
            elif body is not None:
                kind = source.kind if source is not None and source.kind else AssetType.URI_FOLDER
                ports[key] = PortSpec(key, kind, optional=key in optional)
            elif isinstance(value, (bool, int, float, str)):
                params[key] = ParamSpec(key, _PY_PARAM[type(value)], required=True)
        outputs: dict[str, PortSpec] = {}
        for key in node.get("outputs") or {}:
            value = node["outputs"][key]
            typed = value.get("type") if isinstance(value, dict) else None
            body = _expression(value.get("path") if isinstance(value, dict) else value) or ""
            m = _PARENT_OUTPUT.match(body)
            kind = (vocabulary.ASSET_TYPES.get(typed)
                    or (output_types.get(m["name"]) if m else None) or AssetType.URI_FOLDER)
            outputs[key] = PortSpec(key, kind)
        for direction, ref in _COMMAND_REF.findall(command):
            if direction == "outputs" and ref not in outputs:
                outputs[ref] = PortSpec(ref, AssetType.URI_FOLDER)
            elif direction == "inputs" and ref not in ports and ref not in params:
                ports[ref] = PortSpec(ref, AssetType.URI_FOLDER, optional=ref in optional)
        doc = {k: v for k, v in node.items() if k in ("command", "code", "environment",
                                                      "distribution", "resources",
                                                      "is_deterministic", "display_name",
                                                      "description", "tags")}
        doc["name"] = name
        base = read_command_component(yamlfile.Mapping(doc), path, field_prefix=f"{field}.",
                                      name=name)
        return dataclasses.replace(base, inputs=tuple(ports.values()),
                                   outputs=tuple(outputs.values()), params=tuple(params.values()),
                                   code_digest=script_code_digest(node.get("code"), command,
                                                              path.resolve().parent),
                                   location=where.location(node, "command"))

    def with_node_settings(self, where: Where, node: Any, spec: ComponentSpec,
                           default_compute: Compute | None, field: str) -> ComponentSpec:
        changes: dict[str, Any] = {}
        compute = vocabulary.parse_compute(node.get("compute")) or spec.compute or default_compute
        if compute is not None and compute.sku is None and spec.compute is not None \
                and spec.compute.sku is not None:
            # the component's resources.instance_type stays the VM size on the job's cluster
            compute = Compute(compute.name, spec.compute.sku)
        instances, sku = read_resources(where, node, f"{field}.resources")
        if sku is not None:
            compute = Compute(compute.name if compute else None, sku)
        if compute != spec.compute:
            changes["compute"] = compute
        if instances is not None and instances != spec.instances:
            changes["instances"] = instances
        if "distribution" in node and node.get("component") is not None:
            dist = vocabulary.parse_distribution(node["distribution"])
            if isinstance(dist, str):
                raise where.fail(node, "distribution", dist, field=f"{field}.distribution")
            # the component's own declaration (from its tags) carries over, the job's adds
            dist = vocabulary.read_launch_tags(dist, {
                **vocabulary.launch_tags(spec.distribution), **(node.get("tags") or {})})
            if isinstance(dist, str):
                raise where.fail(node, "tags", dist, field=f"{field}.tags")
            changes["distribution"] = dist
        variables = node.get("environment_variables")
        if variables and node.get("component") is not None:
            merged = dict(spec.environment_variables)
            merged.update({str(k): str(v) for k, v in variables.items()})
            changes["environment_variables"] = tuple(sorted(merged.items()))
        return dataclasses.replace(spec, **changes) if changes else spec

    def binding(self, where: Where, doc: Any, key: str, field: str,
                loc: Location) -> Binding | None:
        value = doc[key]
        if isinstance(value, dict):
            if "path" not in value and "value" not in value:
                return None  # a type-only declaration on an inline job
            value = value.get("path", value.get("value"))
        body = _expression(value)
        if body is None:
            return Literal(value)
        m = _PARENT_INPUT.match(body)
        if m:
            return PipelineInput(m["name"])
        m = _SIBLING_OUTPUT.match(body)
        if m:
            return StepOutput(m["job"], m["port"])
        self.bad_expression(where, doc, key, field, value,
                            "an input binds to ${{parent.inputs.NAME}} or "
                            "${{parent.jobs.JOB.outputs.NAME}}")
        return None

    def bad_expression(self, where: Where, doc: Any, key: str, field: str, value: Any,
                       rule: str) -> None:
        self.diagnostics.append(Diagnostic.of(
            UNREADABLE_BINDING_EXPRESSION,
            f"{field} is {value!r}, which mlpipe cannot follow: {rule}",
            hint="write the binding in one of those forms", step=field.split(".")[1],
            port=key, file=where.file, line=doc.line_of(key) if isinstance(
                doc, yamlfile.Mapping) else None))


def _optional_names(command: str) -> set[str]:
    return {m.group(1) for block in re.findall(r"\$\[\[(.*?)\]\]", command)
            for m in re.finditer(r"\$\{\{\s*inputs\.([A-Za-z_]\w*)\s*\}\}", block)}
