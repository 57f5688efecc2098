"""Tracing a pipeline function: step builders, the handles and references the function sees,
and turning what it did into step specs, outputs and inputs.

Knows specs, not decorators: a traced target is anything with a ``.spec`` (a component's
ComponentSpec or a pipeline's PipelineSpec).
"""
from __future__ import annotations

import contextvars
import enum
import functools
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any, NoReturn

from mlpipe.annotations import ParamMarker, PortMarker
from mlpipe.errors import DefinitionError, with_article
from mlpipe.params import param_type_of
from mlpipe.source import FunctionSource
from mlpipe.spec import (
    Binding,
    CandidateSpec,
    ComponentSpec,
    InputRole,
    Literal,
    Location,
    ParamSpec,
    ParamType,
    PipelineInput,
    PipelineInputSpec,
    PortSpec,
    StepOutput,
    StepSpec,
    plain_value,
)

STEP_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,254}$")


def suggest_name(name: str) -> str:
    s = re.sub(r"[^a-z0-9_]", "_", re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower())
    s = re.sub(r"_+", "_", s).strip("_")
    return s if s and s[0].isalpha() else f"c_{s}"


def fail(message: str, hint: str | None, loc: Location | None) -> NoReturn:
    raise DefinitionError(message, hint=hint, file=loc.file if loc else None,
                          line=loc.line if loc else None)


def caller(frame: FrameType) -> Location:
    return Location(absolute(frame.f_code.co_filename), frame.f_lineno)


@functools.lru_cache(maxsize=256)
def absolute(filename: str) -> str:
    return filename if filename.startswith("<") else os.path.abspath(filename)


# --- tracing ------------------------------------------------------------------------------

class Trace:
    __slots__ = ("builders", "pipeline")
    pipeline: str

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self.builders: list[_StepBuilder] = []


TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("mlpipe_trace", default=None)


class _StepBuilder:
    __slots__ = ("base", "explicit", "location", "name", "target", "trace", "values")
    target: Any
    base: str
    values: dict[str, Any]
    location: Location
    explicit: bool
    trace: Trace

    def __init__(self, target: Any, base: str, values: dict[str, Any], location: Location,
                 trace: Trace) -> None:
        self.target = target
        self.base = base
        self.values = values
        self.location = location
        self.name: str | None = None
        self.explicit = False
        self.trace = trace

    def output_names(self) -> tuple[str, ...]:
        if isinstance(self.target.spec, ComponentSpec):
            return tuple(p.name for p in self.target.spec.outputs)
        return tuple(k for k, _ in self.target.spec.outputs)


@dataclass(frozen=True, slots=True)
class OutputRef:
    """An output of a step being traced: what ``step.examples`` evaluates to."""

    builder: _StepBuilder
    port: str

    def __repr__(self) -> str:
        return f"<output {self.builder.name or self.builder.base}.{self.port}>"


@dataclass(frozen=True, slots=True)
class InputRef:
    """A pipeline input while the pipeline is traced."""

    trace: Trace
    name: str

    def __repr__(self) -> str:
        return f"<pipeline input {self.name}>"


class _Outputs:
    __slots__ = ("_builder",)

    def __init__(self, builder: _StepBuilder) -> None:
        self._builder = builder

    def __getattr__(self, port: str) -> OutputRef:
        if port.startswith("__"):
            raise AttributeError(port)
        return OutputRef(self._builder, port)

    def __getitem__(self, port: str) -> OutputRef:
        return OutputRef(self._builder, port)

    def __iter__(self) -> Iterator[str]:
        return iter(self._builder.output_names())


