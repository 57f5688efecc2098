"""Offline validation of an export with azure-ai-ml itself: load every file, validate the job.

The only module of the export path that imports azure-ai-ml (inside the function); it
neither writes nor contacts Azure.
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from mlpipe.errors import ExportError


def quiet_azure_ai_ml() -> None:
    """Import azure-ai-ml and keep its notices ("Class X: This is an experimental class ...",
    printed when it builds its schemas) off the user's terminal; its errors still show.

    azure-ai-ml sets its logger to INFO with its own stderr handler when it is imported, so
    the level is set after the import, not before.
    """
    import azure.ai.ml  # noqa: F401  (its import installs the handler quieted below)

    logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"azure\.ai\.ml.*")


def load_export(out_dir: str | os.PathLike[str], pipeline_file: str = "pipeline.yml") -> Any:
    """The ``PipelineJob`` azure-ai-ml loads from ``out_dir/pipeline.yml``.

    Raises:
        ExportError: azure-ai-ml rejects a file, with its message.
    """
    quiet_azure_ai_ml()
    from azure.ai.ml import load_job

    path = Path(out_dir) / pipeline_file
    try:
        return load_job(path)
    except Exception as exc:  # marshmallow.ValidationError, ValidationException, YAML errors
        raise ExportError(f"azure-ai-ml cannot load {path}: {_first_line(exc)}",
                          hint="this is a bug in the export if mlpipe wrote the file; report it",
                          file=str(path)) from exc


def validate_export(out_dir: str | os.PathLike[str], pipeline_file: str = "pipeline.yml") -> Any:
    """Load ``out_dir/pipeline.yml`` and every component YAML with azure-ai-ml and run its
    offline validation (what ``az ml job validate`` checks without a workspace).

    Returns:
        The loaded ``PipelineJob``.

    Raises:
        ExportError: a file does not load, or validation reports problems (all of them).

    Example:
        >>> validate_export("build/")
    """
    job = load_export(out_dir, pipeline_file)
    from azure.ai.ml import load_component

    for path in sorted((Path(out_dir) / "components").glob("*.yml")):
        try:
            component = load_component(path)
        except Exception as exc:
            raise ExportError(f"azure-ai-ml cannot load {path}: {_first_line(exc)}",
                              file=str(path)) from exc
        _raise_if_failed(component._validate(), path)
    _raise_if_failed(job._validate(), Path(out_dir) / pipeline_file)
    return job


def _raise_if_failed(result: Any, path: Path) -> None:
    if result.passed:
        return
    errors = result._to_dict().get("errors", [])
    problems = "; ".join(f"{e.get('path', '?')}: {e.get('message', '')}" for e in errors)
    hint = None
    if any(e.get("message") == "Compute not set" for e in errors):
        hint = "the job names no compute: pass --compute NAME (a cluster, or serverless)"
    raise ExportError(f"azure-ai-ml's validation rejects {path}: {problems}", file=str(path),
                      hint=hint)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
