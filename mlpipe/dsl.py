"""The decorator DSL: ``@component`` and ``@pipeline``, and the objects they return.

A pipeline function is traced once (``mlpipe.tracing``), with placeholders for its inputs, into
a PipelineSpec. Decoration raises only for what makes a spec impossible; wiring problems are
left to checks.
"""
from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from types import FunctionType
from typing import Any, Generic, TypeVar, overload

from mlpipe.distribution import Distribution, as_distribution
from mlpipe.errors import DefinitionError, MlpipeError
from mlpipe.signature import marker_of, read_component_signature, type_hints
from mlpipe.source import FunctionSource, code_digest, function_source
from mlpipe.spec import (
    Binding,
    CandidateSpec,
    ComponentSpec,
    Compute,
    Environment,
    Location,
    ParamSpec,
    PipelineSpec,
    plain_value,
)
from mlpipe.tracing import (
    TRACE,
    InputRef,
    OutputRef,
    StepHandle,
    Trace,
    absolute,
    add_step,
    caller,
    fail,
    name_steps,
    output_binding,
    pipeline_input,
    pipeline_outputs,
    step_spec,
    suggest_name,
)

__all__ = ["COMPONENT_NAME", "PIPELINE_NAME", "Candidate", "Component", "OutputRef", "Pipeline",
           "StepHandle", "component", "pipeline"]

COMPONENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,254}$")
PIPELINE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,254}$")

F = TypeVar("F", bound=Callable[..., Any])
_MLPIPE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Candidate:
    """What a pipeline returns to register a model candidate when a run succeeds.

    Args:
        model: the output holding the trained model.
        evaluation: the output holding its evaluation report.
        name: the candidate's name; the pipeline's name by default.
    """

    __slots__ = ("evaluation", "model", "name")
    model: Any
    evaluation: Any
    name: str | None

    def __init__(self, model: Any, evaluation: Any = None, *, name: str | None = None) -> None:
        self.model = model
        self.evaluation = evaluation
        self.name = name

    def __repr__(self) -> str:
        return f"Candidate(model={self.model!r}, evaluation={self.evaluation!r})"

    def outputs(self, trace: Trace, what: str, src: FunctionSource
                ) -> tuple[tuple[tuple[str, Binding], ...], CandidateSpec]:
        """The pipeline outputs this candidate names, and its CandidateSpec."""
        outs = [("model", output_binding(self.model, trace, what, src, "the candidate's model"))]
        if self.evaluation is not None:
            outs.append(("evaluation", output_binding(self.evaluation, trace, what, src,
                                                      "the candidate's evaluation")))
        return tuple(outs), CandidateSpec("model", "evaluation" if self.evaluation is not None
                                          else None, self.name)


def _refuse_candidates(label: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                       where: Location) -> None:
    """A Candidate is what a pipeline returns, never a step's argument."""
    if TRACE.get() is None or args:
        return  # tracing reports a call outside a pipeline, or positional arguments, first
    for key, value in kwargs.items():
        if isinstance(value, Candidate):
            fail(f"{label}({key}=...) is given a Candidate", "return the Candidate from the "
                 "pipeline, and pass candidate.model to steps", where)


# --- components ---------------------------------------------------------------------------

class Component(Generic[F]):
    """A decorated component function: a step factory inside a pipeline.

    ``spec`` is its ComponentSpec; ``fn`` the original function (with its signature, for type
    checkers too), callable directly so a step body can be unit-tested without a pipeline.
    The decorator validates everything at once but takes the code digest (an AST walk of the
    module) on the first use of ``spec``, so a step process that only runs the body never
    pays for it.
    """

    def __init__(self, fn: F, spec: ComponentSpec | Callable[[], ComponentSpec],
                 params: tuple[ParamSpec, ...] | None = None,
                 fields: dict[str, Any] | None = None) -> None:
        self.fn: F = fn
        self._spec = spec if isinstance(spec, ComponentSpec) else None
        self._build = None if isinstance(spec, ComponentSpec) else spec
        self._params = params
        self._fields = fields
        functools.update_wrapper(self, fn)

    @property
    def spec(self) -> ComponentSpec:
        if self._spec is None:
            assert self._build is not None  # set whenever _spec is not
            self._spec = self._build()
        return self._spec

    def param(self, name: str) -> ParamSpec | None:
        """The declared parameter ``name`` (without building ``spec``), or None."""
        if self._spec is not None or self._params is None:
            return self.spec.param(name)
        return next((p for p in self._params if p.name == name), None)

    def declared(self, field: str) -> Any:
        """One declared ComponentSpec field (``inputs``, ``outputs``, ``distribution``...)
        without building ``spec`` (the step runtime reads its ports this way)."""
        if self._spec is not None or self._fields is None:
            return getattr(self.spec, field)
        return self._fields[field]

    def __call__(self, *args: Any, **kwargs: Any) -> "StepHandle":
        where = caller(sys._getframe(1))
        _refuse_candidates(self.spec.name, args, kwargs, where)
        return add_step(self, self.spec.name, args, kwargs, where)

    def __repr__(self) -> str:
        return f"<component {self.spec.name} {self.spec.version}>"


