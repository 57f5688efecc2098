"""Reading an Azure ML component (CLI v2 YAML) into a ComponentSpec, and ``load_component``:
such a component as an mlpipe step factory beside decorated ones.

Reads what mlpipe models (interface, environment, command, code, launch) and keeps the whole
document as the spec's ``origin``, so every other field reaches Azure ML as written. What
cannot be read is collected (``Problems``) and reported at once, each with its file, line and
field. Never imports azure-ai-ml (mlpipe reads the YAML itself, so it can point at lines).
"""
from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import vocabulary, yamlfile
from mlpipe.backends.azure.jobkinds import KINDS
from mlpipe.contracts.base import Contract, contract_label, contract_transport, is_contract
from mlpipe.digests import digest_of, script_code_digest
from mlpipe.distribution import FOREIGN_LAUNCH
from mlpipe.dsl import COMPONENT_NAME, Component
from mlpipe.errors import DefinitionError, LoadError, UsageError
from mlpipe.params import check_value
from mlpipe.paths import cloud_reference, display_path, lexical
from mlpipe.spec import (
    ComponentSpec,
    Compute,
    Environment,
    Location,
    Origin,
    ParamSpec,
    ParamType,
    PortSpec,
)

#: Azure ML component types ``load_component`` and the importer read, besides ``command``
#: (which runs here) and ``pipeline`` (the importer's): they run only on Azure ML.
AZURE_ONLY_COMPONENTS = tuple(name for name, kind in KINDS.items()
                              if kind.component_type and not kind.runs_here)
_PRIMITIVE_OUTPUTS = ("boolean", "integer", "number", "string")


class Where:
    """A YAML file and a field path in it, for messages: ``file:line: field``."""

    def __init__(self, file: str) -> None:
        self.file = display_path(file)

    def fail(self, doc: Any, key: Any, message: str, hint: str | None = None,
             field: str | None = None) -> LoadError:
        line = doc.line_of(key) if isinstance(doc, yamlfile.Mapping) else None
        text = f"{field}: {message}" if field else message
        return LoadError(text, hint=hint, file=self.file, line=line)

    def location(self, doc: Any, key: Any) -> Location:
        line = doc.line_of(key) if isinstance(doc, yamlfile.Mapping) else 0
        return Location(self.file, line)


class Problems:
    """What mlpipe cannot read in one load, collected so that all of it is reported at once."""

    def __init__(self) -> None:
        self.found: list[LoadError] = []

    def add(self, where: Where, doc: Any, key: Any, message: str, *, field: str | None = None,
            hint: str | None = None) -> None:
        self.found.append(where.fail(doc, key, message, hint=hint, field=field))

    def raise_any(self) -> None:
        """Raise one LoadError for everything found: the problem itself when there is one,
        else a list (each line located) under the first one's location."""
        if not self.found:
            return
        first = self.found[0]
        if len(self.found) == 1:
            raise first
        lines = "\n".join(f"  {p.where}: {p.message}" if p.where else f"  {p.message}"
                          for p in self.found)
        hints = sorted({p.hint for p in self.found if p.hint})
        raise LoadError(f"{len(self.found)} problems mlpipe cannot read:\n{lines}",
                        hint="; ".join(hints) or None, file=first.file, line=first.line)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def named_entries(where: Where, problems: Problems, doc: Any, key: str, field: str,
                  what: str) -> yamlfile.Mapping:
    """``doc[key]`` (``inputs:``, ``outputs:``, ``jobs:``) as a mapping whose names are names
    like Python identifiers, as Azure ML requires and mlpipe uses them (in folders, in
    ``${{...}}`` expressions, as keyword arguments). What is not one is a problem and left
    out; a list or a scalar in place of the mapping is a problem and reads as empty.
    """
    value = doc.get(key) if isinstance(doc, dict) else None
    if value is None:
        return yamlfile.Mapping()
    if not isinstance(value, dict):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        problems.add(where, doc, key, f"is {shown}, not a mapping of {what} names to their "
                     f"entries", field=field, hint=f"write {key}: as NAME: entry lines "
                                                   f"(a mapping, not a list)")
        return yamlfile.Mapping()
    kept = yamlfile.Mapping()
    if isinstance(value, yamlfile.Mapping):
        kept.line, kept.lines = value.line, value.lines
    for name, entry in value.items():
        if isinstance(name, str) and _NAME.match(name):
            kept[name] = entry
        else:
            problems.add(where, value, name, f"{what} name {name!r} is not a name: use letters, "
                         f"digits and _, not starting with a digit", field=f"{field}.{name}",
                         hint="rename it (Azure ML requires names like Python identifiers)")
    return kept


