"""``mlpipe compile`` as one library call: check a pipeline (and what the export's options
would get wrong), write it as Azure ML CLI v2 YAML beside the output folder, validate it with
azure-ai-ml, and move it into place.

Prints nothing: the warnings it went ahead with come back in ``Compiled``.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Compiled:
    """What ``compile`` wrote: the job file first, then the component files."""

    written: tuple[Path, ...]
    notes: tuple[str, ...]
    warnings: tuple[Any, ...]   # the Diagnostic warnings it went ahead with
    validated: bool


def compile_pipeline_yaml(target: str, out_dir: str, *, inputs: Mapping[str, str],
                          default_compute: str | None = None, code_root: str | None = None,
                          validate: bool = True, ignore: Collection[str] = ()) -> Compiled:
    """Check ``target``, then write it as Azure ML CLI v2 YAML into ``out_dir``.

    A pipeline read from Azure ML YAML is written back as it was read: every field, relative
    paths rebased to the output folder. Written beside ``out_dir`` and validated there first,
    so a refused job leaves nothing behind.

    Args:
        target: ``FILE.py[:function]`` or ``pipeline.yml``.
        out_dir: the folder to write ``pipeline.yml`` and ``components/*.yml`` into.
        inputs: pipeline input values (data paths or URIs, parameters).
        default_compute: the pipeline's default compute.
        code_root: the folder uploaded as function components' code.
        validate: load and validate the written files with azure-ai-ml (offline).
        ignore: codes not reported and never refusing.

    Returns:
        The files written, the export's notes and the warnings.

    Raises:
        ChecksFailed: check errors (nothing written).
        ExportError: what Azure ML YAML cannot express, or what azure-ai-ml refuses.

    Example:
        >>> compile_pipeline_yaml("pipelines/defect_classifier.py", "build",
        ...                       inputs={}).written[0].name
        'pipeline.yml'
    """
    from mlpipe.backends.azure.export import export_pipeline
    from mlpipe.backends.azure.export_checks import export_checks
    from mlpipe.backends.azure.staging import write_staged
    from mlpipe.backends.azure.validate import Validation
    from mlpipe.checks import check_pipeline
    from mlpipe.diagnostics import Severity, refuse_check_errors
    from mlpipe.errors import ExportError
    from mlpipe.loader import load_spec

    given = dict(inputs)
    # azure-ai-ml is imported in a forked process while the pipeline is traced and written
    validation = Validation.start() if validate else None
    spec = None
    try:
        spec, found = load_spec(target)
        graph, diagnostics = check_pipeline(spec)
        diagnostics = [d for d in [*found, *diagnostics,
                                   *export_checks(graph.spec, inputs=given,
                                                  code_root=code_root)]
                       if d.code not in ignore]
        refuse_check_errors(diagnostics, "write")
        export = export_pipeline(graph.spec, out_dir=out_dir, inputs=given,
                                 default_compute=default_compute, code_root=code_root,
                                 check=False)  # checked above
        written = write_staged(export, out_dir, check=None if validation is None else (
            lambda folder: validation.run(folder, export.job_file)))
    except ExportError as err:
        _point_at_the_source(err, spec)
        raise
    finally:
        if validation is not None:
            validation.close()
    return Compiled(tuple(written), tuple(export.notes),
                    tuple(d for d in diagnostics if d.severity is Severity.WARNING),
                    validation is not None)


def _point_at_the_source(err: Any, spec: Any) -> None:
    """A job written back as it was read and refused by azure-ai-ml: the hint names the
    user's file (the YAML, or the azure-ai-ml Python pipeline that built it)."""
    from mlpipe.checks.where import SDK_FOLDER
    from mlpipe.paths import display_path

    if spec is None or spec.origin is None or err.file is None \
            or "azure-ai-ml" not in err.message:
        return
    err.hint = (f"azure-ai-ml refuses what {display_path(spec.origin.file)} "
                f"says; fix it there (nothing was written)")
    if SDK_FOLDER in Path(spec.origin.file).parts and spec.location:
        # written by mlpipe from an azure-ai-ml Python pipeline: the user's file
        err.hint = (f"azure-ai-ml refuses the job {display_path(spec.location.file)}"
                    f" builds; fix it there (nothing was written)")


__all__ = ["Compiled", "compile_pipeline_yaml"]
