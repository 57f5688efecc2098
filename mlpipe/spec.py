"""Specs: what the user declared, as frozen, hashable values with a stable content digest.

Nothing here imports azure-ai-ml, SQLAlchemy, torch, the DSL or the graph. The fields that
go into each digest are listed in docs/digests.md.
"""
from __future__ import annotations

import enum
import json
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import Contract, contract_label, contract_spec
from mlpipe.digests import digest_of
from mlpipe.distribution import Distribution
from mlpipe.errors import with_article
from mlpipe.paths import display_path


def plain_value(value: Any) -> Any:
    """A literal as a JSON-able value (enum members by value), or raise TypeError."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TypeError(f"{value!r} cannot be recorded: use a finite number")
        return value
    if isinstance(value, enum.Enum):
        return plain_value(value.value)
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain_value(v) for k, v in value.items()}
    if hasattr(value, "__fspath__"):
        return str(value)
    raise TypeError(f"{with_article(type(value).__name__)} value cannot be passed to a step; "
                    f"use a number, string, bool, enum member, path, or a list/dict of those")


def freeze(value: Any) -> Any:
    """A read-only deep copy of a YAML/JSON value: mappings as ``MappingProxyType``, lists as
    tuples (``thaw`` gives the plain value back)."""
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain (mutable) copy of a value ``freeze`` made: dicts and lists."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Origin:
    """The YAML document a spec was read from, kept whole and read-only.

    An export of a spec read from Azure ML YAML writes this document back (its relative paths
    rebased), so every field mlpipe does not model reaches Azure ML as it was written. The
    digest (``source`` in the spec's digest material) covers every field of the document.

    Args:
        file: the absolute path of the YAML file.
        document: the parsed document, frozen (see ``freeze``).
    """

    file: str
    document: Mapping[str, Any] = field(hash=False)
    digest: str = field(default="", init=False)

    def __post_init__(self) -> None:
        # values JSON cannot hold (YAML dates) are digested as their text
        plain = json.loads(json.dumps(thaw(self.document), default=str))
        object.__setattr__(self, "digest", digest_of(plain))

    @classmethod
    def of(cls, file: str, document: Any) -> "Origin":
        """The origin of ``document`` read from ``file`` (frozen here)."""
        return cls(str(file), freeze(document))

    def thawed(self) -> dict[str, Any]:
        """A plain, mutable copy of the document."""
        return thaw(self.document)


@dataclass(frozen=True, slots=True)
class Location:
    """Where something was declared in the user's code."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{display_path(self.file)}:{self.line}"


@dataclass(frozen=True, slots=True)
class Environment:
    """The software a step runs in: an Azure ML environment reference.

    Args:
        name: Azure ML environment name.
        version: its version; omit only for a local-only environment.
        image: base Docker image, for an environment mlpipe creates.
        conda_file: path of a conda specification file, relative to the component's file.
        variables: environment variables every step of this environment gets.

    Example:
        >>> Environment("defect-cpu", version="4")
        Environment(name='defect-cpu', version='4', image=None, conda_file=None, variables=())
    """

    name: str
    version: str | None = None
    image: str | None = None
    conda_file: str | None = None
    variables: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.version is not None and not isinstance(self.version, str):
            object.__setattr__(self, "version", str(self.version))
        if isinstance(self.variables, dict):
            object.__setattr__(self, "variables", tuple(sorted(
                (str(k), str(v)) for k, v in self.variables.items())))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "image": self.image,
                "conda_file": self.conda_file, "variables": [list(p) for p in self.variables]}


@dataclass(frozen=True, slots=True)
class Compute:
    """Where a step runs: an Azure ML compute target and, where known, its VM size.

    Args:
        name: compute target name (``cpu-cluster``), or None for serverless.
        sku: the VM size (``Standard_NC24rs_v3``), used by the distribution checks.
        input: the pipeline input whose value names the compute (Azure ML YAML's
            ``compute: ${{parent.inputs.NAME}}``); the target is then known only on submission.
    """

    name: str | None = None
    sku: str | None = None
    input: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "sku": self.sku}
        if self.input is not None:
            out["input"] = self.input
        return out


@dataclass(frozen=True, slots=True)
class PortSpec:
    """An artifact input or output of a component."""

    name: str
    kind: AssetType
    contract: Contract | type[Contract] | None = field(default=None, hash=False)
    optional: bool = False
    description: str | None = None

    @property
    def type_label(self) -> str:
        """What a message calls this port's type: its contract if any, else its kind."""
        if self.contract is None:
            return self.kind.value
        return f"{contract_label(self.contract)} ({self.kind.value})"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind.value, "optional": self.optional,
                "description": self.description,
                "contract": None if self.contract is None else contract_spec(self.contract)}


