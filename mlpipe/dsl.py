"""The decorator DSL: ``@component``, ``@pipeline``, ``Candidate``, and tracing a pipeline.

A pipeline function is traced once, with placeholders for its inputs, into a PipelineSpec.
Decoration raises only for what makes a spec impossible; wiring problems are left to checks.
"""
from __future__ import annotations

import contextvars
import enum
import functools
import inspect
import os
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import FrameType, FunctionType
from typing import Any, Callable, TypeVar, overload

from mlpipe.annotations import ParamMarker, PortMarker
from mlpipe.distribution import Distribution, as_distribution
from mlpipe.errors import DefinitionError, MlpipeError, with_article
from mlpipe.params import param_type_of
from mlpipe.signature import read_component_signature, type_hints, _marker
from mlpipe.source import FunctionSource, code_digest, function_source
from mlpipe.spec import (Binding, CandidateSpec, Compute, ComponentSpec, Environment, InputRole,
                         Literal, Location, ParamSpec, PipelineInput, PipelineInputSpec,
                         PipelineSpec, PortSpec, StepOutput, StepSpec, plain_value)

COMPONENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,254}$")
PIPELINE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,254}$")
STEP_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,254}$")

F = TypeVar("F", bound=Callable[..., Any])
_MLPIPE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _suggest_name(name: str) -> str:
    s = re.sub(r"[^a-z0-9_]", "_", re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower())
    s = re.sub(r"_+", "_", s).strip("_")
    return s if s and s[0].isalpha() else f"c_{s}"


def _fail(message: str, hint: str | None, loc: Location | None) -> None:
    raise DefinitionError(message, hint=hint, file=loc.file if loc else None,
                          line=loc.line if loc else None)


def _caller(frame: FrameType) -> Location:
    return Location(_absolute(frame.f_code.co_filename), frame.f_lineno)


@functools.lru_cache(maxsize=256)
def _absolute(filename: str) -> str:
    return filename if filename.startswith("<") else os.path.abspath(filename)


# --- components ---------------------------------------------------------------------------

class Component:
    """A decorated component function: a step factory inside a pipeline.

    ``spec`` is its ComponentSpec; ``fn`` the original function, callable directly so a
    step body can be unit-tested without a pipeline. The decorator validates everything at
    once but takes the code digest (an AST walk of the module) on the first use of ``spec``,
    so a step process that only runs the body never pays for it.
    """

    def __init__(self, fn: FunctionType, spec: ComponentSpec | Callable[[], ComponentSpec],
                 params: tuple[ParamSpec, ...] | None = None) -> None:
        self.fn = fn
        self._spec = spec if isinstance(spec, ComponentSpec) else None
        self._build = None if isinstance(spec, ComponentSpec) else spec
        self._params = params
        functools.update_wrapper(self, fn)

    @property
    def spec(self) -> ComponentSpec:
        if self._spec is None:
            self._spec = self._build()
        return self._spec

    def param(self, name: str) -> ParamSpec | None:
        """The declared parameter ``name`` (without building ``spec``), or None."""
        if self._spec is not None or self._params is None:
            return self.spec.param(name)
        return next((p for p in self._params if p.name == name), None)

    def __call__(self, *args: Any, **kwargs: Any) -> "StepHandle":
        return _add_step(self, self.spec.name, args, kwargs, _caller(sys._getframe(1)))

    def __repr__(self) -> str:
        return f"<component {self.spec.name} {self.spec.version}>"


@overload
def component(fn: F) -> Component: ...
@overload
def component(*, name: str | None = ..., version: str = ..., display_name: str | None = ...,
              description: str | None = ..., environment: Environment | None = ...,
              compute: Compute | str | None = ..., instances: int = ...,
              distribution: Distribution | None = ...,
              environment_variables: Mapping[str, str] | None = ...,
              reuse: bool = ...) -> Callable[[F], Component]: ...


