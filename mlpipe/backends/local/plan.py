"""A local run's plan: one value holding everything the run needs, built and validated
completely before anything runs or is recorded (the checks' findings, the resolved inputs and
parameters, the secrets, step inputs given as paths, each step's parameters and launched
topology, each step's interpreter); the executor then runs it (:mod:`.executor`).

Every refusal here comes before the evidence store is opened: a plan that cannot be built
leaves nothing recorded.
"""
from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TextIO

from mlpipe.backends.local import inputs as inputs_mod
from mlpipe.backends.local import isolation
from mlpipe.backends.local.localscale import scaled_components
from mlpipe.backends.local.progress import Progress
from mlpipe.checks import run_checks
from mlpipe.diagnostics import Diagnostic, refuse_check_errors
from mlpipe.errors import UsageError
from mlpipe.evidence.storage.config import StoreConfig
from mlpipe.graph import FromInput, FromLiteral, Graph, StepNode
from mlpipe.paths import display_path
from mlpipe.spec import ComponentSpec, ParamType, declared_topology


@dataclass(frozen=True, slots=True)
class StepPlan:
    """One step as it is launched here.

    Attributes:
        node: the step in the compiled graph (its declared component).
        component: the component launched: ``--local-scale``'s smaller one, else the declared.
        params: parameter -> value (a literal, a pipeline parameter's value, or the default).
        secrets: which of ``params`` are secrets: declared ``Param[Secret]``, or fed by a
            pipeline parameter that is one.
        declared: the declared topology (None for a step that is not distributed).
        launched: the topology launched here when ``--local-scale`` changed it, else None.
    """

    node: StepNode
    component: ComponentSpec
    params: Mapping[str, Any]
    secrets: frozenset[str]
    declared: dict[str, Any] | None
    launched: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class RunPlan:
    """A local run, resolved and validated, before anything runs.

    Attributes:
        graph: the compiled pipeline.
        diagnostics: what the checks (and the caller's ``diagnostics``) found, less the
            ignored codes; no error among them. Recorded with the run.
        ignored: the codes set aside (``--ignore``), sorted.
        paths: pipeline input -> absolute local path.
        values: pipeline parameter -> value, defaults filled in.
        secret_inputs: the pipeline parameters declared ``Param[Secret]``.
        literals: (step, port) -> the local path of a step input written as a path in the
            pipeline (or given with ``--input STEP.PORT=PATH``).
        overrides: the ``STEP.PORT`` inputs given, sorted.
        steps: step id -> its :class:`StepPlan`, in the graph's order.
        interpreters: each step's interpreter (isolated environments already built).
    """

    graph: Graph
    diagnostics: tuple[Diagnostic, ...]
    ignored: tuple[str, ...]
    paths: Mapping[str, str]
    values: Mapping[str, Any]
    secret_inputs: frozenset[str]
    literals: Mapping[tuple[str, str], str]
    overrides: tuple[str, ...]
    steps: Mapping[str, StepPlan]
    interpreters: isolation.Plan

    @property
    def scaled(self) -> dict[str, ComponentSpec]:
        """Step id -> the component ``--local-scale`` launches in place of the declared one."""
        return {sid: s.component for sid, s in self.steps.items() if s.launched is not None}

    def secret_values(self) -> dict[str, str]:
        """The pipeline's secret parameters given as text: name -> value (masked in logs)."""
        return {name: value for name in self.secret_inputs
                if isinstance(value := self.values.get(name), str)}


def plan_run(graph: Graph, *, inputs: dict[str, str], params: dict[str, Any],
             diagnostics: Sequence[Diagnostic], ignore: Collection[str], location: StoreConfig,
             local_scale: dict[str, tuple[int, int] | str], isolate: bool,
             stream: TextIO | None) -> RunPlan:
    """Check, resolve and validate a local run: the arguments of
    :meth:`LocalExecutor.submit <mlpipe.backends.local.executor.LocalExecutor.submit>`.

    Raises:
        ChecksFailed: check errors.
        UsageError: a step that runs only on Azure ML, bad inputs or parameters, secrets too
            large, a bad ``--local-scale``, an evidence folder that is a file.
        ContractError: an input's data does not match a contract a step requires of it.
        EnvironmentBuildFailed: with ``isolate``, an environment could not be built.
    """
    found = [d for d in [*diagnostics, *run_checks(graph)] if d.code not in ignore]
    refuse_check_errors(found, "run")
    _refuse_azure_only(graph)
    pipeline_inputs, overrides = inputs_mod.split_step_inputs(inputs)
    paths, values = inputs_mod.resolve(graph.spec, pipeline_inputs, params)
    _refuse_oversized_secrets(graph, values)
    literals = inputs_mod.literal_paths(graph, overrides)
    inputs_mod.check_input_contracts(graph, paths)
    scaled = scaled_components(graph, local_scale)
    _refuse_files_in_place_of_folders(location)
    interpreters = isolation.plan(
        {sid: node.component for sid, node in graph.steps.items()}, isolate=isolate,
        root=location.environments, note=Progress(0, stream).note)
    secret_inputs = frozenset(i.name for i in graph.spec.inputs if i.secret)
    steps = {sid: _step_plan(node, values, secret_inputs, scaled.get(sid))
             for sid, node in graph.steps.items()}
    return RunPlan(graph, tuple(found), tuple(sorted(set(ignore))), MappingProxyType(paths),
                   MappingProxyType(values), secret_inputs, MappingProxyType(literals),
                   tuple(sorted(overrides)), MappingProxyType(steps), interpreters)