class ParamType(str, enum.Enum):
    INT = "int"
    FLOAT = "float"
    STR = "str"
    BOOL = "bool"
    ENUM = "enum"
    #: ``Param[Secret]``: text given at submit time, recorded only as a keyed hash
    SECRET = "secret"


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """A scalar parameter of a component, with its constraint.

    ``minimum``/``maximum`` are inclusive bounds; ``choices`` the allowed values (for an enum,
    its members' values). ``required`` is True when no default was given.
    """

    name: str
    type: ParamType
    required: bool = True
    default: Any = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    choices: tuple[Any, ...] | None = None
    enum_class: type[enum.Enum] | None = field(default=None, compare=False, hash=False)
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.value, "required": self.required,
                "default": self.default, "min": self.minimum, "max": self.maximum,
                "choices": None if self.choices is None else list(self.choices),
                "enum": None if self.enum_class is None
                else f"{self.enum_class.__module__}.{self.enum_class.__qualname__}",
                "description": self.description}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Declared:
    """What a component and a pipeline keep beside what they declare: their docstring, where
    and by which function they were declared, the document they were read from (none of it
    compared), and ``digest``, of ``to_dict()``, computed once, at construction."""

    doc: str | None = field(default=None, compare=False)
    location: Location | None = field(default=None, compare=False)
    function: str | None = field(default=None, compare=False)
    origin: Origin | None = field(default=None, compare=False)
    digest: str = field(default="", init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", digest_of(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class ComponentSpec(_Declared):
    """Everything a component declares. ``digest`` is computed once, at construction."""

    name: str
    version: str
    inputs: tuple[PortSpec, ...]
    outputs: tuple[PortSpec, ...]
    params: tuple[ParamSpec, ...]
    code_digest: str
    display_name: str | None = None
    description: str | None = None
    environment: Environment | None = None
    compute: Compute | None = None
    instances: int = 1
    distribution: Distribution | None = None
    environment_variables: tuple[tuple[str, str], ...] = ()
    reuse: bool = True
    reads: tuple[str, ...] = ()
    command: str | None = None
    kind: str = "command"
    azure_only: str | None = None
    code: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The digest material: every declared field except location and docstring.

        ``code`` (where a script component's files are) is left out: ``code_digest`` already
        covers their content. ``kind`` (the Azure ML job type, when not ``command``),
        ``azure_only``, ``source`` (the digest of the YAML document it was read from) and
        ``reads`` (the files it declares it reads outside its inputs) are added only when set,
        so the digest of every other component stays as it was.
        """
        extra: dict[str, Any] = {}
        if self.kind != "command":
            extra["kind"] = self.kind
        if self.azure_only is not None:
            extra["azure_only"] = self.azure_only
        if self.origin is not None:
            extra["source"] = self.origin.digest
        if self.reads:
            extra["reads"] = list(self.reads)
        return {
            **extra,
            "type": "component",
            "name": self.name,
            "version": self.version,
            "display_name": self.display_name,
            "description": self.description,
            "inputs": [p.to_dict() for p in self.inputs],
            "outputs": [p.to_dict() for p in self.outputs],
            "params": [p.to_dict() for p in self.params],
            "environment": None if self.environment is None else self.environment.to_dict(),
            "compute": None if self.compute is None else self.compute.to_dict(),
            "instances": self.instances,
            "distribution": None if self.distribution is None else self.distribution.to_dict(),
            "environment_variables": [list(p) for p in self.environment_variables],
            "reuse": self.reuse,
            "command": self.command,
            "code": self.code_digest,
        }

    def port(self, name: str) -> PortSpec | None:
        for p in self.inputs:
            if p.name == name:
                return p
        for p in self.outputs:
            if p.name == name:
                return p
        return None

    def input(self, name: str) -> PortSpec | None:
        return next((p for p in self.inputs if p.name == name), None)

    def output(self, name: str) -> PortSpec | None:
        return next((p for p in self.outputs if p.name == name), None)

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)


# --- bindings: what a step's input or parameter is bound to -------------------------------


def declared_topology(component: ComponentSpec) -> dict[str, Any] | None:
    """The launch a component declares (distribution, instances, world size), or None for a
    plain single-process step. Every backend records it as the step's declared topology.

    Example:
        >>> declared_topology(train.spec)["world_size"]
        8
    """
    if component.distribution is None and component.instances == 1:
        return None
    per_node = component.distribution.processes_per_instance() if component.distribution else 1
    return {"distribution": None if component.distribution is None
            else component.distribution.to_dict(),
            "instances": component.instances, "world_size": per_node * component.instances}

@dataclass(frozen=True, slots=True)
class StepOutput:
    """The output ``port`` of step ``step`` (a local step name in the same pipeline).

    ``port`` is empty when a whole step was passed where one output was expected.
    """

    step: str
    port: str

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "port": self.port}

    def __str__(self) -> str:
        return f"{self.step}.{self.port}" if self.port else self.step


@dataclass(frozen=True, slots=True)
class PipelineInput:
    """An input or parameter of the enclosing pipeline."""

    name: str

    def to_dict(self) -> dict[str, Any]:
        return {"pipeline_input": self.name}

    def __str__(self) -> str:
        return f"inputs.{self.name}"


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant: a parameter value, or a data reference (path or URI) for an input.

    ``base`` is the folder a relative path is relative to (the folder of the YAML file it was
    read from); None: the current directory. ``yaml``: the value was read from Azure ML YAML,
    where Azure ML reads it as the consumer's type (``"false"`` for a boolean). Neither is
    part of the digest.
    """

    value: Any
    base: str | None = field(default=None, compare=False)
    yaml: bool = field(default=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"literal": self.value}

    def __str__(self) -> str:
        return repr(self.value)


Binding = StepOutput | PipelineInput | Literal


class InputRole(str, enum.Enum):
    ARTIFACT = "artifact"
    PARAM = "param"


@dataclass(frozen=True, slots=True)
class PipelineInputSpec:
    """An input of a pipeline: an artifact or a parameter, declared or inferred from use.

    ``base`` and ``yaml`` (not digested) say, for an input read from Azure ML YAML, the folder
    its default path is relative to and that Azure ML reads its value as each consumer's type.
    """

    name: str
    role: InputRole
    required: bool = True
    default: Any = None
    kind: AssetType | None = None
    port: PortSpec | None = None
    param: ParamSpec | None = None
    location: Location | None = field(default=None, compare=False)
    base: str | None = field(default=None, compare=False)
    yaml: bool = field(default=False, compare=False)

    @property
    def secret(self) -> bool:
        """A ``Param[Secret]``: given at submit time, written down only as a keyed hash."""
        return self.param is not None and self.param.type is ParamType.SECRET

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role.value, "required": self.required,
                "default": self.default,
                "kind": None if self.kind is None else self.kind.value,
                "port": None if self.port is None else self.port.to_dict(),
                "param": None if self.param is None else self.param.to_dict()}


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One use of a component (or of a nested pipeline) inside a pipeline."""

    name: str
    target: ComponentSpec | PipelineSpec
    bindings: tuple[tuple[str, Binding], ...]
    location: Location | None = field(default=None, compare=False)
    explicit_name: bool = False

    def binding(self, name: str) -> Binding | None:
        for key, value in self.bindings:
            if key == name:
                return value
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target.digest,
                "bindings": {k: v.to_dict() for k, v in self.bindings}}


@dataclass(frozen=True, slots=True)
class CandidateSpec:
    """The pipeline outputs a ``Candidate(...)`` return names as model and evaluation."""

    model: str = "model"
    evaluation: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "evaluation": self.evaluation, "name": self.name}


@dataclass(frozen=True, slots=True)
class PipelineSpec(_Declared):
    """A pipeline: its inputs, its steps with their bindings, and its named outputs."""

    name: str
    inputs: tuple[PipelineInputSpec, ...]
    steps: tuple[StepSpec, ...]
    outputs: tuple[tuple[str, Binding], ...]
    version: str | None = None
    description: str | None = None
    candidate: CandidateSpec | None = None

    def to_dict(self) -> dict[str, Any]:
        """The digest material: steps refer to their component or sub-pipeline by digest; a
        pipeline read from YAML adds ``source``, the digest of its document."""
        extra = {} if self.origin is None else {"source": self.origin.digest}
        return {
            **extra,
            "type": "pipeline",
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "inputs": [i.to_dict() for i in self.inputs],
            "steps": [s.to_dict() for s in self.steps],
            "outputs": {k: v.to_dict() for k, v in self.outputs},
            "candidate": None if self.candidate is None else self.candidate.to_dict(),
        }

    def input(self, name: str) -> PipelineInputSpec | None:
        return next((i for i in self.inputs if i.name == name), None)

    def step(self, name: str) -> StepSpec | None:
        return next((s for s in self.steps if s.name == name), None)

    def output(self, name: str) -> Binding | None:
        return next((b for k, b in self.outputs if k == name), None)

    def leaves(self) -> Iterator[tuple[StepSpec, ComponentSpec]]:
        """The steps that run a component, nested pipelines' steps included, each with its
        component."""
        for step in self.steps:
            if isinstance(step.target, PipelineSpec):
                yield from step.target.leaves()
            else:
                yield step, step.target