def _mapping(entry: Any) -> dict[str, Any] | None:
    if isinstance(entry, str):
        return {"type": entry}
    return entry if isinstance(entry, dict) else None


def read_port(where: Where, problems: Problems, doc: Any, name: str, field: str, *,
              output: bool = False) -> PortSpec | None:
    """An input or output port; None (and a problem) when its type is not an Azure ML one.

    Fields mlpipe does not model (``mode``, ``path``, ``is_control``, ...) stay in the
    document. An output without a type is a ``uri_folder``, as Azure ML makes it; a primitive
    output (a control output, ``type: boolean``) travels as a small file here.
    """
    entry = {} if output and doc[name] is None else _mapping(doc[name])
    if entry is None:
        problems.add(where, doc, name, f"is {doc[name]!r}, not a mapping with a type", field=field)
        return None
    kind_text = entry.get("type", "uri_folder" if output else None)
    kind = vocabulary.ASSET_TYPES.get(kind_text)
    if kind is None and output and kind_text in _PRIMITIVE_OUTPUTS:
        kind = AssetType.URI_FILE
    if kind is None:
        problems.add(where, doc, name, f"has type {kind_text!r}, which is not an Azure ML "
                     f"{'output' if output else 'input'} type",
                     hint=f"use one of {', '.join(vocabulary.ASSET_TYPES)}"
                          + ("" if output else " or a parameter type (integer, number, string, "
                                               "boolean)"), field=f"{field}.type")
        return None
    return PortSpec(name, kind, optional=_truth(entry.get("optional", False)),
                    description=entry.get("description"))


def _truth(value: Any) -> bool:
    try:
        return bool(vocabulary.azure_value(ParamType.BOOL, value))
    except ValueError:
        return bool(value)


def read_param(where: Where, problems: Problems, doc: Any, name: str,
               field: str) -> ParamSpec | None:
    """A parameter input, its default, ``min``, ``max`` and ``enum`` read as Azure ML reads
    them (``1e-3`` a number, ``"true"`` a boolean)."""
    entry = doc[name]
    ptype = vocabulary.AZURE_PARAM_TYPES[entry["type"]]
    values: dict[str, Any] = {}
    for key in ("default", "min", "max"):
        if entry.get(key) is None:
            continue
        try:
            values[key] = vocabulary.azure_value(ParamType.FLOAT if key != "default" and
                                                 ptype is ParamType.FLOAT else ptype, entry[key])
        except ValueError as exc:
            problems.add(where, doc, name, f"{key} {exc}", field=f"{field}.{key}")
            return None
    choices = None
    if "enum" in entry:
        if ptype is not ParamType.STR or not isinstance(entry["enum"], list) or not entry["enum"]:
            problems.add(where, doc, name, "enum is a non-empty list, and only for a string",
                         field=f"{field}.enum")
            return None
        choices = tuple(str(c) for c in entry["enum"])
    default = values.get("default")
    optional = _truth(entry.get("optional", False))
    spec = ParamSpec(name, ptype, required="default" not in values and not optional,
                     default=default, minimum=values.get("min"), maximum=values.get("max"),
                     choices=choices, description=entry.get("description"))
    if default is not None:
        problem = check_value(spec, default)
        if problem is not None:
            problems.add(where, doc, name, f"default {problem.message}", field=f"{field}.default")
            return None
    return spec