@overload
def component(fn: F) -> Component[F]: ...
@overload
def component(*, name: str | None = ..., version: str = ..., display_name: str | None = ...,
              description: str | None = ..., environment: Environment | None = ...,
              compute: Compute | str | None = ..., instances: int = ...,
              distribution: Distribution | None = ...,
              environment_variables: Mapping[str, str] | None = ...,
              reuse: bool = ..., reads: Sequence[str] = ...) -> Callable[[F], Component[F]]: ...


def component(fn: F | None = None, *, name: str | None = None, version: str = "1",
              display_name: str | None = None, description: str | None = None,
              environment: Environment | None = None, compute: Compute | str | None = None,
              instances: int = 1, distribution: Distribution | None = None,
              environment_variables: Mapping[str, str] | None = None, reuse: bool = True,
              reads: Sequence[str] = ()) -> Component[F] | Callable[[F], Component[F]]:
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
        reads: files or folders the body reads on purpose outside its declared inputs and
            that never change under the same path (a model snapshot named by its revision):
            ``~`` and ``$VARS`` are expanded and relative paths are taken from the step's
            working folder, at run time. Reads under them are recorded but raise no MP804,
            and a step is reused without re-hashing them (docs/local.md, "Reads outside the
            inputs").

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
                   environment_variables=environment_variables, reuse=reuse, reads=reads)

    def wrap(f: F) -> Component[F]:
        fields = _component_fields(f, options)
        return Component(f, lambda: ComponentSpec(**fields, code_digest=code_digest(f)),
                         fields["params"], fields)

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
        fail(f"component name {name!r} would be rejected by Azure ML (lowercase letters, digits "
              f"and underscores, starting with a letter)",
              f"pass name={suggest_name(str(name))!r} to @component", loc)
    what = f"component {name!r}"
    version = o["version"]
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not version.strip():
        fail(f"{what} has version {version!r}; a version is a non-empty string",
              'pass version="1.0.0"', loc)
    env = o["environment"]
    if env is not None and not isinstance(env, Environment):
        fail(f"{what} has environment {env!r}, not an Environment",
              'pass environment=Environment("name", version="1")', loc)
    compute = o["compute"]
    if isinstance(compute, str):
        compute = Compute(compute)
    if compute is not None and not isinstance(compute, Compute):
        fail(f"{what} has compute {compute!r}, not a Compute or a compute name",
              'pass compute=Compute("cpu-cluster")', loc)
    instances = o["instances"]
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        fail(f"{what} has instances={instances!r}; the node count is an int >= 1",
              "pass instances=1 or more", loc)
    dist = o["distribution"]
    if isinstance(dist, (str, Mapping)):
        try:
            dist = as_distribution(dist)
        except (TypeError, ValueError) as exc:
            fail(f"{what} has distribution {dist!r}: {exc}",
                  "pass distribution=PyTorch(processes_per_node=N)", loc)
    if dist is not None and not isinstance(dist, Distribution):
        fail(f"{what} has distribution {dist!r}, not PyTorch(...), TensorFlow(...) or Mpi(...)",
              "pass distribution=PyTorch(processes_per_node=N)", loc)
    env_vars = o["environment_variables"] or {}
    if not isinstance(env_vars, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        fail(f"{what} has environment_variables {env_vars!r}; use a dict of str to str",
              'pass environment_variables={"NAME": "value"}', loc)
    reads = o["reads"]
    if isinstance(reads, str) or not isinstance(reads, (list, tuple)) or not all(
            isinstance(r, str) and r.strip() for r in reads):
        fail(f"{what} has reads={reads!r}; declare a list of paths (files or folders)",
             'pass reads=["~/.cache/huggingface/hub/models--bert-base-uncased"]', loc)
    inputs, outputs, params = read_component_signature(fn, what, src)
    return dict(
        name=name, version=version, inputs=inputs, outputs=outputs, params=params,
        display_name=o["display_name"],
        description=o["description"], environment=env, compute=compute, instances=instances,
        distribution=dist, environment_variables=tuple(sorted(env_vars.items())),
        reuse=bool(o["reuse"]), reads=tuple(dict.fromkeys(reads)), doc=inspect.getdoc(fn),
        location=loc,
        function=f"{fn.__module__}:{fn.__qualname__}")


class Pipeline:
    """A decorated pipeline function. ``spec`` traces it (once) into a PipelineSpec.

    Called inside another pipeline, it becomes one (nested) step of that pipeline.
    """

    def __init__(self, fn: Callable[..., Any], name: str, version: str | None,
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
                fail(f"pipeline {self.name!r} uses itself as a step", "a pipeline cannot "
                      "contain itself; factor the shared steps into another pipeline",
                      src.location())
            self._building = True
            try:
                self._spec = _trace_pipeline(self)
            finally:
                self._building = False
        return self._spec

    def __call__(self, *args: Any, **kwargs: Any) -> StepHandle:
        where = caller(sys._getframe(1))
        if TRACE.get() is not None:
            _ = self.spec  # build (and check for self-use) before wiring it in
        _refuse_candidates(self.name, args, kwargs, where)
        return add_step(self, self.name, args, kwargs, where)

    def __repr__(self) -> str:
        return f"<pipeline {self.name}>"


@overload
def pipeline(fn: Callable[..., Any]) -> Pipeline: ...
@overload
def pipeline(*, name: str | None = ..., version: str | None = ...,
             description: str | None = ...) -> Callable[[Callable[..., Any]], Pipeline]: ...


def pipeline(fn: Callable[..., Any] | None = None, *, name: str | None = None,
             version: str | None = None,
             description: str | None = None) -> Pipeline | Callable[[Callable[..., Any]], Pipeline]:
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
    def wrap(f: Callable[..., Any]) -> Pipeline:
        if not isinstance(f, FunctionType):
            raise DefinitionError(f"@pipeline decorates a function, not {type(f).__name__}",
                                  hint="put @pipeline directly above a def")
        pname = name if name is not None else f.__name__
        if not isinstance(pname, str) or not PIPELINE_NAME.match(pname):
            fail(f"pipeline name {pname!r} would be rejected by Azure ML (letters, digits, '-' "
                  f"and '_', starting with a letter)",
                  f"pass name={suggest_name(str(pname)).replace('_', '-')!r}",
                  function_source(f).location())
        return Pipeline(f, pname, None if version is None else str(version), description)

    return wrap(fn) if fn is not None else wrap


def _user_frame(exc: BaseException) -> Location | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not absolute(f.filename).startswith(_MLPIPE_DIR)]
    if not frames:
        return None
    return Location(absolute(frames[-1].filename), frames[-1].lineno or 0)


def _trace_pipeline(p: Pipeline) -> PipelineSpec:
    fn = p.fn
    src = function_source(fn)
    what = f"pipeline {p.name!r}"
    hints = type_hints(fn, what, src)
    trace = Trace(p.name)
    placeholders: dict[str, InputRef] = {}
    declared: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            fail(f"{what} takes {'*' if param.kind is param.VAR_POSITIONAL else '**'}{name}; "
                  f"a pipeline's inputs must each be named", "declare each input as its own "
                  "argument", src.location(name))
        placeholders[name] = InputRef(trace, name)
        marker = marker_of(hints[name]) if name in hints else None
        if marker is not None and marker.problem:
            fail(f"input {name!r} of {what}: {marker.problem}", None, src.location(name))
        declared[name] = marker
        if param.default is not inspect.Parameter.empty:
            try:
                defaults[name] = plain_value(param.default)
            except TypeError as exc:
                fail(f"default of input {name!r} of {what}: {exc}", None, src.location(name))
    token = TRACE.set(trace)
    try:
        result = fn(**placeholders)
    except MlpipeError:
        raise
    except (SystemExit, Exception) as exc:
        loc = _user_frame(exc) or src.location()
        if isinstance(exc, SystemExit):
            message, hint = (f"{what} called sys.exit({exc.code!r}) while being traced",
                             "a pipeline function only wires steps; do not exit from it")
        else:
            message, hint = (f"{what} raised {type(exc).__name__} while being traced: {exc}",
                             "a pipeline function only wires steps; run logic belongs in "
                             "component bodies")
        raise DefinitionError(message, hint=hint, file=loc.file if loc else None,
                              line=loc.line if loc else None) from exc
    finally:
        TRACE.reset(token)
    name_steps(trace)
    if isinstance(result, Candidate):
        outputs, candidate = result.outputs(trace, what, src)
    else:
        outputs, candidate = pipeline_outputs(result, trace, what, src)
    steps = tuple(step_spec(b) for b in trace.builders)
    inputs = tuple(pipeline_input(n, declared[n], defaults, steps, src) for n in placeholders)
    return PipelineSpec(name=p.name, inputs=inputs, steps=steps, outputs=outputs,
                        version=p.version, description=p.description, candidate=candidate,
                        doc=inspect.getdoc(fn), location=src.location(),
                        function=f"{fn.__module__}:{fn.__qualname__}")


