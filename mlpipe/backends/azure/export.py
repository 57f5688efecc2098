"""Export: a PipelineSpec written straight as Azure ML CLI v2 YAML (pipeline job + components).

Builds plain dicts from the specs and dumps them; never imports azure-ai-ml (the tests and
``validate_export`` use it to load and validate what this writes) and never judges wiring,
which is the checks' job: it refuses only what YAML cannot express.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import upload, vocabulary, writeback
from mlpipe.backends.azure.command import (
    RECORD_PORT,
    RUNTIME_MODULE,
    coerce_param,
    runtime_command,
)
from mlpipe.codes import (
    LARGE_FILE_IN_UPLOAD,
    MODULE_OUTSIDE_CODE_ROOT,
    PIPELINE_INPUT_WITHOUT_PATH,
)
from mlpipe.contracts.base import contract_label, contract_spec
from mlpipe.diagnostics import Diagnostic
from mlpipe.digests import canonical_json
from mlpipe.errors import ExportError, UsageError
from mlpipe.paths import display_path
from mlpipe.spec import (
    Binding,
    ComponentSpec,
    InputRole,
    Literal,
    ParamType,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    PortSpec,
    StepOutput,
    StepSpec,
    plain_value,
)

COMPONENT_DIR = "components"
PIPELINE_FILE = "pipeline.yml"
RUNTIME_NOTE = (f"Runs its Python body with `python -m {RUNTIME_MODULE}`: the environment must "
                f"have mlpipe installed.")


@dataclass(slots=True)
class Export:
    """An exported pipeline: ``pipeline.yml`` and one YAML per component, as documents.

    ``files`` maps a path relative to the output folder to its document, the job first
    (``job_file``: ``pipeline.yml``, or ``job.yml`` for a single command job read from YAML);
    ``notes`` are what the user must know (e.g. environments that must contain mlpipe);
    ``uploads`` the code roots of its function components, each with the ``.amlignore`` that
    keeps its upload to the modules the steps import (``upload``).
    """

    pipeline: dict[str, Any]
    files: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    job_file: str = PIPELINE_FILE
    uploads: list[upload.Upload] = field(default_factory=list)

    def write(self, out_dir: str | os.PathLike[str]) -> list[Path]:
        """Write every file under ``out_dir``; returns their paths, the job's first."""
        out = Path(out_dir)
        written = []
        for rel, doc in self.files.items():
            try:
                written.append(writeback.write_document(out / rel, doc))
            except OSError as exc:
                raise UsageError(f"cannot write {out / rel}: {exc.strerror or exc}",
                                 hint="choose an output folder you can write to") from None
        for up in self.uploads:
            try:
                up.write()
            except OSError as exc:
                raise UsageError(f"cannot write {up.root / upload.AMLIGNORE}: "
                                 f"{exc.strerror or exc}",
                                 hint="make the code root writable, or pass --code-root") from None
        return written