class StepHandle:
    """A step added to the pipeline being traced. ``handle.port`` is one of its outputs.

    ``handle.outputs[name]`` reaches an output whose name collides with a method here.
    """

    __slots__ = ("_builder",)

    def __init__(self, builder: _StepBuilder) -> None:
        self._builder = builder

    def __getattr__(self, port: str) -> OutputRef:
        if port.startswith("__"):
            raise AttributeError(port)
        return OutputRef(self._builder, port)

    @property
    def outputs(self) -> _Outputs:
        return _Outputs(self._builder)

    def named(self, name: str) -> "StepHandle":
        """Give this step an explicit name (a lowercase identifier); returns the handle."""
        if not isinstance(name, str) or not STEP_NAME.match(name):
            fail(f"step name {name!r} would be rejected by Azure ML (lowercase letters, digits "
                  f"and underscores, not starting with a digit)",
                  f"use .named({suggest_name(str(name))!r})", caller(sys._getframe(1)))
        self._builder.name = name
        self._builder.explicit = True
        return self

    def __repr__(self) -> str:
        return f"<step {self._builder.name or self._builder.base}>"


def add_step(target: Any, label: str, args: tuple[Any, ...], kwargs: dict[str, Any],
              where: Location) -> StepHandle:
    trace = TRACE.get()
    kind = "component" if isinstance(target.spec, ComponentSpec) else "pipeline"
    if trace is None:
        fail(f"{kind} {label!r} was called outside a pipeline",
              f"call it inside a @pipeline function; to run the body directly, call "
              f"{target.fn.__name__}.fn(...)" if kind == "component" else
              f"call it inside another @pipeline function, or use {target.fn.__name__}.spec",
              where)
    if args:
        fail(f"{kind} {label!r} was given {len(args)} positional argument(s); steps take "
              f"inputs and parameters by name", f"write {label}(name=value, ...)", where)
    values = {key: _binding_value(value, trace, label, key, where) for key, value in kwargs.items()}
    base = label if kind == "component" else suggest_name(label)
    builder = _StepBuilder(target, base, values, where, trace)
    trace.builders.append(builder)
    return StepHandle(builder)


def _binding_value(value: Any, trace: Trace, label: str, key: str, where: Location) -> Any:
    if isinstance(value, StepHandle):
        builder = value._builder
        names = builder.output_names()
        value = OutputRef(builder, names[0] if len(names) == 1 else "")
    if isinstance(value, OutputRef):
        if value.builder.trace is not trace:
            fail(f"{label}({key}=...) is given an output of step "
                  f"{value.builder.base!r} from another pipeline", "pass outputs only between "
                  "steps of the same pipeline; give the other pipeline an output instead", where)
        return value
    if isinstance(value, InputRef):
        if value.trace is not trace:
            fail(f"{label}({key}=...) is given input {value.name!r} of another pipeline",
                  "pass it into this pipeline as an input", where)
        return value
    try:
        return Literal(plain_value(value))
    except TypeError as exc:
        fail(f"{label}({key}=...): {exc}", None, where)


def name_steps(trace: Trace) -> None:
    used = {b.name for b in trace.builders if b.explicit}
    counters: dict[str, int] = {}
    for b in trace.builders:
        if b.explicit:
            continue
        i = counters.get(b.base, 0)
        name = b.base if i == 0 else f"{b.base}_{i + 1}"
        while name in used:
            i += 1
            name = f"{b.base}_{i + 1}"
        counters[b.base] = i + 1
        b.name = name
        used.add(name)


def _binding(value: Any) -> Binding:
    if isinstance(value, OutputRef):
        return StepOutput(_named(value.builder.name), value.port)
    if isinstance(value, InputRef):
        return PipelineInput(_named(value.name))
    return value


def _named(name: str | None) -> str:
    assert name is not None  # steps and inputs are named before specs are built
    return name


def step_spec(b: _StepBuilder) -> StepSpec:
    return StepSpec(name=_named(b.name), target=b.target.spec,
                    bindings=tuple((k, _binding(v)) for k, v in b.values.items()),
                    location=b.location, explicit_name=b.explicit)


def output_binding(value: Any, trace: Trace, what: str, src: FunctionSource, label: str) -> Binding:
    if isinstance(value, StepHandle):
        names = value._builder.output_names()
        value = OutputRef(value._builder, names[0] if len(names) == 1 else "")
    if isinstance(value, OutputRef) and value.builder.trace is trace:
        return _binding(value)
    if isinstance(value, InputRef) and value.trace is trace:
        return _binding(value)
    fail(f"{what} returns {value!r} as {label}; a pipeline output must be a step's output",
          "return step outputs such as step.model", src.location())