def component(fn: FunctionType | None = None, *, name: str | None = None, version: str = "1",
              display_name: str | None = None, description: str | None = None,
              environment: Environment | None = None, compute: Compute | str | None = None,
              instances: int = 1, distribution: Distribution | None = None,
              environment_variables: Mapping[str, str] | None = None, reuse: bool = True):
    """Declare a component: a step whose body is the decorated function.

    Args:
        name: Azure ML component name (lowercase letters, digits, ``_``); the function's name
            by default.
        version: component version string.
        display_name: name shown in the Azure ML studio.
        description: one-line description (the docstring is kept separately and is not part
            of the digest).
        environment: the Azure ML environment the step runs in.
        compute: the compute target (a ``Compute`` or its name).
        instances: number of nodes (Azure ML ``resources.instance_count``).
        distribution: ``PyTorch(...)``, ``TensorFlow(...)`` or ``Mpi(...)`` (or Azure ML's
            dict form, ``{"type": "pytorch", "process_count_per_instance": 4}``).
        environment_variables: variables set for the step.
        reuse: False for a non-deterministic component whose results must never be reused.

    Returns:
        A ``Component``: call it inside a ``@pipeline`` to add a step.

    Example:
        >>> @component(version="1.3.0")
        ... def prepare(raw: Input["uri_folder"], examples: Output["uri_folder"],
        ...             seed: Param[int] = 13): ...
    """
    options = dict(name=name, version=version, display_name=display_name,
                   description=description, environment=environment, compute=compute,
                   instances=instances, distribution=distribution,
                   environment_variables=environment_variables, reuse=reuse)

    def wrap(f: FunctionType) -> Component:
        fields = _component_fields(f, options)
        return Component(f, lambda: ComponentSpec(**fields, code_digest=code_digest(f)),
                         fields["params"])

    return wrap(fn) if fn is not None else wrap