class _Context:
    """State of one export: component files by digest, the code root per module."""

    def __init__(self, out_dir: Path, code_root: Path | None) -> None:
        self.out_dir = out_dir
        self.code_root = code_root
        self.files: dict[str, dict[str, Any]] = {}
        self.by_digest: dict[str, str] = {}
        self.environments: set[str] = set()
        self.unversioned: set[str] = set()
        self.uploads: dict[Path, upload.Upload] = {}

    def component_file(self, spec: ComponentSpec | PipelineSpec) -> str:
        rel = self.by_digest.get(spec.digest)
        if rel is not None:
            return rel
        base = _component_name(spec)
        rel = f"{COMPONENT_DIR}/{base}.yml"
        if rel in self.files:
            rel = f"{COMPONENT_DIR}/{base}-{_safe(spec.version or '1')}.yml"
        if rel in self.files:
            rel = f"{COMPONENT_DIR}/{base}-{spec.digest[7:19]}.yml"
        self.by_digest[spec.digest] = rel
        self.files[rel] = {}  # reserve the name before recursing into a nested pipeline
        if isinstance(spec, ComponentSpec) and spec.origin is not None:
            self.files[rel] = self.component_as_read(spec, rel)
        else:
            self.files[rel] = (self.command_component(spec, rel)
                               if isinstance(spec, ComponentSpec)
                               else self.pipeline_component(spec, rel))
        return rel

    def component_as_read(self, spec: ComponentSpec, rel: str) -> dict[str, Any]:
        """A component loaded from YAML: its document as written (paths rebased), with
        mlpipe's tags added (its digest, and the contracts attached to its ports)."""
        doc = writeback.component_written_back(spec, self.out_dir, rel)
        doc["tags"] = {**(doc.get("tags") or {}), **_component_tags(spec)}
        return doc

    def command_component(self, spec: ComponentSpec, rel: str) -> dict[str, Any]:
        doc: dict[str, Any] = {"$schema": vocabulary.COMPONENT_SCHEMA, "type": "command",
                               "name": spec.name, "version": spec.version}
        if spec.display_name:
            doc["display_name"] = spec.display_name
        description = _component_description(spec)
        if description:
            doc["description"] = description
        doc["tags"] = _component_tags(spec)
        doc["is_deterministic"] = spec.reuse
        inputs = {p.name: _port_entry(p) for p in spec.inputs}
        inputs.update({p.name: vocabulary.param_input(p) for p in spec.params})
        if inputs:
            doc["inputs"] = inputs
        if spec.outputs:
            doc["outputs"] = {p.name: _port_entry(p) for p in spec.outputs}
        if spec.function is not None:
            if spec.output(RECORD_PORT) is not None or spec.input(RECORD_PORT) is not None:
                raise ExportError(f"component {spec.name!r} has a port named {RECORD_PORT!r}, "
                                  f"which the export reserves for the step record",
                                  hint="rename the port", **_where(spec))
            doc.setdefault("outputs", {})[RECORD_PORT] = {
                "type": "uri_folder",
                "description": "mlpipe's step record: validation, metrics, coordination, "
                               "output digests (docs/step-record.md)"}
        code = self.code_of(spec, rel)
        if code is not None:
            doc["code"] = code
        if spec.environment is None:
            raise ExportError(f"component {spec.name!r} has no environment; Azure ML runs every "
                              f"command component in one",
                              hint='pass environment=Environment("name", version="1") to '
                                   '@component (an environment with mlpipe installed)',
                              **_where(spec))
        env = vocabulary.environment_ref(spec.environment)
        if isinstance(env, dict) and env.get("conda_file"):
            env = {**env, "conda_file": self.relative(self.resolve(spec, env["conda_file"]), rel)}
        doc["environment"] = env
        if isinstance(env, str) and env.endswith("@latest"):
            self.unversioned.add(spec.environment.name)
        if spec.function is not None:
            label = env if isinstance(env, str) else env.get("name") or env.get("image")
            self.environments.add(str(label))
        if spec.instances != 1:
            doc["resources"] = {"instance_count": spec.instances}
        if spec.distribution is not None:
            doc["distribution"] = vocabulary.distribution_block(spec.distribution)
        doc["command"] = spec.command if spec.command is not None else runtime_command(spec)
        return doc

    def pipeline_component(self, spec: PipelineSpec, rel: str) -> dict[str, Any]:
        doc: dict[str, Any] = {"$schema": vocabulary.PIPELINE_COMPONENT_SCHEMA, "type": "pipeline",
                               "name": _component_name(spec), "version": spec.version or "1",
                               "display_name": spec.name}
        if spec.description:
            doc["description"] = spec.description
        doc["tags"] = {"mlpipe.digest": spec.digest}
        inputs = {}
        for inp in spec.inputs:
            entry = _declared_input(spec, inp)
            if entry is not None:
                inputs[inp.name] = entry
        if inputs:
            doc["inputs"] = inputs
        if spec.outputs:
            doc["outputs"] = {name: {"type": _output_kind(spec, b).value}
                              for name, b in spec.outputs}
        doc["jobs"] = self.jobs(spec, default_compute=None, declared=set(inputs), here=rel)
        return doc

    def jobs(self, spec: PipelineSpec, default_compute: str | None,
             declared: set[str], here: str = PIPELINE_FILE) -> dict[str, Any]:
        bound_outputs: dict[tuple[str, str], str] = {}
        for name, binding in spec.outputs:
            if not isinstance(binding, StepOutput) or spec.step(binding.step) is None:
                raise ExportError(f"pipeline {spec.name!r} output {name!r} is bound to "
                                  f"{binding}, which Azure ML cannot express as a job output",
                                  hint="return an output of one of the pipeline's steps "
                                       "(run `mlpipe check` for details)", **_where(spec))
            key = (binding.step, binding.port)
            if key in bound_outputs:
                raise ExportError(f"pipeline {spec.name!r} returns '{binding}' as both "
                                  f"{bound_outputs[key]!r} and {name!r}; Azure ML binds one step "
                                  f"output to one pipeline output",
                                  hint="return it once", **_where(spec))
            bound_outputs[key] = name
        names = [s.name for s in spec.steps]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ExportError(f"pipeline {spec.name!r} has two steps named {twice!r}; Azure ML "
                              f"job names are unique", hint="name each step with .named(...)",
                              **_where(spec))
        return {step.name: self.node(step, bound_outputs, default_compute, declared, here)
                for step in spec.steps}

    def node(self, step: StepSpec, bound_outputs: dict[tuple[str, str], str],
             default_compute: str | None, declared: set[str], here: str) -> dict[str, Any]:
        target = step.target
        rel = self.component_file(target)
        ref = posixpath.relpath(rel, posixpath.dirname(here) or ".")
        node: dict[str, Any] = {"type": target.kind if isinstance(target, ComponentSpec)
                                else "pipeline", "component": f"./{ref}"}
        if isinstance(target, ComponentSpec):
            # azure-ai-ml spells serverless bare as the default and prefixed on a job
            compute = vocabulary.compute_ref(target.compute) or ("azureml:serverless"
                                                             if default_compute else None)
            if compute is not None and compute.removeprefix("azureml:") != \
                    (default_compute or "").removeprefix("azureml:"):
                node["compute"] = compute
            variables = dict(target.environment.variables if target.environment else ())
            variables.update(target.environment_variables)
            if variables:
                node["environment_variables"] = variables
        inputs = {}
        for key, binding in step.bindings:
            value = _node_input(target, key, binding, declared)
            if value is not None:
                inputs[key] = value
        if inputs:
            node["inputs"] = inputs
        outputs = {port: f"${{{{parent.outputs.{name}}}}}"
                   for (s, port), name in bound_outputs.items() if s == step.name}
        if outputs:
            node["outputs"] = outputs
        return node

    def code_of(self, spec: ComponentSpec, rel: str) -> str | None:
        if spec.function is None:
            if spec.code is None:
                return None
            if re.match(r"^[a-z][a-z0-9+.-]*:", spec.code):  # azureml:, https:, git+...
                return spec.code
            return self.relative(Path(spec.code), rel)
        root = self.code_root or _module_root(spec)
        if root is None:
            raise ExportError(f"cannot tell which folder holds the code of component "
                              f"{spec.name!r} ({spec.function})",
                              hint="pass code_root= (mlpipe compile --code-root DIR)",
                              **_where(spec))
        upload.add_component(self.uploads, root, spec)
        return self.relative(root, rel)

    def relative(self, path: Path, rel: str) -> str:
        base = (self.out_dir / rel).parent.resolve()
        return Path(os.path.relpath(Path(path).resolve(), base)).as_posix()

    @staticmethod
    def resolve(spec: ComponentSpec, path: str) -> Path:
        if os.path.isabs(path) or spec.location is None:
            return Path(path)
        return Path(spec.location.file).resolve().parent / path