def read_interface(where: Where, problems: Problems, doc: Any, field_prefix: str = ""
                   ) -> tuple[tuple[PortSpec, ...], tuple[PortSpec, ...], tuple[ParamSpec, ...]]:
    """Inputs, outputs and parameters declared under ``inputs``/``outputs`` of ``doc``."""
    inputs, params, outputs = [], [], []
    declared = named_entries(where, problems, doc, "inputs", f"{field_prefix}inputs", "input")
    declared_outputs = named_entries(where, problems, doc, "outputs", f"{field_prefix}outputs",
                                     "output")
    for name in declared:
        field = f"{field_prefix}inputs.{name}"
        entry = declared[name]
        kind = entry.get("type") if isinstance(entry, dict) else entry
        if kind in vocabulary.AZURE_PARAM_TYPES and isinstance(entry, dict):
            param = read_param(where, problems, declared, name, field)
            if param is not None:
                params.append(param)
        else:
            port = read_port(where, problems, declared, name, field)
            if port is not None:
                inputs.append(port)
    for name in declared_outputs:
        port = read_port(where, problems, declared_outputs, name,
                         f"{field_prefix}outputs.{name}", output=True)
        if port is not None:
            outputs.append(port)
    return tuple(inputs), tuple(outputs), tuple(params)


def read_resources(where: Where, problems: Problems, doc: Any,
                   field: str) -> tuple[int | None, str | None]:
    """``resources.instance_count`` and ``instance_type``; the other resource fields
    (``shm_size``, ``docker_args``, ...) stay in the document."""
    res = doc.get("resources")
    if res is None:
        return None, None
    if not isinstance(res, dict):
        problems.add(where, doc, "resources", f"is {res!r}, not a mapping", field=field)
        return None, None
    count = res.get("instance_count")
    if isinstance(count, str):
        try:
            count = vocabulary.azure_value(ParamType.INT, count)
        except ValueError:
            pass
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        problems.add(where, doc, "resources", f"is {count!r}, not an integer >= 1",
                     field=f"{field}.instance_count")
        count = None
    sku = res.get("instance_type")
    return count, None if sku is None else str(sku)


def read_environment(where: Where, problems: Problems, doc: Any, base: Path,
                     field: str) -> Environment | None:
    """The environment a component or job names, its conda file made absolute."""
    if "environment" not in doc or doc["environment"] is None:
        return None
    value = doc["environment"]
    if isinstance(value, str) and value.startswith("file:"):
        # an environment defined in its own YAML file, relative to this one
        file = lexical(base / value.removeprefix("file:"))
        if not file.is_file():
            problems.add(where, doc, "environment", f"no such file: {value} (looked for {file})",
                         hint="give the environment YAML's path relative to this file",
                         field=field)
            return None
        env = read_environment(Where(str(file)), problems,
                               {"environment": yamlfile.load(file, "an environment YAML")},
                               file.parent, "environment")
        return env
    env = vocabulary.parse_environment(value)
    if env is None:
        problems.add(where, doc, "environment", f"{doc['environment']!r} is not an environment "
                     f"Azure ML reads", hint="use azureml:NAME:VERSION, azureml:NAME@latest, "
                     "an azureml://registries/... URI or an inline {image, conda_file}",
                     field=field)
        return None
    if env.conda_file and not os.path.isabs(env.conda_file):
        env = dataclasses.replace(env, conda_file=str(lexical(base / env.conda_file)))
    return env


