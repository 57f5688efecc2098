"""Export: a PipelineSpec as the Azure ML CLI v2 documents of its pipeline job and components
(a pipeline read from Azure ML YAML is written back as it was read), and the writing of them.

Checks the options and refuses what that YAML cannot express (and, unless told otherwise, a
pipeline with check errors); never judges wiring itself, which is the checks' job, and never
imports azure-ai-ml (``validate_export`` and the tests use it to load what this writes).
"""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import upload, vocabulary, writeback
from mlpipe.backends.azure.command import RUNTIME_MODULE
from mlpipe.backends.azure.documents import PIPELINE_FILE, Documents
from mlpipe.backends.azure.job_inputs import job_input, output_kind
from mlpipe.digests import canonical_json
from mlpipe.errors import ExportError, UsageError
from mlpipe.paths import display_path
from mlpipe.spec import ComponentSpec, ParamType, PipelineSpec


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
    names += [f"'{step.name}.{param.name}'" for step, comp in spec.leaves()
              for param in comp.params if param.type is ParamType.SECRET]
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
    ctx = Documents(Path(out_dir), None if code_root is None else Path(code_root))
    unknown = sorted(set(given) - {i.name for i in spec.inputs})
    if unknown:
        raise ExportError(f"pipeline {spec.name!r} has no input {unknown[0]!r}",
                          hint=f"its inputs are: {', '.join(i.name for i in spec.inputs)}")
    refuse_secrets(spec)
    computes = Counter(c.compute.name for _, c in spec.leaves()
                       if c.compute is not None and c.compute.name
                       and "${{" not in c.compute.name)
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
        entry = job_input(spec, inp, given)
        if entry is not None:
            job_inputs[inp.name] = entry
    if job_inputs:
        job["inputs"] = job_inputs
    if spec.outputs:
        job["outputs"] = {name: {"type": output_kind(spec, b).value} for name, b in spec.outputs}
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
    only = sorted({f"{s.name} ({c.azure_only})" for s, c in spec.leaves() if c.azure_only})
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


def _compute_ref(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.removeprefix("azureml:")
    return name if name == "serverless" else f"azureml:{name}"  # azure-ai-ml's own spelling