def export_pipeline(spec: PipelineSpec, *, out_dir: str | os.PathLike[str] = ".",
                    inputs: Mapping[str, Any] | None = None, default_compute: str | None = None,
                    code_root: str | os.PathLike[str] | None = None,
                    run_id: str | None = None, experiment: str | None = None,
                    check: bool = True, tags: Mapping[str, str] | None = None) -> Export:
    """Azure ML CLI v2 documents for ``spec``: ``pipeline.yml`` and one file per component.

    Args:
        spec: the pipeline (its ``PipelineSpec``, or the ``@pipeline`` function itself).
        out_dir: where the files will be written (relative ``code`` paths are computed from it).
        inputs: values for pipeline inputs (data paths/URIs, parameter values or their text).
        default_compute: the pipeline's default compute; the most used step compute otherwise.
        code_root: the folder uploaded as a function component's code; by default the folder
            its module was imported from.
        run_id: mlpipe's run id, recorded in the job's tags.
        experiment: the Azure ML experiment name; the pipeline's name by default.
        check: run every check first and refuse a pipeline with an error, as ``mlpipe
            compile`` does (False when the caller has checked it already).
        tags: more tags for the job (``submit`` adds the CI provenance, ``mlpipe.ci.*``).

    Returns:
        An ``Export``; ``export.write(out_dir)`` writes it.

    Raises:
        ExportError: whatever ``mlpipe compile`` would refuse: not a pipeline, an option of
            the wrong type, a pipeline with check errors, a bad input value, something
            Azure ML YAML cannot express; the message names the step or input.

    Example:
        >>> export_pipeline(defect_classifier.spec, out_dir="build").write("build")
    """
    spec = _pipeline_spec(spec)
    _check_options(out_dir, inputs, default_compute, code_root, run_id, experiment)
    if check:
        _refuse_check_errors(spec)
    try:
        return _export(spec, out_dir, inputs, default_compute, code_root, run_id, experiment,
                       tags)
    except UsageError as err:  # a value that does not fit its parameter, say
        raise ExportError(err.message, hint=err.hint, file=err.file, line=err.line) from None