def _component_fields(fn: Any, o: dict[str, Any]) -> dict[str, Any]:
    """Every ComponentSpec field but the code digest, validated (raises DefinitionError)."""
    if not isinstance(fn, FunctionType):
        raise DefinitionError(f"@component decorates a function, not {type(fn).__name__} {fn!r}",
                              hint="put @component directly above a def")
    src = function_source(fn)
    loc = src.location()
    name = o["name"] if o["name"] is not None else fn.__name__
    if not isinstance(name, str) or not COMPONENT_NAME.match(name):
        _fail(f"component name {name!r} would be rejected by Azure ML (lowercase letters, digits "
              f"and underscores, starting with a letter)",
              f"pass name={_suggest_name(str(name))!r} to @component", loc)
    what = f"component {name!r}"
    version = o["version"]
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not version.strip():
        _fail(f"{what} has version {version!r}; a version is a non-empty string",
              'pass version="1.0.0"', loc)
    env = o["environment"]
    if env is not None and not isinstance(env, Environment):
        _fail(f"{what} has environment {env!r}, not an Environment",
              'pass environment=Environment("name", version="1")', loc)
    compute = o["compute"]
    if isinstance(compute, str):
        compute = Compute(compute)
    if compute is not None and not isinstance(compute, Compute):
        _fail(f"{what} has compute {compute!r}, not a Compute or a compute name",
              'pass compute=Compute("cpu-cluster")', loc)
    instances = o["instances"]
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        _fail(f"{what} has instances={instances!r}; the node count is an int >= 1",
              "pass instances=1 or more", loc)
    dist = o["distribution"]
    if isinstance(dist, (str, Mapping)):
        try:
            dist = as_distribution(dist)
        except (TypeError, ValueError) as exc:
            _fail(f"{what} has distribution {dist!r}: {exc}",
                  "pass distribution=PyTorch(processes_per_node=N)", loc)
    if dist is not None and not isinstance(dist, Distribution):
        _fail(f"{what} has distribution {dist!r}, not PyTorch(...), TensorFlow(...) or Mpi(...)",
              "pass distribution=PyTorch(processes_per_node=N)", loc)
    env_vars = o["environment_variables"] or {}
    if not isinstance(env_vars, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        _fail(f"{what} has environment_variables {env_vars!r}; use a dict of str to str",
              'pass environment_variables={"NAME": "value"}', loc)
    inputs, outputs, params = read_component_signature(fn, what, src)
    return dict(
        name=name, version=version, inputs=inputs, outputs=outputs, params=params,
        display_name=o["display_name"],
        description=o["description"], environment=env, compute=compute, instances=instances,
        distribution=dist, environment_variables=tuple(sorted(env_vars.items())),
        reuse=bool(o["reuse"]), doc=inspect.getdoc(fn), location=loc,
        function=f"{fn.__module__}:{fn.__qualname__}")


# --- tracing ------------------------------------------------------------------------------

class _Trace:
    __slots__ = ("pipeline", "builders")

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self.builders: list[_StepBuilder] = []


_TRACE: contextvars.ContextVar[_Trace | None] = contextvars.ContextVar("mlpipe_trace", default=None)


class _StepBuilder:
    __slots__ = ("target", "base", "values", "location", "name", "explicit", "trace")

    def __init__(self, target: Any, base: str, values: dict[str, Any], location: Location,
                 trace: _Trace) -> None:
        self.target = target
        self.base = base
        self.values = values
        self.location = location
        self.name: str | None = None
        self.explicit = False
        self.trace = trace

    def output_names(self) -> tuple[str, ...]:
        if isinstance(self.target, Component):
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

    trace: _Trace
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

    def __iter__(self):
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
            _fail(f"step name {name!r} would be rejected by Azure ML (lowercase letters, digits "
                  f"and underscores, not starting with a digit)",
                  f"use .named({_suggest_name(str(name))!r})", _caller(sys._getframe(1)))
        self._builder.name = name
        self._builder.explicit = True
        return self

    def __repr__(self) -> str:
        return f"<step {self._builder.name or self._builder.base}>"


def _add_step(target: Any, label: str, args: tuple, kwargs: dict[str, Any],
              where: Location) -> StepHandle:
    trace = _TRACE.get()
    kind = "component" if isinstance(target, Component) else "pipeline"
    if trace is None:
        _fail(f"{kind} {label!r} was called outside a pipeline",
              f"call it inside a @pipeline function; to run the body directly, call "
              f"{target.fn.__name__}.fn(...)" if kind == "component" else
              f"call it inside another @pipeline function, or use {target.fn.__name__}.spec",
              where)
    if args:
        _fail(f"{kind} {label!r} was given {len(args)} positional argument(s); steps take "
              f"inputs and parameters by name", f"write {label}(name=value, ...)", where)
    values = {key: _binding_value(value, trace, label, key, where) for key, value in kwargs.items()}
    base = label if kind == "component" else _suggest_name(label)
    builder = _StepBuilder(target, base, values, where, trace)
    trace.builders.append(builder)
    return StepHandle(builder)


def _binding_value(value: Any, trace: _Trace, label: str, key: str, where: Location) -> Any:
    if isinstance(value, StepHandle):
        builder = value._builder
        names = builder.output_names()
        value = OutputRef(builder, names[0] if len(names) == 1 else "")
    if isinstance(value, OutputRef):
        if value.builder.trace is not trace:
            _fail(f"{label}({key}=...) is given an output of step "
                  f"{value.builder.base!r} from another pipeline", "pass outputs only between "
                  "steps of the same pipeline; give the other pipeline an output instead", where)
        return value
    if isinstance(value, InputRef):
        if value.trace is not trace:
            _fail(f"{label}({key}=...) is given input {value.name!r} of another pipeline",
                  "pass it into this pipeline as an input", where)
        return value
    if isinstance(value, Candidate):
        _fail(f"{label}({key}=...) is given a Candidate", "return the Candidate from the "
              "pipeline, and pass candidate.model to steps", where)
    try:
        return Literal(plain_value(value))
    except TypeError as exc:
        _fail(f"{label}({key}=...): {exc}", None, where)


# --- pipelines ----------------------------------------------------------------------------

class Candidate:
    """What a pipeline returns to register a model candidate when a run succeeds.

    Args:
        model: the output holding the trained model.
        evaluation: the output holding its evaluation report.
        name: the candidate's name; the pipeline's name by default.
    """

    __slots__ = ("model", "evaluation", "name")

    def __init__(self, model: Any, evaluation: Any = None, *, name: str | None = None) -> None:
        self.model = model
        self.evaluation = evaluation
        self.name = name

    def __repr__(self) -> str:
        return f"Candidate(model={self.model!r}, evaluation={self.evaluation!r})"


class Pipeline:
    """A decorated pipeline function. ``spec`` traces it (once) into a PipelineSpec.

    Called inside another pipeline, it becomes one (nested) step of that pipeline.
    """

    def __init__(self, fn: FunctionType, name: str, version: str | None,
                 description: str | None) -> None:
        self.fn = fn
        self.name = name
        self.version = version
        self.description = description
        self._spec: PipelineSpec | None = None
        self._building = False
        functools.update_wrapper(self, fn)

    @property
    def spec(self) -> PipelineSpec:
        if self._spec is None:
            if self._building:
                src = function_source(self.fn)
                _fail(f"pipeline {self.name!r} uses itself as a step", "a pipeline cannot "
                      "contain itself; factor the shared steps into another pipeline",
                      src.location())
            self._building = True
            try:
                self._spec = _trace_pipeline(self)
            finally:
                self._building = False
        return self._spec

    def __call__(self, *args: Any, **kwargs: Any) -> StepHandle:
        where = _caller(sys._getframe(1))
        if _TRACE.get() is not None:
            _ = self.spec  # build (and check for self-use) before wiring it in
        return _add_step(self, self.name, args, kwargs, where)

    def __repr__(self) -> str:
        return f"<pipeline {self.name}>"


def pipeline(fn: FunctionType | None = None, *, name: str | None = None,
             version: str | None = None, description: str | None = None):
    """Declare a pipeline: a function that wires components (or pipelines) together.

    The function's arguments are the pipeline's inputs (artifacts or parameters, annotated or
    inferred from use); it returns its outputs as a ``Candidate``, a dict of outputs, one
    output, a step, or None.

    Args:
        name: the pipeline's name (letters, digits, ``-`` and ``_``); the function's by default.
        version: optional version string.
        description: optional one-line description.

    Example:
        >>> @pipeline(name="defect-classifier")
        ... def defect_classifier(raw, split):
        ...     p = prepare(raw=raw, split=split)
        ...     return {"examples": p.examples}
    """
    def wrap(f: FunctionType) -> Pipeline:
        if not isinstance(f, FunctionType):
            raise DefinitionError(f"@pipeline decorates a function, not {type(f).__name__}",
                                  hint="put @pipeline directly above a def")
        pname = name if name is not None else f.__name__
        if not isinstance(pname, str) or not PIPELINE_NAME.match(pname):
            _fail(f"pipeline name {pname!r} would be rejected by Azure ML (letters, digits, '-' "
                  f"and '_', starting with a letter)",
                  f"pass name={_suggest_name(str(pname)).replace('_', '-')!r}",
                  function_source(f).location())
        return Pipeline(f, pname, None if version is None else str(version), description)

    return wrap(fn) if fn is not None else wrap


def _user_frame(exc: BaseException) -> Location | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not _absolute(f.filename).startswith(_MLPIPE_DIR)]
    if not frames:
        return None
    return Location(_absolute(frames[-1].filename), frames[-1].lineno or 0)