def pipeline_outputs(result: Any, trace: Trace, what: str, src: FunctionSource
                      ) -> tuple[tuple[tuple[str, Binding], ...], CandidateSpec | None]:
    """The outputs a pipeline function's return value names (a Candidate is the DSL's to read:
    ``mlpipe.dsl``)."""
    if result is None:
        return (), None
    if isinstance(result, StepHandle):
        b = result._builder
        return tuple((n, StepOutput(_named(b.name), n)) for n in b.output_names()), None
    if isinstance(result, OutputRef):
        return ((result.port, output_binding(result, trace, what, src, "its output")),), None
    if isinstance(result, Mapping):
        outs = []
        for key, value in result.items():
            if not isinstance(key, str) or not key.isidentifier():
                fail(f"{what} returns an output named {key!r}; output names are identifiers",
                      "use names like model or report", src.location())
            outs.append((key, output_binding(value, trace, what, src, f"output {key!r}")))
        return tuple(outs), None
    fail(f"{what} returns {with_article(type(result).__name__)}; a pipeline returns a "
         f"Candidate, a dict of outputs, one output, a step, or None",
         "return {'name': step.output, ...}",
          src.location())


def _uses(name: str, steps: tuple[StepSpec, ...]) -> list[PortSpec | ParamSpec | PipelineInputSpec]:
    found = []
    for step in steps:
        for key, binding in step.bindings:
            if isinstance(binding, PipelineInput) and binding.name == name:
                target = step.target
                if isinstance(target, ComponentSpec):
                    use = target.input(key) or target.param(key)
                else:
                    use = target.input(key)
                if use is not None:
                    found.append(use)
    return found


def pipeline_input(name: str, marker: Any, defaults: dict[str, Any],
                    steps: tuple[StepSpec, ...], src: FunctionSource) -> PipelineInputSpec:
    has_default = name in defaults
    default = defaults.get(name)
    loc = src.location(name)
    common: dict[str, Any] = dict(name=name, required=not has_default, default=default,
                                  location=loc)
    if isinstance(marker, PortMarker):
        port = PortSpec(name, marker.port_kind, marker.contract, optional=has_default)
        return PipelineInputSpec(role=InputRole.ARTIFACT, kind=marker.kind, port=port, **common)
    if isinstance(marker, ParamMarker):
        typ = marker.python_type
        param = ParamSpec(name, param_type_of(typ), required=not has_default,
                          default=default, minimum=marker.minimum, maximum=marker.maximum,
                          choices=marker.choices,
                          enum_class=(typ if isinstance(typ, type) and issubclass(typ, enum.Enum)
                                      else None))
        _no_secret_default(name, param, default, src)
        return PipelineInputSpec(role=InputRole.PARAM, param=param, **common)
    uses = _uses(name, steps)
    artifact_uses = [u for u in uses if isinstance(u, PortSpec) or (
        isinstance(u, PipelineInputSpec) and u.role is InputRole.ARTIFACT)]
    if artifact_uses:
        kind = next((u.kind for u in artifact_uses if u.kind is not None), None)
        return PipelineInputSpec(role=InputRole.ARTIFACT, kind=kind, **common)
    params = [p for p in (u.param if isinstance(u, PipelineInputSpec) else u for u in uses)
              if isinstance(p, ParamSpec)]
    if params:
        param = replace(params[0], name=name, required=not has_default,
                        default=default if has_default else None)
        _no_secret_default(name, param, default, src)
        return PipelineInputSpec(role=InputRole.PARAM, param=param, **common)
    role = InputRole.PARAM if has_default and not isinstance(default, str) else InputRole.ARTIFACT
    return PipelineInputSpec(role=role, **common)


def _no_secret_default(name: str, param: ParamSpec, default: Any, src: FunctionSource) -> None:
    """A secret pipeline parameter with a default is refused (the default is never shown)."""
    if param.type is ParamType.SECRET and default is not None:
        fail(f"pipeline input {name!r} is a Secret with a default value; a "
             f"value written in the code is in its source, its digest and the code revision in "
             f"clear", f"remove the default and give the value when submitting (--secret "
             f"{name}=ENV_VAR)", src.location(name))