SECRET_HINT = ("have the step read the secret at run time from the workspace's Key Vault "
               "(azure-keyvault-secrets, with the compute's managed identity), or run the "
               "pipeline here (mlpipe submit, --target local)")


def refuse_secrets(spec: PipelineSpec) -> None:
    """Refuse a pipeline whose steps take a ``Param[Secret]``: an Azure ML job holds every
    input value in clear for whoever can read the workspace, and a value left out would run
    the step without its secret (or, given as its keyed hash, with the wrong one)."""
    names = [f"'{i.name}'" for i in spec.inputs if i.secret]
    names += [f"'{step.name}.{param.name}'" for step in _leaf_steps(spec)
              for param in step.target.params if param.type is ParamType.SECRET]
    if names:
        raise ExportError(f"pipeline {spec.name!r} takes {', '.join(names)} as Param[Secret], "
                          f"which mlpipe does not write into Azure ML YAML: a job there holds "
                          f"every input value in clear", hint=SECRET_HINT)


def _pipeline_spec(value: Any) -> PipelineSpec:
    if isinstance(value, PipelineSpec):
        return value
    spec = getattr(value, "spec", None)
    if isinstance(spec, PipelineSpec):  # the @pipeline function itself
        return spec
    if isinstance(spec, ComponentSpec) or isinstance(value, ComponentSpec):
        name = (spec or value).name
        raise ExportError(f"export_pipeline exports a pipeline, and component {name!r} is a "
                          f"component", hint="call it inside a @pipeline and export that")
    raise ExportError(f"export_pipeline exports a pipeline, not {type(value).__name__} "
                      f"{value!r}"[:200],
                      hint="pass a @pipeline function or its .spec (mlpipe.loader.load_pipeline"
                           "(PATH) loads one from a file)")