def _trace_pipeline(p: Pipeline) -> PipelineSpec:
    fn = p.fn
    src = function_source(fn)
    what = f"pipeline {p.name!r}"
    hints = type_hints(fn, what, src)
    trace = _Trace(p.name)
    placeholders: dict[str, InputRef] = {}
    declared: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            _fail(f"{what} takes {'*' if param.kind is param.VAR_POSITIONAL else '**'}{name}; "
                  f"a pipeline's inputs must each be named", "declare each input as its own "
                  "argument", src.location(name))
        placeholders[name] = InputRef(trace, name)
        marker = _marker(hints[name]) if name in hints else None
        if marker is not None and marker.problem:
            _fail(f"input {name!r} of {what}: {marker.problem}", None, src.location(name))
        declared[name] = marker
        if param.default is not inspect.Parameter.empty:
            try:
                defaults[name] = plain_value(param.default)
            except TypeError as exc:
                _fail(f"default of input {name!r} of {what}: {exc}", None, src.location(name))
    token = _TRACE.set(trace)
    try:
        result = fn(**placeholders)
    except MlpipeError:
        raise
    except Exception as exc:
        loc = _user_frame(exc) or src.location()
        raise DefinitionError(f"{what} raised {type(exc).__name__} while being traced: {exc}",
                              hint="a pipeline function only wires steps; run logic belongs "
                                   "in component bodies", file=loc.file if loc else None,
                              line=loc.line if loc else None) from exc
    finally:
        _TRACE.reset(token)
    _name_steps(trace)
    outputs, candidate = _pipeline_outputs(result, trace, what, src)
    steps = tuple(_step_spec(b) for b in trace.builders)
    inputs = tuple(_pipeline_input(n, declared[n], defaults, steps, src) for n in placeholders)
    return PipelineSpec(name=p.name, inputs=inputs, steps=steps, outputs=outputs,
                        version=p.version, description=p.description, candidate=candidate,
                        doc=inspect.getdoc(fn), location=src.location(),
                        function=f"{fn.__module__}:{fn.__qualname__}")