def read_command_component(doc: Any, path: str | os.PathLike[str], *, field_prefix: str = "",
                           name: str | None = None, problems: Problems | None = None,
                           keep_origin: bool = True, job: bool = False) -> ComponentSpec:
    """A ComponentSpec for a CLI v2 command component document read from ``path``.

    ``job``: the document is a command job's, whose distribution block azure-ai-ml reads by
    the stricter job schema (no field its type does not have).

    ``keep_origin`` (for a component file) keeps the document as the spec's origin; an inline
    component lives in its pipeline's document instead.

    Raises:
        LoadError: what cannot be read, all of it (unless ``problems`` collects it for the
            caller), naming each field and line.
    """
    own = problems is None
    problems = Problems() if problems is None else problems
    where = Where(str(path))
    base = lexical(path).parent
    command = doc.get("command")
    if not isinstance(command, str) or not command.strip():
        problems.add(where, doc, "command" if "command" in doc else "type",
                     "a command component needs a command",
                     hint="add command: python script.py ...", field=f"{field_prefix}command")
        command = ""
    cname = _component_name(doc, name, path)
    inputs, outputs, params = read_interface(where, problems, doc, field_prefix)
    env = read_environment(where, problems, doc, base, f"{field_prefix}environment")
    distribution, azure_only = None, None
    if doc.get("distribution") is not None:
        parsed = vocabulary.parse_distribution(doc["distribution"], job=job)
        kind = doc["distribution"].get("type") if isinstance(doc["distribution"], dict) else None
        if isinstance(parsed, str) and str(kind).lower() not in ("none", "pytorch", "mpi",
                                                                 "tensorflow"):
            azure_only = f"a {kind} {FOREIGN_LAUNCH}"
        elif isinstance(parsed, str):
            problems.add(where, doc, "distribution", parsed,
                         field=f"{field_prefix}distribution")
        else:
            distribution = vocabulary.read_launch_tags(parsed, doc.get("tags"))
            if isinstance(distribution, str):
                problems.add(where, doc, "tags", distribution, field=f"{field_prefix}tags",
                             hint="writers: rank0, sharded or a rank number; metrics: mean, "
                                  "sum, min, max, rank0, partial or global; backend: nccl, "
                                  "gloo or mpi (docs/azure.md)")
                distribution = None
    instances, sku = read_resources(where, problems, doc, f"{field_prefix}resources")
    variables = doc.get("environment_variables") or {}
    code = doc.get("code")
    code_path = None
    if code is not None and not isinstance(code, str):
        problems.add(where, doc, "code", f"code: is {code!r}, not a folder path",
                     field=f"{field_prefix}code", hint="give the folder that holds the "
                                                       "component's code, e.g. code: ./src")
    if isinstance(code, str):
        remote = cloud_reference(code)
        code_path = code if remote else str(lexical(base / code))
        if not remote and os.path.dirname(code_path) == code_path:
            problems.add(where, doc, "code", f"code: {code} is the root of the file system; its "
                         f"snapshot would be every file of the machine",
                         field=f"{field_prefix}code", hint="give the folder that holds the "
                                                           "component's code, e.g. code: ./src")
            code_path = None
        if remote:
            azure_only = azure_only or f"a component whose code is {remote} ({code})"
    problems.raise_any() if own else None
    return ComponentSpec(
        name=cname, version=str(doc.get("version", "1")), inputs=inputs, outputs=outputs,
        params=params, code_digest=script_code_digest(code, command, base),
        display_name=doc.get("display_name"), description=doc.get("description"),
        environment=env, compute=Compute(None, sku) if sku else None,
        instances=instances or 1, distribution=distribution,
        environment_variables=tuple(sorted((str(k), str(v)) for k, v in variables.items())),
        reuse=_truth(doc.get("is_deterministic", True)), command=command,
        azure_only=azure_only,
        location=where.location(doc, "name" if "name" in doc else "command"),
        code=code_path, origin=Origin.of(str(lexical(path)), doc) if keep_origin else None)


def read_azure_only_component(doc: Any, path: str | os.PathLike[str], *, kind: str,
                              field_prefix: str = "", name: str | None = None,
                              problems: Problems | None = None,
                              keep_origin: bool = True) -> ComponentSpec:
    """A component of a kind that runs only on Azure ML (parallel, spark, data transfer, ...):
    its interface for the checks, its kind, and the note that it runs only on Azure ML."""
    own = problems is None
    problems = Problems() if problems is None else problems
    where = Where(str(path))
    base = lexical(path).parent
    inputs, outputs, params = read_interface(where, problems, doc, field_prefix)
    task = doc.get("task") if isinstance(doc.get("task"), dict) else {}
    env = read_environment(where, problems, task or doc, base, f"{field_prefix}environment")
    problems.raise_any() if own else None
    return ComponentSpec(
        name=_component_name(doc, name, path), version=str(doc.get("version", "1")),
        inputs=inputs, outputs=outputs, params=params,
        code_digest=digest_of({"kind": kind, "document": _plain(doc)}),
        display_name=doc.get("display_name"), description=doc.get("description"),
        environment=env, kind=kind, azure_only=vocabulary.JOB_KINDS.get(kind, f"a {kind} job"),
        location=where.location(doc, "name" if "name" in doc else "type"),
        origin=Origin.of(str(lexical(path)), doc) if keep_origin else None)


def _plain(doc: Any) -> Any:
    import json

    return json.loads(json.dumps(doc, default=str))


def _component_name(doc: Any, name: str | None, path: str | os.PathLike[str]) -> str:
    cname = str(doc.get("name") or name or Path(path).stem)
    if COMPONENT_NAME.match(cname):
        return cname
    # Azure ML names may hold dashes and capitals; mlpipe's step names may not
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in cname.lower())
    return cleaned if cleaned[:1].isalpha() else f"c_{cleaned}"