def _check_options(out_dir: Any, inputs: Any, default_compute: Any, code_root: Any,
                   run_id: Any, experiment: Any) -> None:
    if not isinstance(out_dir, (str, os.PathLike)):
        raise ExportError(f"out_dir {out_dir!r} is not a path", hint="pass a folder path")
    if inputs is not None:
        if not isinstance(inputs, Mapping) or not all(isinstance(k, str) for k in inputs):
            raise ExportError(f"inputs {inputs!r} is not a mapping of input names to values"[:200],
                              hint='pass inputs={"raw": "azureml:images:3", "epochs": 10}')
        for name, value in inputs.items():
            if not isinstance(value, (str, int, float, bool, os.PathLike)) or value is None:
                raise ExportError(f"input {name!r} is given {type(value).__name__} "
                                  f"{value!r}"[:200],
                                  hint="give a data path or URI, or a parameter's value "
                                       "(number, string, bool)")
    for option, value in (("default_compute", default_compute), ("run_id", run_id),
                          ("experiment", experiment)):
        if value is not None and not isinstance(value, str):
            raise ExportError(f"{option} {value!r} is not a string", hint=f"pass {option} as a str")
    if code_root is not None:
        if not isinstance(code_root, (str, os.PathLike)) or not os.path.isdir(code_root):
            raise ExportError(f"code_root {code_root!r} is not a folder",
                              hint="pass the folder uploaded as the components' code")


def _refuse_check_errors(spec: PipelineSpec) -> None:
    from mlpipe.checks import check_pipeline
    from mlpipe.diagnostics import Severity, sort_key

    errors = sorted((d for d in check_pipeline(spec)[1] if d.severity is Severity.ERROR),
                    key=sort_key)
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ExportError(f"pipeline {spec.name!r} has check errors{more}: "
                          f"[{first.code}] {first.message}",
                          hint="`mlpipe check` lists them all; fix them and export again",
                          file=first.file, line=first.line)


def _export(spec: PipelineSpec, out_dir: str | os.PathLike[str], inputs: Any,
            default_compute: str | None, code_root: Any, run_id: str | None,
            experiment: str | None, more_tags: Mapping[str, str] | None = None) -> Export:
    given = dict(inputs or {})
    if spec.origin is not None:
        return _as_read(spec, Path(out_dir), given, default_compute, run_id, experiment,
                        more_tags)
    ctx = _Context(Path(out_dir), None if code_root is None else Path(code_root))
    unknown = sorted(set(given) - {i.name for i in spec.inputs})
    if unknown:
        raise ExportError(f"pipeline {spec.name!r} has no input {unknown[0]!r}",
                          hint=f"its inputs are: {', '.join(i.name for i in spec.inputs)}")
    refuse_secrets(spec)
    computes = Counter(s.target.compute.name for s in _leaf_steps(spec)
                       if s.target.compute is not None and s.target.compute.name
                       and "${{" not in s.target.compute.name)
    # Azure ML's validation wants a compute for every command job: serverless stands in
    # for steps that name none.
    default = default_compute or (computes.most_common(1)[0][0] if computes else "serverless")
    default_ref = _compute_ref(default)
    job: dict[str, Any] = {"$schema": vocabulary.PIPELINE_JOB_SCHEMA, "type": "pipeline",
                           "display_name": spec.name, "experiment_name": experiment or spec.name}
    if spec.description:
        job["description"] = spec.description
    tags = {"mlpipe.pipeline": spec.name, "mlpipe.pipeline_digest": spec.digest}
    if spec.version:
        tags["mlpipe.pipeline_version"] = spec.version
    if spec.candidate is not None:
        tags["mlpipe.candidate"] = canonical_json(spec.candidate.to_dict())
    if run_id:
        tags["mlpipe.run_id"] = run_id
    job["tags"] = {**tags, **(more_tags or {})}
    if default_ref:
        job["settings"] = {"default_compute": default_ref}
    job_inputs = {}
    for inp in spec.inputs:
        entry = _job_input(spec, inp, given)
        if entry is not None:
            job_inputs[inp.name] = entry
    if job_inputs:
        job["inputs"] = job_inputs
    if spec.outputs:
        job["outputs"] = {name: {"type": _output_kind(spec, b).value} for name, b in spec.outputs}
    job["jobs"] = ctx.jobs(spec, default_ref, set(job_inputs))
    files = {PIPELINE_FILE: job, **ctx.files}
    notes = []
    if ctx.environments:
        notes.append(f"function components run `python -m {RUNTIME_MODULE}`: environment(s) "
                     f"{', '.join(sorted(ctx.environments))} must have mlpipe installed")
    if ctx.unversioned:
        names = sorted(ctx.unversioned)
        notes.append(f"environment(s) {', '.join(names)} have no version: written as "
                     f"{', '.join(f'azureml:{n}@latest' for n in names)}, which name whichever "
                     f"version is newest when the job is submitted (MP801); pin a version")
    for up in ctx.uploads.values():
        if up.own_ignore:
            notes.append(f"{display_path(str(up.root / upload.AMLIGNORE))} is your own: Azure ML "
                         f"uploads {display_path(str(up.root))} as it says (mlpipe wrote none)")
    return Export(job, files, notes, uploads=list(ctx.uploads.values()))