def _step_plan(node: StepNode, values: dict[str, Any], secret_inputs: frozenset[str],
               scaled: ComponentSpec | None) -> StepPlan:
    """The step's parameter values and which are secrets, and what it launches."""
    params: dict[str, Any] = {}
    secrets: set[str] = set()
    for param in node.component.params:
        endpoint = node.bindings.get(param.name)
        if param.type is ParamType.SECRET:
            secrets.add(param.name)
        if isinstance(endpoint, FromLiteral):
            params[param.name] = endpoint.value
        elif isinstance(endpoint, FromInput) and endpoint.name in values:
            params[param.name] = values[endpoint.name]
            if endpoint.name in secret_inputs:
                secrets.add(param.name)
        else:
            params[param.name] = param.default
    return StepPlan(node, scaled or node.component, MappingProxyType(params),
                    frozenset(secrets), declared_topology(node.component),
                    None if scaled is None else declared_topology(scaled))


def _refuse_files_in_place_of_folders(location: StoreConfig) -> None:
    """The evidence folders a run writes must be folders: ``artifacts`` left as a file (a
    copy gone wrong) would otherwise fail the run after its first step."""
    for path in (location.home, location.artifacts, location.logs, location.work):
        if path.exists() and not path.is_dir():
            shown = display_path(str(path))
            raise UsageError(f"{shown} is a file, but mlpipe keeps a folder there",
                             hint=f"move the file away (mv {shown} {shown}.bak) and run again")


#: What a step's secrets may weigh together (UTF-8): they travel in one environment variable,
#: and Linux refuses a variable of 128 KiB or more.
SECRETS_LIMIT = 96 * 1024


def _refuse_oversized_secrets(graph: Graph, values: dict[str, Any]) -> None:
    """Refuse, before anything is recorded, secrets too large to hand to a step."""
    given = {i.name: values[i.name] for i in graph.spec.inputs
             if i.secret and isinstance(values.get(i.name), str)}
    size = len(json.dumps(given, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > SECRETS_LIMIT:
        raise UsageError(f"the secrets given ({', '.join(sorted(given))}) weigh {size // 1024} "
                         f"KiB; a step gets its secrets in one environment variable, and "
                         f"{SECRETS_LIMIT // 1024} KiB is the most mlpipe passes there",
                         hint="give the step a smaller secret, e.g. a key or token that "
                              "unlocks the large one at run time")


def _refuse_azure_only(graph: Graph) -> None:
    """Refuse, before anything is recorded, a pipeline with steps that run only on Azure ML."""
    only = [f"{node.id!r} ({node.component.azure_only})" for node in graph.step_nodes()
            if node.component.azure_only is not None]
    spec = graph.spec
    if only and len(spec.steps) == 1 and spec.origin is not None \
            and "jobs" not in spec.origin.document:  # a job file holding one job
        step = spec.steps[0]
        raise UsageError(f"{step.name!r} runs only on Azure ML, not here: it is "
                         f"{step.target.azure_only}",
                         hint="submit it with --target azure, or write it for az ml job create "
                              "with mlpipe compile FILE --out DIR (both check it first)")
    if only:
        raise UsageError(f"pipeline {graph.spec.name!r} cannot run here: step"
                         f"{'s' if len(only) > 1 else ''} {', '.join(only)} run"
                         f"{'' if len(only) > 1 else 's'} only on Azure ML",
                         hint="submit it with --target azure (mlpipe checks and exports every "
                              "step), or replace those steps with command jobs to run it here")
