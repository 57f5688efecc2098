"""Reading an Azure ML command component (CLI v2 YAML) into a ComponentSpec, and
``load_component``: such a component as an mlpipe step factory beside decorated ones.

Raises LoadError naming the file, line and field of anything it cannot represent; never
imports azure-ai-ml (mlpipe reads the YAML itself, so it can point at lines).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import vocabulary, yamlfile
from mlpipe.contracts.base import Contract, contract_label, contract_transport, is_contract
from mlpipe.digests import script_code_digest
from mlpipe.dsl import COMPONENT_NAME, Component
from mlpipe.errors import DefinitionError, LoadError, UsageError
from mlpipe.params import check_value
from mlpipe.paths import display_path
from mlpipe.spec import ComponentSpec, Compute, Location, ParamSpec, ParamType, PortSpec

COMMAND_FIELDS = {"$schema", "type", "name", "version", "display_name", "description", "tags",
                  "is_deterministic", "inputs", "outputs", "code", "environment", "resources",
                  "distribution", "command", "environment_variables"}
_PORT_FIELDS = {"type", "optional", "description", "mode", "default"}
_PARAM_FIELDS = {"type", "optional", "description", "default", "min", "max", "enum"}
_RESOURCE_FIELDS = {"instance_count", "instance_type"}


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


def read_port(where: Where, doc: Any, name: str, field: str) -> PortSpec:
    entry = doc[name]
    if isinstance(entry, str):
        entry = {"type": entry}
    if not isinstance(entry, dict):
        raise where.fail(doc, name, f"is {entry!r}, not a mapping with a type", field=field)
    extra = sorted(set(entry) - _PORT_FIELDS)
    if extra:
        raise where.fail(doc, name, f"has field {extra[0]!r}, which mlpipe does not read",
                         hint=f"remove it; mlpipe reads {', '.join(sorted(_PORT_FIELDS))}",
                         field=field)
    kind = vocabulary.ASSET_TYPES.get(entry.get("type"))
    if kind is None:
        raise where.fail(doc, name, f"has type {entry.get('type')!r}, which mlpipe does not "
                         f"support", hint=f"use one of {', '.join(vocabulary.ASSET_TYPES)}",
                         field=f"{field}.type")
    return PortSpec(name, kind, optional=bool(entry.get("optional", False)),
                    description=entry.get("description"))


def read_param(where: Where, doc: Any, name: str, field: str) -> ParamSpec:
    entry = doc[name]
    extra = sorted(set(entry) - _PARAM_FIELDS)
    if extra:
        raise where.fail(doc, name, f"has field {extra[0]!r}, which mlpipe does not read",
                         hint=f"remove it; mlpipe reads {', '.join(sorted(_PARAM_FIELDS))}",
                         field=field)
    ptype = vocabulary.AZURE_PARAM_TYPES[entry["type"]]
    has_default = "default" in entry
    default = entry.get("default")
    choices = None
    if "enum" in entry:
        if ptype is not ParamType.STR or not isinstance(entry["enum"], list) or not entry["enum"]:
            raise where.fail(doc, name, "enum is a non-empty list, and only for a string",
                             field=f"{field}.enum")
        choices = tuple(str(c) for c in entry["enum"])
    if ptype is ParamType.FLOAT and isinstance(default, int) and not isinstance(default, bool):
        default = float(default)
    if ptype is ParamType.STR and default is not None:
        default = str(default)
    spec = ParamSpec(name, ptype, required=not has_default and not entry.get("optional", False),
                     default=default, minimum=entry.get("min"), maximum=entry.get("max"),
                     choices=choices, description=entry.get("description"))
    if default is not None:
        problem = check_value(spec, default)
        if problem is not None:
            raise where.fail(doc, name, f"default {problem.message}", field=f"{field}.default")
    return spec


def read_interface(where: Where, doc: Any, field_prefix: str = ""
                   ) -> tuple[tuple[PortSpec, ...], tuple[PortSpec, ...], tuple[ParamSpec, ...]]:
    """Inputs, outputs and parameters declared under ``inputs``/``outputs`` of ``doc``."""
    inputs, params, outputs = [], [], []
    declared = doc.get("inputs") or {}
    for name in declared:
        field = f"{field_prefix}inputs.{name}"
        entry = declared[name]
        kind = entry.get("type") if isinstance(entry, dict) else entry
        if kind in vocabulary.AZURE_PARAM_TYPES:
            params.append(read_param(where, declared, name, field))
        else:
            inputs.append(read_port(where, declared, name, field))
    for name in doc.get("outputs") or {}:
        outputs.append(read_port(where, doc["outputs"], name, f"{field_prefix}outputs.{name}"))
    return tuple(inputs), tuple(outputs), tuple(params)


def read_resources(where: Where, doc: Any, field: str) -> tuple[int | None, str | None]:
    res = doc.get("resources")
    if res is None:
        return None, None
    if not isinstance(res, dict):
        raise where.fail(doc, "resources", f"is {res!r}, not a mapping", field=field)
    extra = sorted(set(res) - _RESOURCE_FIELDS)
    if extra:
        raise where.fail(doc, "resources", f"has field {extra[0]!r}, which mlpipe does not read",
                         hint="mlpipe reads instance_count and instance_type",
                         field=f"{field}.{extra[0]}")
    count = res.get("instance_count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise where.fail(doc, "resources", f"instance_count is {count!r}, not an int >= 1",
                         field=f"{field}.instance_count")
    return count, res.get("instance_type")


def read_command_component(doc: Any, path: str | os.PathLike[str], *, field_prefix: str = "",
                           name: str | None = None) -> ComponentSpec:
    """A ComponentSpec for a CLI v2 command component document read from ``path``.

    Raises:
        LoadError: a kind or field mlpipe cannot represent, naming the field and line.
    """
    where = Where(str(path))
    base = Path(path).resolve().parent
    kind = doc.get("type", "command")
    if kind != "command":
        raise where.fail(doc, "type", f"component type {kind!r} is not supported; mlpipe "
                         f"loads command components", hint="use a command component, or keep "
                         "this step in Azure ML", field=f"{field_prefix}type")
    extra = sorted(set(doc) - COMMAND_FIELDS)
    if extra:
        raise where.fail(doc, extra[0], f"field {extra[0]!r} is not supported by mlpipe",
                         hint=f"remove it; mlpipe reads {', '.join(sorted(COMMAND_FIELDS))}",
                         field=f"{field_prefix}{extra[0]}")
    command = doc.get("command")
    if not isinstance(command, str) or not command.strip():
        raise where.fail(doc, "command", "a command component needs a command",
                         hint="add command: python script.py ...", field=f"{field_prefix}command")
    cname = str(doc.get("name") or name or Path(path).stem)
    if not COMPONENT_NAME.match(cname):
        raise where.fail(doc, "name", f"component name {cname!r} is not lowercase letters, "
                         f"digits and underscores", field=f"{field_prefix}name")
    inputs, outputs, params = read_interface(where, doc, field_prefix)
    env = None
    if "environment" in doc:
        env = vocabulary.parse_environment(doc["environment"])
        if env is None:
            raise where.fail(doc, "environment", f"{doc['environment']!r} is not an environment "
                             f"mlpipe reads", hint="use azureml:NAME:VERSION, azureml:NAME@latest "
                             "or an inline {image, conda_file}", field=f"{field_prefix}environment")
        if env.conda_file and not os.path.isabs(env.conda_file):
            env = dataclasses.replace(env, conda_file=str((base / env.conda_file).resolve()))
    distribution = None
    if "distribution" in doc:
        distribution = vocabulary.parse_distribution(doc["distribution"])
        if isinstance(distribution, str):
            raise where.fail(doc, "distribution", distribution, field=f"{field_prefix}distribution")
        distribution = vocabulary.read_launch_tags(distribution, doc.get("tags"))
        if isinstance(distribution, str):
            raise where.fail(doc, "tags", distribution, field=f"{field_prefix}tags",
                             hint="writers: rank0, sharded or a rank number; metrics: mean, "
                                  "sum, min, max, rank0, partial or global; backend: nccl, "
                                  "gloo or mpi (docs/azure.md)")
    instances, sku = read_resources(where, doc, f"{field_prefix}resources")
    variables = doc.get("environment_variables") or {}
    code = doc.get("code")
    code_path = None
    if isinstance(code, str):
        code_path = code if ":" in code.split("/", 1)[0] else str((base / code).resolve())
    return ComponentSpec(
        name=cname, version=str(doc.get("version", "1")), inputs=inputs, outputs=outputs,
        params=params, code_digest=script_code_digest(code, command, base),
        display_name=doc.get("display_name"), description=doc.get("description"),
        environment=env, compute=Compute(None, sku) if sku else None,
        instances=instances or 1, distribution=distribution,
        environment_variables=tuple(sorted((str(k), str(v)) for k, v in variables.items())),
        reuse=bool(doc.get("is_deterministic", True)), command=command,
        location=where.location(doc, "name" if "name" in doc else "command"),
        code=code_path)


class ScriptComponent(Component):
    """A component whose step runs a declared command (loaded from YAML), with no Python body.

    Use it in a ``@pipeline`` like a decorated component. ``with_contracts`` attaches
    contracts to its ports.
    """

    def __init__(self, spec: ComponentSpec) -> None:
        def body(*args: Any, **kwargs: Any) -> None:
            raise UsageError(f"component {spec.name!r} runs the command {spec.command!r}; it "
                             f"has no Python body to call", hint="run it in a pipeline")

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
    """An Azure ML command component YAML (CLI v2) as an mlpipe component.

    Its inputs, outputs, parameters (with min/max/enum), environment, command,
    ``resources.instance_count`` and distribution become the spec; call it in a ``@pipeline``
    like a decorated component.

    Raises:
        LoadError: no such file, not YAML, or a kind or field mlpipe cannot represent (the
            message names the field).

    Example:
        >>> train = mlpipe.load_component("components/train.yml")
    """
    doc = yamlfile.load(path, "an Azure ML command component YAML")
    return ScriptComponent(read_command_component(doc, path))