def export_checks(spec: PipelineSpec, *, inputs: Mapping[str, Any] | None = None,
                  code_root: str | os.PathLike[str] | None = None) -> list[Diagnostic]:
    """What an export of ``spec`` with these options would get wrong on Azure ML, found before
    anything is written: a data input the job leaves without a path (MP605, a warning: the job
    file is still useful with ``az ml job create --set inputs.X.path=...``) and a function
    component whose module cannot be imported from the ``code_root`` folder uploaded as its
    code (MP606, an error: the step would fail there with ``ModuleNotFoundError``).

    Example:
        >>> export_checks(defect_classifier.spec, inputs={"raw": "azureml:raw:1"})
        [...]  # one MP605 warning: 'split' has no path
    """
    given = dict(inputs or {})
    found: list[Diagnostic] = []
    for inp in spec.inputs:
        if inp.role is not InputRole.ARTIFACT or inp.name in given:
            continue
        if inp.default is None and inp.required:
            loc = inp.location or spec.location
            found.append(Diagnostic.of(
                PIPELINE_INPUT_WITHOUT_PATH,
                f"pipeline input {inp.name!r} has no path, so Azure ML cannot run the exported "
                f"job as written", hint=f"pass --input {inp.name}=azureml:NAME:VERSION (a data "
                f"asset, datastore URI or local path), or give the job's input a path",
                file=loc.file if loc else None, line=loc.line if loc else None))
    for up in upload.component_uploads((s.target for s in _leaf_steps(spec)), code_root,
                                       _module_root):
        found.extend(_large_files(up))
    if code_root is not None:
        root = Path(code_root).resolve()
        seen: set[str] = set()
        for step in _leaf_steps(spec):
            comp = step.target
            module = (comp.function or "").partition(":")[0]
            if not module or module in seen:
                continue
            seen.add(module)
            if _module_file_under(root, module) is None:
                found.append(Diagnostic.of(
                    MODULE_OUTSIDE_CODE_ROOT,
                    f"component {comp.name!r} runs {comp.function}, but module {module!r} "
                    f"cannot be imported from the code root {display_path(str(root))}",
                    hint=f"pass the folder that holds {module.replace('.', '/')}.py as "
                         f"--code-root (by default, the folder the module was imported from)",
                    step=step.name, **_where(comp)))
    return found


def _large_files(up: upload.Upload) -> list[Diagnostic]:
    large = [] if up.own_ignore else up.large()
    if not large:
        return []
    named = ", ".join(f"{rel} ({size / 2**20:.0f} MiB)" for rel, size in large[:5])
    more = f" and {len(large) - 5} more" if len(large) > 5 else ""
    return [Diagnostic.of(
        LARGE_FILE_IN_UPLOAD,
        f"the code upload of {display_path(str(up.root))} holds {len(large)} file(s) of "
        f"{upload.LARGE_FILE_BYTES // 2**20} MiB or more beside the modules the steps import: "
        f"{named}{more}; Azure ML uploads them with every changed submission",
        hint="move data out of the components' packages (pass it as a pipeline input, a data "
             "asset) or list it in the code root's .amlignore (then it is yours to keep)")]


