"""An MLflow Model Registry as a promotion's destination and a trace's source: register a
candidate's model folder (once: a version already tagged with the candidate and its model digest
is reused), set an alias, and download a registered version's files.

Imports mlflow only inside its functions (``mlpipe-aml[models]``); judges nothing (``promotion``
gates, ``trace`` compares).
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mlpipe.errors import UsageError
from mlpipe.evidence.qualification.promotion import TAG_PREFIX, Registered, promoted_version

#: The MLflow experiment whose runs hold the promoted models' files.
EXPERIMENT = "mlpipe-promotions"
#: MLflow's HTTP client, bounded: a request times out after 20 s and is retried twice, 1 s
#: then 2 s apart (an unreachable server fails in seconds, a silent one within about a minute).
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
_MODELS_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:/(?P<version>\d+)|@(?P<alias>[^/]+))/?$")


def _mlflow() -> Any:
    # no progress bars on stderr from a command's downloads and uploads
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # MLflow's HTTP defaults (7 retries, backoff factor 2, 120 s a request) keep a command
    # against an unreachable server going for minutes; a user's own settings still win
    for var, value in HTTP_BOUNDS.items():
        os.environ.setdefault(var, value)
    try:
        import mlflow
    except ImportError:
        raise UsageError("an MLflow Model Registry needs mlflow, which is not installed here",
                         hint="pip install 'mlpipe-aml[models]'") from None
    return mlflow


def tracking_uri(given: str | None = None) -> str:
    """The tracking URI promotions go to: ``given``, else MLflow's own configuration
    (``MLFLOW_TRACKING_URI``; MLflow's default otherwise)."""
    mlflow = _mlflow()
    return given or mlflow.get_tracking_uri()


def _client(uri: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def _experiment(client: Any, uri: str) -> str:
    found = client.get_experiment_by_name(EXPERIMENT)
    if found is not None:
        return found.experiment_id
    location = None
    if urlparse(uri).scheme == "sqlite" and uri.startswith("sqlite:///") \
            and ":memory:" not in uri:
        # beside the database file, not ./mlruns in whatever folder promote runs from
        database = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
        location = (database.resolve().parent / "mlflow-artifacts").as_uri()
    return client.create_experiment(EXPERIMENT, artifact_location=location)


def _errors() -> tuple[type[BaseException], ...]:
    from mlflow.exceptions import MlflowException

    return (MlflowException, OSError)


def _why(exc: BaseException) -> str:
    """An MLflow or OS error in one line: for a server that cannot be reached, the reason
    (``connection refused (3 tries)``), not urllib3's whole retry report."""
    text = str(exc).strip()
    if "Max retries exceeded" in text or "NewConnectionError" in text:
        reason = re.search(r"\[Errno -?\d+\] ([^\"')]+)", text)
        tries = int(os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0") or 0) + 1
        return (f"the server cannot be reached: "
                f"{reason.group(1).strip() if reason else 'no answer'} ({tries} tries)")
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename:
        return f"{exc.filename} is a file, where the URI needs a folder"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return text.splitlines()[0] if text else repr(exc)


def register(uri: str, name: str, model_dir: str, tags: dict[str, str], *,
             alias: str | None = None, attachments: dict[str, str] | None = None,
             description: str | None = None) -> Registered:
    """Register the model folder ``model_dir`` as a version of ``name`` with ``tags``.

    The folder's files are logged, unchanged, as artifact ``model`` of a run in experiment
    ``mlpipe-promotions`` (``attachments``, tag -> file: artifact ``evidence/FILE``, its location
    the version's tag ``mlpipe.TAG``); the
    version's source is that artifact. A version of ``name`` already tagged with the same
    candidate and model digest is returned instead (``new`` False), its alias set again.

    Raises:
        UsageError: mlflow is missing, or the tracking server refused or cannot be reached.

    Example:
        >>> register("http://127.0.0.1:5000", "defect", "/art/model", tags, alias="champion")
        Registered(registry='mlflow', ..., version='1', uri='models:/defect/1', ...)
    """
    _mlflow()
    candidate, model = tags[TAG_PREFIX + "candidate"], tags[TAG_PREFIX + "model"]
    try:
        client = _client(uri)   # a sqlite:/// URI's store is opened (and its folder made) here
        with contextlib.redirect_stdout(sys.stderr):   # MLflow prints "View run ..." there
            found, extra, new = _register(client, uri, name, model_dir, tags, candidate,
                                          model, alias, attachments, description)
    except _errors() as exc:
        raise UsageError(f"the MLflow registry at {uri} refused the promotion: {_why(exc)}",
                         hint="check the tracking URI (MLFLOW_TRACKING_URI or "
                              "--tracking-uri) and that the server is running") from None
    return Registered("mlflow", uri, name, str(found.version), f"models:/{name}/{found.version}",
                      alias, new, extra)


def _register(client: Any, uri: str, name: str, model_dir: str, tags: dict[str, str],
              candidate: str, model: str, alias: str | None,
              attachments: dict[str, str] | None, description: str | None
              ) -> tuple[Any, dict[str, str], bool]:
    found = promoted_version(client.search_model_versions(f"name = '{name}'", max_results=10_000),
                             candidate, model)
    extra: dict[str, str] = {}
    new = found is None
    if found is None:
        run = client.create_run(_experiment(client, uri),
                                run_name=f"promote {candidate}", tags=tags)
        run_id = run.info.run_id
        client.log_artifacts(run_id, model_dir, "model")
        for shown, path in (attachments or {}).items():
            client.log_artifact(run_id, path, "evidence")
            extra[f"{TAG_PREFIX}{shown}"] = f"runs:/{run_id}/evidence/{Path(path).name}"
        client.set_terminated(run_id)
        try:
            client.create_registered_model(name)
        except _errors()[0] as exc:
            if getattr(exc, "error_code", "") != "RESOURCE_ALREADY_EXISTS":
                raise
        found = client.create_model_version(
            name, source=f"{run.info.artifact_uri}/model", run_id=run_id,
            tags={**tags, **extra}, description=description)
    else:
        extra = {k: v for k, v in (found.tags or {}).items()
                 if k.startswith(TAG_PREFIX) and k not in tags}
    if alias:
        client.set_registered_model_alias(name, alias, found.version)
    return found, extra, new


def parse(ref: str) -> tuple[str, str | None, str | None] | None:
    """``(name, version, alias)`` of a ``models:/NAME/3`` or ``models:/NAME@alias`` URI, or
    None when ``ref`` is not one."""
    m = _MODELS_URI.match(ref)
    if m is None:
        return None
    return m["name"], m["version"], m["alias"]


def fetch(uri: str, ref: str, into: Path) -> tuple[str, str, dict[str, str], Path]:
    """Download the registered version ``ref`` names into ``into``.

    Returns:
        ``(name, version, tags, folder)``: the version's tags and the folder of its files.

    Raises:
        UsageError: not a ``models:/`` URI, no such model, version or alias, or the registry
            cannot be reached.
    """
    mlflow = _mlflow()
    parsed = parse(ref)
    if parsed is None:
        raise UsageError(f"{ref!r} is not a registered model: expected models:/NAME/VERSION, "
                         f"models:/NAME@ALIAS or azureml:NAME:VERSION")
    name, version, alias = parsed
    try:
        client = _client(uri)
        mv = (client.get_model_version(name, version) if version is not None
              else client.get_model_version_by_alias(name, alias))
        source = client.get_model_version_download_uri(name, mv.version)
        into.mkdir(parents=True, exist_ok=True)
        local = mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=str(into),
                                                    tracking_uri=uri)
    except _errors() as exc:
        raise UsageError(f"the MLflow registry at {uri} has no {ref} to trace: {_why(exc)}",
                         hint="list the versions with the MLflow UI or `mlflow models`; check "
                              "MLFLOW_TRACKING_URI") from None
    return name, str(mv.version), dict(mv.tags or {}), Path(local)


__all__ = ["EXPERIMENT", "HTTP_BOUNDS", "fetch", "parse", "register", "tracking_uri"]
