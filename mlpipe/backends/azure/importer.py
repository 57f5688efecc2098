"""Import: an Azure ML pipeline job YAML (CLI v2) becomes a PipelineSpec built from spec classes.

Every job kind Azure ML accepts is read: command and pipeline jobs (which also run here) and
sweep, parallel, Spark, AutoML, data transfer, import and control-flow jobs, and registered
components (which mlpipe checks and exports but which run only on Azure ML). Each document
read is kept as its spec's ``origin``, so the export writes back every field mlpipe does not
model. The spec may be wrong (cycles, dangling bindings, wrong port names): that is for the
checks to report. The importer reports only what is YAML-specific (MP6xx diagnostics) and
raises one LoadError listing everything it cannot read. Never imports azure-ai-ml.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import nodes, vocabulary, yamlfile
from mlpipe.backends.azure.candidate_tags import candidate_of
from mlpipe.backends.azure.component_yaml import (
    Problems,
    Where,
    named_entries,
    read_azure_only_component,
    read_command_component,
    read_component,
)
from mlpipe.backends.azure.job_bindings import (
    BODY,
    input_binding,
    output_bindings,
    settle_sibling_kinds,
)
from mlpipe.backends.azure.job_settings import job_compute, with_job_settings
from mlpipe.backends.azure.jobkinds import KINDS, REFUSED, job_kind_named
from mlpipe.backends.azure.pipeline_inputs import read_pipeline_input
from mlpipe.backends.azure.singlejob import single_job_pipeline
from mlpipe.backends.azure.standalone import (
    search_space_problems,
    standalone_pipeline,
    with_sampled,
)
from mlpipe.codes import (
    CODE_FOLDER_MISSING,
    JOB_TYPE_MISSPELLED,
    PIPELINE_OUTPUT_NOT_PRODUCED,
)
from mlpipe.diagnostics import Diagnostic
from mlpipe.digests import digest_of, script_code_digest
from mlpipe.errors import LoadError
from mlpipe.paths import cloud_reference, display_path, lexical
from mlpipe.references import REGISTERED_COMPONENT
from mlpipe.spec import (
    Binding,
    ComponentSpec,
    Compute,
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

_Target = TypeVar("_Target", bound=ComponentSpec | PipelineSpec)


def _command_job(reader: Any, doc: Any, path: Path) -> PipelineSpec:
    return single_job_pipeline(doc, path, reader.problems)


#: How a job file holding one job of a kind at its top is read (the kinds the table marks
#: ``standalone``): ``(reader, doc, path)`` -> PipelineSpec.
STANDALONE_READERS: dict[str, Callable[[Any, Any, Path], PipelineSpec]] = {
    "command": _command_job, "sweep": standalone_pipeline, "automl": standalone_pipeline,
}
#: The checks of one job of a kind in a pipeline (the kinds the table marks ``checked``):
#: ``(name, node, component, where)`` -> diagnostics.
KIND_CHECKS: dict[str, Callable[[str, Any, ComponentSpec, Any], Iterable[Diagnostic]]] = {
    "sweep": search_space_problems,
}


@dataclass(slots=True)
class ImportedPipeline:
    """A pipeline read from YAML: its spec and the YAML-specific diagnostics (MP6xx)."""

    spec: PipelineSpec
    diagnostics: list[Diagnostic] = field(default_factory=list)


def load_pipeline_yaml(path: str) -> ImportedPipeline:
    """The PipelineSpec of an Azure ML pipeline job (or pipeline component) YAML file, or of a
    single command job (``type: command``), which becomes a one-step pipeline.

    Args:
        path: a ``pipeline.yml`` in the CLI v2 format; component references are read
            relative to it.

    Returns:
        The spec and the YAML-specific diagnostics; run ``check_pipeline`` for the rest.

    Raises:
        LoadError: unreadable YAML, or what mlpipe cannot read (all of it at once, each with
            its file, line and field).

    Example:
        >>> imported = load_pipeline_yaml("build/pipeline.yml")
        >>> graph, diagnostics = check_pipeline(imported.spec)
    """
    diagnostics: list[Diagnostic] = []
    reader = _Reader(diagnostics)
    file = Path(path)
    doc = yamlfile.load(file, "an Azure ML pipeline job YAML")
    flow = vocabulary.prompt_flow(doc, file.name)
    if flow is not None:
        raise LoadError(f"{display_path(str(file))} is {flow}, not an Azure ML job: mlpipe "
                        f"reads a flow as a node of a pipeline job (component: ./flow.dag.yaml), "
                        f"which it checks and exports as written and which runs only on Azure ML",
                        hint="run it with prompt flow (pf run create --file ...), or give the "
                             "pipeline job that uses it", file=display_path(str(file)))
    kind = vocabulary.job_kind(doc)
    spelling = vocabulary.type_spelling(doc)
    if spelling is not None:
        diagnostics.append(Diagnostic.of(
            JOB_TYPE_MISSPELLED, f"{spelling}; mlpipe reads it as {kind}",
            hint=f"write type: {kind} (in lower case)", file=display_path(str(file)),
            line=doc.line_of("type") if isinstance(doc, yamlfile.Mapping) else None))
    entry = job_kind_named(kind)
    if entry is not None and entry.standalone:
        spec = STANDALONE_READERS[entry.name](reader, doc, file)
    else:
        spec = reader.pipeline(file, doc, stack=())
    reader.problems.raise_any()
    diagnostics.extend(_missing_code(spec))
    return ImportedPipeline(spec, diagnostics)


def _missing_code(spec: PipelineSpec) -> list[Diagnostic]:
    """MP114 for each component whose local ``code:`` is not there: azure-ai-ml refuses the
    job ("Can't find directory or file"), and a local run has nothing to run."""
    found: list[Diagnostic] = []
    seen: set[tuple[str, str]] = set()

    def walk(pipeline: PipelineSpec) -> None:
        for step in pipeline.steps:
            target = step.target
            if isinstance(target, PipelineSpec):
                walk(target)
                continue
            code = target.code
            if code is None or cloud_reference(code) is not None or os.path.exists(code):
                continue
            loc = target.location or step.location
            key = (code, loc.file if loc else "")
            if key in seen:
                continue
            seen.add(key)
            found.append(Diagnostic.of(
                CODE_FOLDER_MISSING,
                f"step {step.name!r} runs code from {display_path(code)}, which does not exist: "
                f"azure-ai-ml refuses the job (\"Can't find directory or file\") and there is "
                f"nothing to run here",
                hint="point code: at the folder (or file) that holds the script, relative to "
                     "the YAML file that names it", step=step.name,
                file=loc.file if loc else None, line=loc.line if loc else None))

    walk(spec)
    return found



class _Reader:
    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        self.problems = Problems()
        self.components: dict[Path, ComponentSpec | PipelineSpec] = {}

    # --- a pipeline ---------------------------------------------------------------------------

    def pipeline(self, path: Path, doc: Any, stack: tuple[Path, ...],
                 keep_origin: bool = True) -> PipelineSpec:
        where = Where(str(path))
        kind = vocabulary.job_kind(doc)
        if kind == "pipeline" and "jobs" not in doc and doc.get("component") is not None:
            return self.job_of_component(path, doc, stack)
        if kind not in vocabulary.JOB_KINDS and "type" in doc:
            self.problems.add(where, doc, "type",
                              f"{path.name} is not an Azure ML job file: its type "
                              f"{doc.get('type')!r} is no job type azure-ai-ml reads",
                              hint=f"give a job file of one of the types "
                                   f"{', '.join(vocabulary.JOB_KINDS)} (a REST response of "
                                   f"the jobs API is not one)")
            self.problems.raise_any()
        if kind != "pipeline" or not isinstance(doc.get("jobs"), dict):
            self.problems.add(where, doc, "type" if "type" in doc else "jobs",
                              f"{path.name} is not a pipeline job (type: {kind!r}, "
                              f"{'no' if 'jobs' not in doc else 'malformed'} jobs)",
                              hint="give a pipeline job YAML with type: pipeline and jobs:, a "
                                   "command job, or a Python file with a @pipeline")
            self.problems.raise_any()
        settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
        default_compute = job_compute(settings.get("default_compute") or doc.get("compute"))
        base = str(lexical(path).parent)
        declared_inputs = named_entries(where, self.problems, doc, "inputs", "inputs", "input")
        inputs = []
        for name in declared_inputs:
            found = read_pipeline_input(where, self.problems, declared_inputs, name, base)
            if found is not None:
                inputs.append(found)
        kinds = {i.name: i for i in inputs}
        declared_outputs = named_entries(where, self.problems, doc, "outputs", "outputs",
                                         "output")
        output_types: dict[str, AssetType] = {}
        for name in declared_outputs:
            entry = declared_outputs[name]
            kind_text = entry.get("type") if isinstance(entry, dict) else None
            output_types[name] = vocabulary.ASSET_TYPES.get(str(kind_text), AssetType.URI_FOLDER)
        jobs = named_entries(where, self.problems, doc, "jobs", "jobs", "job")
        steps: dict[str, StepSpec] = {}
        produced: dict[str, StepOutput] = {}
        pending: dict[str, dict[str, tuple[str, str]]] = {}
        for name in jobs:
            step = self.step(where, jobs, name, path, stack, default_compute, kinds,
                             output_types, produced, pending)
            if step is not None:
                steps[name] = step
        settle_sibling_kinds(steps, pending)
        outputs: dict[str, Binding] = {}
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
        candidate = None if stack else candidate_of(
            doc.get("tags"), list(outputs), where.file,
            doc.line_of("tags") if isinstance(doc, yamlfile.Mapping) else None)
        return PipelineSpec(
            name=str(doc.get("display_name") or doc.get("name") or path.stem),
            inputs=tuple(inputs), steps=tuple(steps.values()), outputs=tuple(outputs.items()),
            candidate=candidate,
            version=None if doc.get("version") is None else str(doc["version"]),
            description=doc.get("description"), location=Location(where.file, 1),
            function=str(path),
            origin=Origin.of(str(lexical(path)), doc) if keep_origin else None)

    def job_of_component(self, path: Path, doc: Any, stack: tuple[Path, ...]) -> PipelineSpec:
        """A pipeline job that runs a pipeline component (``component: ./pipeline.yml`` in
        place of ``jobs``): one step, the component, fed by the job's inputs."""
        where = Where(str(path))
        settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
        default_compute = job_compute(settings.get("default_compute") or doc.get("compute"))
        given = named_entries(where, self.problems, doc, "inputs", "inputs", "input")
        base = str(lexical(path).parent)
        node = {"type": "pipeline", "component": doc["component"], "inputs": {
            name: f"${{{{parent.inputs.{name}}}}}" for name in given}}
        inputs = {}
        for name in given:
            found = read_pipeline_input(where, self.problems, given, name, base)
            if found is not None:
                inputs[name] = found
        produced: dict[str, StepOutput] = {}
        target = self.target(where, yamlfile.Mapping(node), "component", "pipeline", path, stack,
                             inputs, {}, [], "component", {})
        if target is None:
            self.problems.raise_any()
            raise AssertionError("target() returns None only after adding a problem")
        name = _step_name(getattr(target, "name", "component"))
        if isinstance(target, ComponentSpec):
            target = with_job_settings(where, self.problems, node, "pipeline", target,
                                       default_compute, "component")
        for out in (target.outputs if isinstance(target, ComponentSpec)
                    else [PortSpec(n, AssetType.URI_FOLDER) for n, _ in target.outputs]):
            produced[out.name] = StepOutput(name, out.name)
        step = StepSpec(name, target, tuple((n, PipelineInput(n)) for n in inputs),
                        where.location(doc, "component"), explicit_name=True)
        return PipelineSpec(
            name=str(doc.get("display_name") or doc.get("name") or path.stem),
            inputs=tuple(inputs.values()), steps=(step,), outputs=tuple(produced.items()),
            description=doc.get("description"), location=Location(where.file, 1),
            function=str(path), origin=Origin.of(str(lexical(path)), doc))

    # --- a job --------------------------------------------------------------------------------

    def step(self, where: Where, jobs: Any, name: str, path: Path, stack: tuple[Path, ...],
             default_compute: Compute | None, inputs: dict[str, PipelineInputSpec],
             output_types: dict[str, AssetType], produced: dict[str, StepOutput],
             pending: dict[str, dict[str, tuple[str, str]]]) -> StepSpec | None:
        node = jobs[name]
        field = f"jobs.{name}"
        if not isinstance(node, dict):
            self.problems.add(where, jobs, name, f"is {node!r}, not a job mapping", field=field)
            return None
        kind = str(node.get("type", "command"))
        entry = job_kind_named(kind)
        if entry is None:
            self.problems.add(where, node, "type", f"job {name!r} has type {kind!r}, " + (
                f"which mlpipe does not read: {REFUSED[kind]}" if kind in REFUSED else
                "which is not an Azure ML job type"),
                              hint=f"use one of {', '.join(vocabulary.JOB_KINDS)}",
                              field=f"{field}.type")
            return None
        for key, what in (("inputs", "input"), ("outputs", "output")):
            if node.get(key) is not None:
                node[key] = named_entries(where, self.problems, node, key, f"{field}.{key}",
                                          what)
        loc = where.location(jobs, name)
        given = [g for _, _, g in nodes.given_inputs(node, kind)]
        target = self.target(where, node, name, kind, path, stack, inputs, output_types, given,
                             field, pending)
        if target is None:
            return None
        if entry.checked and isinstance(target, ComponentSpec):
            self.diagnostics.extend(KIND_CHECKS[entry.name](name, node, target, where))
        if isinstance(target, ComponentSpec):
            target = with_job_settings(where, self.problems, node, kind, target,
                                       default_compute, field)
            transfer = tuple(ParamSpec(g.key, ParamType.STR, required=False) for g in given
                             if "." in g.key and target.param(g.key) is None)
            if transfer:  # a data transfer's source/sink values, beside its component's inputs
                target = dataclasses.replace(target, params=target.params + transfer)
        bindings: list[tuple[str, Binding]] = []
        base = str(lexical(path).parent)
        for holder, key, g in nodes.given_inputs(node, kind):
            binding = input_binding(self.diagnostics, where, holder, key, g,
                                    f"{field}.inputs.{key}", target, base)
            if binding is not None:
                bindings.append((g.key, binding))
        output_bindings(self.diagnostics, where, node, name, field, produced)
        return StepSpec(name, target, tuple(bindings), loc, explicit_name=True)

    def target(self, where: Where, node: Any, name: str, kind: str, path: Path,
               stack: tuple[Path, ...], inputs: dict[str, PipelineInputSpec],
               output_types: dict[str, AssetType], given: list[nodes.Given], field: str,
               pending: dict[str, dict[str, tuple[str, str]]]
               ) -> ComponentSpec | PipelineSpec | None:
        """The component (or nested pipeline) a job runs."""
        key = KINDS[kind].reference
        ref = node.get(key)
        if KINDS[kind].implied(referenced=ref is not None):
            return self.implied(node, name, kind, path, inputs, output_types, given, pending,
                                command=None)
        if ref is None:
            if kind == "pipeline":
                self.problems.add(where, node, "type", f"pipeline job {name!r} has no component",
                                  hint="add component: ./sub_pipeline.yml", field=field)
                return None
            if kind == "sweep":
                self.problems.add(where, node, "type", f"sweep job {name!r} has no trial",
                                  hint="add trial: ./train.yml", field=field)
                return None
            return self.inline_command(where, node, name, path, inputs, output_types, given,
                                       field, pending)
        if isinstance(ref, dict) and kind == "sweep" and "inputs" not in ref and \
                ref.get("type", "command") == "command":
            # an inline trial: a command that reads the sweep's inputs and sampled values
            trial = yamlfile.Mapping({**ref, "outputs": node.get("outputs")})
            trial.line, trial.lines = getattr(ref, "line", 0), dict(getattr(ref, "lines", {}))
            sampled = self.inline_command(where, trial, name, path, inputs, output_types, given,
                                          f"{field}.trial", pending)
            if sampled is None:
                return None
            return self.for_job(with_sampled(sampled, node.get("search_space")), kind, node)
        if isinstance(ref, dict):
            if kind == "pipeline" or ref.get("type") == "pipeline":
                return self.pipeline(path, yamlfile.Mapping(ref) if not isinstance(
                    ref, yamlfile.Mapping) else ref, stack, keep_origin=False)
            return self.component(ref, path, kind, node, name, f"{field}.{key}.",
                                  keep_origin=False)
        if not isinstance(ref, str) or cloud_reference(ref.removeprefix("file:")) is not None:
            # a registered component: its interface is what the job binds
            spec = self.implied(node, name, kind, path, inputs, output_types, given, pending,
                                command=None)
            return dataclasses.replace(spec, azure_only=f"{REGISTERED_COMPONENT} ({ref})")
        file = lexical(path.parent / ref.removeprefix("file:"))
        if file in stack or file == lexical(path):
            self.problems.add(where, node, key, f"{ref} includes itself",
                              hint="a pipeline component cannot contain itself",
                              field=f"{field}.{key}")
            return None
        cached = self.components.get(file)
        if cached is not None:
            return self.for_job(cached, kind, node)
        if not file.exists():
            self.problems.add(where, node, key, f"no such file: {ref} (looked for {file})",
                              hint=f"give the path of the component YAML relative to "
                                   f"{where.file}", field=f"{field}.{key}")
            return None
        doc = yamlfile.load(file, "an Azure ML component YAML")
        flow = vocabulary.prompt_flow(doc, file.name)
        if flow is not None:
            # carried through as written (its folder is the flow): its interface is what the
            # job binds, and it runs only on Azure ML
            spec = self.implied(node, name, kind, path, inputs, output_types, given, pending,
                                command=None)
            return dataclasses.replace(spec, azure_only=f"{flow} ({ref})")
        if kind == "pipeline" or doc.get("type") == "pipeline":
            spec: ComponentSpec | PipelineSpec = self.pipeline(file, doc, (*stack, lexical(path)))
        else:
            spec = self.component(doc, file, kind, node, name, "", keep_origin=True)
        self.components[file] = spec
        return self.for_job(spec, kind, node)

    def component(self, doc: Any, path: Path, kind: str, node: Any, name: str, prefix: str, *,
                  keep_origin: bool) -> ComponentSpec:
        spec = read_component(doc, path, field_prefix=prefix, name=name, problems=self.problems,
                              keep_origin=keep_origin)
        return self.for_job(spec, kind, node)

    def for_job(self, spec: _Target, kind: str, node: Any) -> _Target:
        """The component as this job runs it: a sweep over a trial runs only on Azure ML, each
        trial launched as the trial declares, and the parameters its search space sets need no
        value from the job."""
        if not isinstance(spec, ComponentSpec) or kind != "sweep":
            return spec
        searched = set(node.get("search_space") or {})
        params = tuple(dataclasses.replace(p, required=False) if p.name in searched else p
                       for p in spec.params)
        # each trial is launched as the trial says (its distribution, the sweep's resources)
        return dataclasses.replace(spec, kind="sweep", params=params,
                                   azure_only=vocabulary.JOB_KINDS["sweep"])

    def implied(self, node: Any, name: str, kind: str, path: Path,
                inputs: dict[str, PipelineInputSpec], output_types: dict[str, AssetType],
                given: list[nodes.Given], pending: dict[str, dict[str, tuple[str, str]]],
                command: str | None) -> ComponentSpec:
        """A job whose interface is what it binds: registered components, AutoML, data
        transfer, import and control-flow jobs, inline parallel and Spark jobs."""
        iface = nodes.implied_interface(given, node.get("outputs"), command, inputs,
                                        output_types)
        body = nodes.SIBLING_JOB.match(nodes.expression(node.get("body")) or "")
        if kind in vocabulary.CONTROL_FLOW and body:
            # a loop's outputs are its body's (parallel_for gathers each item's)
            iface.from_siblings[BODY] = (body["job"], "")
        if iface.from_siblings:
            pending[name] = iface.from_siblings
        return ComponentSpec(
            name=_step_name(name), version="1", inputs=tuple(iface.inputs.values()),
            outputs=tuple(iface.outputs.values()), params=tuple(iface.params.values()),
            code_digest=digest_of({"kind": kind, "job": _plain(node)}),
            display_name=node.get("display_name"), description=node.get("description"),
            kind=kind,
            azure_only=None if KINDS[kind].runs_here
            else vocabulary.JOB_KINDS.get(kind, f"a {kind} job"),
            location=Where(str(path)).location(node, "type" if "type" in node else "component"))

    def inline_command(self, where: Where, node: Any, name: str, path: Path,
                       inputs: dict[str, PipelineInputSpec], output_types: dict[str, AssetType],
                       given: list[nodes.Given], field: str,
                       pending: dict[str, dict[str, tuple[str, str]]]) -> ComponentSpec | None:
        """An inline command job: its interface is what it binds and what its command names."""
        command = node.get("command")
        if not isinstance(command, str) or not command.strip():
            self.problems.add(where, node, "type", f"command job {name!r} has neither a "
                              f"component nor a command",
                              hint="add component: ./x.yml or command: ...", field=field)
            return None
        iface = nodes.implied_interface(given, node.get("outputs"), command, inputs,
                                        output_types)
        if iface.from_siblings:
            pending[name] = iface.from_siblings
        doc = {k: v for k, v in node.items() if k in (
            "command", "code", "environment", "distribution", "resources", "is_deterministic",
            "display_name", "description", "tags", "environment_variables")}
        doc["name"] = name
        base = read_command_component(yamlfile.Mapping(doc), path, field_prefix=f"{field}.",
                                      name=name, problems=self.problems, keep_origin=False)
        return dataclasses.replace(base, inputs=tuple(iface.inputs.values()),
                                   outputs=tuple(iface.outputs.values()),
                                   params=tuple(iface.params.values()),
                                   code_digest=script_code_digest(node.get("code"), command,
                                                                  lexical(path).parent),
                                   location=where.location(node, "command"))


def _step_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name.lower())
    return cleaned if cleaned[:1].isalpha() else f"c_{cleaned}"


def _plain(doc: Any) -> Any:
    import json

    return json.loads(json.dumps(doc, default=str))


__all__ = ["ImportedPipeline", "load_pipeline_yaml", "read_azure_only_component"]