def _module_file_under(root: Path, module: str) -> Path | None:
    """The file ``import module`` finds under ``root`` (a module or a package), if any."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _as_read(spec: PipelineSpec, out_dir: Path, given: dict[str, Any],
             default_compute: str | None, run_id: str | None,
             experiment: str | None, more_tags: Mapping[str, str] | None = None) -> Export:
    """A pipeline read from Azure ML YAML, written back as it was read (see ``writeback``)."""
    tags = {"mlpipe.pipeline": spec.name, "mlpipe.pipeline_digest": spec.digest}
    if run_id:
        tags["mlpipe.run_id"] = run_id
    tags.update(more_tags or {})
    job, files = writeback.written_back(spec, out_dir, given, default_compute, tags, experiment)
    notes = []
    only = sorted({f"{s.name} ({s.target.azure_only})" for s in _leaf_steps(spec)
                   if s.target.azure_only})
    if only:
        notes.append(f"steps that run only on Azure ML: {', '.join(only)}")
    return Export(job, files, notes, job_file=writeback.job_file(spec))


def write_export(spec: PipelineSpec, out_dir: str | os.PathLike[str], **options: Any) -> Export:
    """``export_pipeline(spec, out_dir=out_dir, **options)``, written to ``out_dir``.

    Every document is built before the first file is written, so a pipeline that cannot be
    exported leaves ``out_dir`` untouched.
    """
    export = export_pipeline(spec, out_dir=out_dir, **options)
    export.write(out_dir)
    return export


# --- pieces ------------------------------------------------------------------------------

def _where(spec: ComponentSpec | PipelineSpec) -> dict[str, Any]:
    loc = spec.location
    return {"file": loc.file if loc else None, "line": loc.line if loc else None}


def _compute_ref(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.removeprefix("azureml:")
    return name if name == "serverless" else f"azureml:{name}"  # azure-ai-ml's own spelling


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _component_name(spec: ComponentSpec | PipelineSpec) -> str:
    if isinstance(spec, ComponentSpec):
        return spec.name
    name = re.sub(r"[^a-z0-9_]", "_", spec.name.lower())
    return name if name[:1].isalpha() else f"p_{name}"


def _leaf_steps(spec: PipelineSpec):
    for step in spec.steps:
        if isinstance(step.target, PipelineSpec):
            yield from _leaf_steps(step.target)
        else:
            yield step


def _module_root(spec: ComponentSpec) -> Path | None:
    module_name = (spec.function or "").partition(":")[0]
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    root = Path(file).resolve().parent
    for _ in range(module_name.count(".")):
        root = root.parent
    return root


def _port_entry(port: PortSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": port.kind.value}
    if port.optional:
        entry["optional"] = True
    description = port.description or ""
    if port.contract is not None:
        description = f"{description} [contract {contract_label(port.contract)}]".strip()
    if description:
        entry["description"] = description
    return entry


def _component_description(spec: ComponentSpec) -> str:
    parts = [spec.description or (spec.doc or "").split("\n", 1)[0]]
    contracts = [f"{p.name}={contract_label(p.contract)}" for p in (*spec.inputs, *spec.outputs)
                 if p.contract is not None]
    if contracts:
        parts.append(f"Contracts: {', '.join(contracts)}.")
    if spec.function is not None:
        parts.append(RUNTIME_NOTE)
    return " ".join(p for p in parts if p)


def _component_tags(spec: ComponentSpec) -> dict[str, str]:
    tags = {"mlpipe.digest": spec.digest, "mlpipe.code_digest": spec.code_digest}
    if spec.function is not None:
        tags["mlpipe.function"] = spec.function
        tags["mlpipe.runtime"] = f"python -m {RUNTIME_MODULE} (environment must have mlpipe)"
    for port in (*spec.inputs, *spec.outputs):
        if port.contract is not None:
            tags[f"mlpipe.contract.{port.name}"] = canonical_json(contract_spec(port.contract))
    tags.update(vocabulary.launch_tags(spec.distribution, record=spec.function is not None))
    return tags


def _uses(spec: PipelineSpec, name: str):
    for step in spec.steps:
        for key, binding in step.bindings:
            if isinstance(binding, PipelineInput) and binding.name == name:
                target = step.target
                if isinstance(target, ComponentSpec):
                    yield target.input(key) or target.param(key)
                else:
                    yield target.input(key)


def _input_kind(spec: PipelineSpec, inp: PipelineInputSpec) -> AssetType:
    if inp.kind is not None:
        return inp.kind
    for use in _uses(spec, inp.name):
        if isinstance(use, PortSpec):
            return use.kind
        if isinstance(use, PipelineInputSpec) and use.role is InputRole.ARTIFACT:
            return _input_kind(spec, use) if use.kind is None else use.kind
    return AssetType.URI_FOLDER


def _input_param(spec: PipelineSpec, inp: PipelineInputSpec):
    if inp.param is not None:
        return inp.param
    for use in _uses(spec, inp.name):
        if use is not None and not isinstance(use, (PortSpec, PipelineInputSpec)):
            return use
        if isinstance(use, PipelineInputSpec) and use.param is not None:
            return use.param
    return None


def _param_literal(value: Any) -> Any:
    value = plain_value(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def _job_input(spec: PipelineSpec, inp: PipelineInputSpec, given: dict[str, Any]) -> Any:
    value = given.get(inp.name, inp.default)
    if inp.role is InputRole.ARTIFACT:
        entry: dict[str, Any] = {"type": _input_kind(spec, inp).value}
        if value is not None:
            entry["path"] = str(value)
        return entry
    param = _input_param(spec, inp)
    if isinstance(value, str) and inp.name in given and param is not None:
        value = coerce_param(param, value)
    if value is None:
        if inp.required:
            raise ExportError(f"pipeline input {inp.name!r} of {spec.name!r} is a parameter "
                              f"with no value; an Azure ML pipeline job needs one",
                              hint=f"pass --input {inp.name}=VALUE (inputs={{{inp.name!r}: ...}}) "
                                   f"or give it a default")
        return None
    if param is not None and param.type is ParamType.ENUM:
        return str(plain_value(value))
    return _param_literal(value)


def _declared_input(spec: PipelineSpec, inp: PipelineInputSpec) -> dict[str, Any] | None:
    if inp.role is InputRole.ARTIFACT:
        entry: dict[str, Any] = {"type": _input_kind(spec, inp).value}
        if not inp.required:
            entry["optional"] = True
        return entry
    param = _input_param(spec, inp)
    if param is None:
        entry = {"type": "string"}
    else:
        entry = vocabulary.param_input(param)
        entry.pop("default", None)
        entry.pop("optional", None)
    if inp.required:
        return entry
    if inp.default is None:
        entry["optional"] = True
    else:
        entry["default"] = _param_literal(inp.default) if param is None or \
            param.type is not ParamType.ENUM else str(plain_value(inp.default))
    return entry


def _output_kind(spec: PipelineSpec, binding: Binding) -> AssetType:
    if isinstance(binding, StepOutput):
        step = spec.step(binding.step)
        if step is not None:
            if isinstance(step.target, ComponentSpec):
                port = step.target.output(binding.port)
                if port is not None:
                    return port.kind
            else:
                inner = step.target.output(binding.port)
                if inner is not None:
                    return _output_kind(step.target, inner)
    return AssetType.URI_FOLDER


def _node_input(target: ComponentSpec | PipelineSpec, key: str, binding: Binding,
                declared: set[str]) -> Any:
    if isinstance(binding, PipelineInput):
        if binding.name not in declared:
            return None  # an optional pipeline parameter left without a value
        return f"${{{{parent.inputs.{binding.name}}}}}"
    if isinstance(binding, StepOutput):
        return f"${{{{parent.jobs.{binding.step}.outputs.{binding.port}}}}}"
    assert isinstance(binding, Literal)
    if binding.value is None:
        return None
    port = target.input(key)
    if isinstance(port, PortSpec):
        return {"type": port.kind.value, "path": str(binding.value)}
    if isinstance(port, PipelineInputSpec) and port.role is InputRole.ARTIFACT:
        return {"type": (port.kind or AssetType.URI_FOLDER).value, "path": str(binding.value)}
    param = target.param(key) if isinstance(target, ComponentSpec) else None
    if param is not None and param.type is ParamType.ENUM:
        return str(plain_value(binding.value))
    return _param_literal(binding.value)