def _name_steps(trace: _Trace) -> None:
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
        return StepOutput(value.builder.name, value.port)
    if isinstance(value, InputRef):
        return PipelineInput(value.name)
    return value


def _step_spec(b: _StepBuilder) -> StepSpec:
    return StepSpec(name=b.name, target=b.target.spec,
                    bindings=tuple((k, _binding(v)) for k, v in b.values.items()),
                    location=b.location, explicit_name=b.explicit)


def _output_binding(value: Any, trace: _Trace, what: str, src: FunctionSource, label: str) -> Binding:
    if isinstance(value, StepHandle):
        names = value._builder.output_names()
        value = OutputRef(value._builder, names[0] if len(names) == 1 else "")
    if isinstance(value, OutputRef) and value.builder.trace is trace:
        return _binding(value)
    if isinstance(value, InputRef) and value.trace is trace:
        return _binding(value)
    _fail(f"{what} returns {value!r} as {label}; a pipeline output must be a step's output",
          "return step outputs such as step.model", src.location())


def _pipeline_outputs(result: Any, trace: _Trace, what: str, src: FunctionSource
                      ) -> tuple[tuple[tuple[str, Binding], ...], CandidateSpec | None]:
    if result is None:
        return (), None
    if isinstance(result, Candidate):
        outs = [("model", _output_binding(result.model, trace, what, src, "the candidate's model"))]
        if result.evaluation is not None:
            outs.append(("evaluation", _output_binding(result.evaluation, trace, what, src,
                                                       "the candidate's evaluation")))
        return tuple(outs), CandidateSpec("model", "evaluation" if result.evaluation is not None
                                          else None, result.name)
    if isinstance(result, StepHandle):
        b = result._builder
        return tuple((n, StepOutput(b.name, n)) for n in b.output_names()), None
    if isinstance(result, OutputRef):
        return ((result.port, _output_binding(result, trace, what, src, "its output")),), None
    if isinstance(result, Mapping):
        outs = []
        for key, value in result.items():
            if not isinstance(key, str) or not key.isidentifier():
                _fail(f"{what} returns an output named {key!r}; output names are identifiers",
                      "use names like model or report", src.location())
            outs.append((key, _output_binding(value, trace, what, src, f"output {key!r}")))
        return tuple(outs), None
    _fail(f"{what} returns {with_article(type(result).__name__)}; a pipeline returns a Candidate, a dict "
          f"of outputs, one output, a step, or None", "return {'name': step.output, ...}",
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


def _pipeline_input(name: str, marker: Any, defaults: dict[str, Any],
                    steps: tuple[StepSpec, ...], src: FunctionSource) -> PipelineInputSpec:
    has_default = name in defaults
    default = defaults.get(name)
    loc = src.location(name)
    common = dict(name=name, required=not has_default, default=default, location=loc)
    if isinstance(marker, PortMarker):
        port = PortSpec(name, marker.kind, marker.contract, optional=has_default)
        return PipelineInputSpec(role=InputRole.ARTIFACT, kind=marker.kind, port=port, **common)
    if isinstance(marker, ParamMarker):
        param = ParamSpec(name, param_type_of(marker.type), required=not has_default,
                          default=default, minimum=marker.minimum, maximum=marker.maximum,
                          choices=marker.choices,
                          enum_class=marker.type if isinstance(marker.type, enum.EnumMeta) else None)
        return PipelineInputSpec(role=InputRole.PARAM, param=param, **common)
    uses = _uses(name, steps)
    artifact_uses = [u for u in uses if isinstance(u, PortSpec) or (
        isinstance(u, PipelineInputSpec) and u.role is InputRole.ARTIFACT)]
    if artifact_uses:
        kind = next((u.kind for u in artifact_uses if u.kind is not None), None)
        return PipelineInputSpec(role=InputRole.ARTIFACT, kind=kind, **common)
    params = [u.param if isinstance(u, PipelineInputSpec) else u for u in uses
              if isinstance(u, ParamSpec) or (isinstance(u, PipelineInputSpec) and u.param)]
    if params:
        param = replace(params[0], name=name, required=not has_default,
                        default=default if has_default else None)
        return PipelineInputSpec(role=InputRole.PARAM, param=param, **common)
    role = InputRole.PARAM if has_default and not isinstance(default, str) else InputRole.ARTIFACT
    return PipelineInputSpec(role=role, **common)
