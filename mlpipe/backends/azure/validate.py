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


def _quiet_azure() -> None:
    # azure-ai-ml prints "experimental class" notices while loading; they are not the user's
    # concern. Its import sets its logger to INFO, so the level is set after importing it.
    warnings.filterwarnings("ignore", module=r"azure\.ai\.ml.*")
    import azure.ai.ml  # noqa: F401

    logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)


def load_export(out_dir: str | os.PathLike[str], pipeline_file: str = "pipeline.yml") -> Any:
    """The ``PipelineJob`` azure-ai-ml loads from ``out_dir/pipeline.yml``.

    Raises:
        ExportError: azure-ai-ml rejects a file, with its message.
    """
    _quiet_azure()
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
    problems = "; ".join(f"{e.get('path', '?')}: {e.get('message', '')}"
                         for e in result._to_dict().get("errors", []))
    raise ExportError(f"azure-ai-ml's validation rejects {path}: {problems}", file=str(path))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