def read_component(doc: Any, path: str | os.PathLike[str], **options: Any) -> ComponentSpec:
    """A command component, or one of a kind that runs only on Azure ML, by its ``type``."""
    kind = doc.get("type", "command")
    if kind == "command":
        return read_command_component(doc, path, **options)
    return read_azure_only_component(doc, path, kind=str(kind), **options)


class ScriptComponent(Component[Callable[..., Any]]):
    """A component whose step runs a declared command (loaded from YAML), with no Python body.

    Use it in a ``@pipeline`` like a decorated component. ``with_contracts`` attaches
    contracts to its ports.
    """

    def __init__(self, spec: ComponentSpec) -> None:
        def body(*args: Any, **kwargs: Any) -> None:
            what = (f"runs the command {spec.command!r}" if spec.command
                    else f"is {spec.azure_only} and runs only on Azure ML")
            raise UsageError(f"component {spec.name!r} {what}; it has no Python body to call",
                             hint="run it in a pipeline")

        body.__name__ = body.__qualname__ = spec.name
        body.__doc__ = spec.description
        super().__init__(body, spec)  # type: ignore[arg-type]

    def with_contracts(self, **contracts: Contract | type[Contract]) -> "ScriptComponent":
        """A copy whose ports carry the given contracts (``port=Contract``).

        Raises:
            DefinitionError: an unknown port, a value that is not a contract, or a contract
                whose transport kind differs from the port's kind.

        Example:
            >>> train = load_component("train.yml").with_contracts(model=MLflowModel)
        """
        ports = {p.name: p for p in (*self.spec.inputs, *self.spec.outputs)}
        for name, contract in contracts.items():
            port = ports.get(name)
            if port is None:
                raise DefinitionError(f"component {self.spec.name!r} has no port {name!r}",
                                      hint=f"its ports are: {', '.join(ports) or 'none'}")
            if not is_contract(contract):
                raise DefinitionError(f"{name}={contract!r} is not a contract",
                                      hint="pass a Contract class or instance")
            transport = contract_transport(contract)
            if not _transport_fits(transport, port.kind):
                raise DefinitionError(
                    f"contract {contract_label(contract)} travels as {transport.value} but port "
                    f"'{self.spec.name}.{name}' is {port.kind.value}",
                    hint="attach a contract whose transport matches the port's type")
        swap = {n: dataclasses.replace(p, contract=contracts[n]) if n in contracts else p
                for n, p in ports.items()}
        spec = dataclasses.replace(self.spec, inputs=tuple(swap[p.name] for p in self.spec.inputs),
                                   outputs=tuple(swap[p.name] for p in self.spec.outputs))
        return ScriptComponent(spec)

    def __repr__(self) -> str:
        return f"<script component {self.spec.name} {self.spec.version}>"


def _transport_fits(transport: AssetType, kind: AssetType) -> bool:
    return transport is kind


def load_component(path: str | os.PathLike[str]) -> ScriptComponent:
    """An Azure ML component YAML (CLI v2) as an mlpipe component.

    A command component's inputs, outputs, parameters (with min/max/enum), environment,
    command, ``resources.instance_count`` and distribution become the spec; a parallel, Spark,
    data transfer or import component becomes a step that mlpipe checks and exports but that
    runs only on Azure ML. Every other field of the file is exported as written. Call it in a
    ``@pipeline`` like a decorated component.

    Raises:
        LoadError: no such file, not YAML, a pipeline component, or fields that cannot be
            read (all of them, each named with its line).

    Example:
        >>> train = mlpipe.load_component("components/train.yml")
    """
    doc = yamlfile.load(path, "an Azure ML component YAML")
    kind = doc.get("type", "command")
    if kind == "pipeline":
        raise Where(str(path)).fail(doc, "type", "a pipeline component is a pipeline, not a step",
                                    hint=f"check or run it as a pipeline: mlpipe check {path}",
                                    field="type")
    if kind != "command" and kind not in AZURE_ONLY_COMPONENTS:
        raise Where(str(path)).fail(doc, "type", f"component type {kind!r} is not an Azure ML "
                                    f"component type", hint="use command, parallel, spark, "
                                    "data_transfer or import", field="type")
    return ScriptComponent(read_component(doc, path))
