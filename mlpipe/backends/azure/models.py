"""An Azure ML workspace's model registry as a promotion's destination and a trace's source:
register a candidate's model folder through azure-ai-ml's ``MLClient.models.create_or_update``
(the files uploaded to the workspace's default datastore by the client, once: a version already
tagged with the candidate and its model digest is reused), and download a registered version's
files (``models.download``).

Talks to the workspace only through the ``MLClientService`` it is given (its ``_call`` turns
every failure into one ``AzureError`` line); judges nothing (``evidence.promotion`` gates,
``evidence.trace`` compares).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mlpipe.errors import UsageError
from mlpipe.evidence.qualification.promotion import TAG_PREFIX, Registered, promoted_version

_AZUREML_URI = re.compile(r"^azureml:(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*):(?P<version>\d+)$")


def target(service: Any) -> str:
    """How a promotion names the workspace it registered into."""
    ws = service.workspace
    return (f"azureml://subscriptions/{ws.subscription_id}/resourcegroups/{ws.resource_group}"
            f"/workspaces/{ws.workspace_name}")


def _versions(service: Any, name: str) -> list[Any]:
    from azure.core.exceptions import ResourceNotFoundError

    def listed() -> list[Any]:
        try:
            return list(service.client.models.list(name=name))
        except ResourceNotFoundError:   # no model of that name yet
            return []

    return service._call(f"list the versions of model {name}", listed)


def register(service: Any, name: str, model_path: str, tags: dict[str, str], *,
             description: str | None = None) -> Registered:
    """Register the model at ``model_path`` (a folder or a file) as the next version of
    ``name`` with ``tags``; an MLflow model (an ``MLmodel`` file in the folder) is registered
    as ``mlflow_model``, anything else as ``custom_model``. A version of ``name`` already
    tagged with the same candidate and model digest is returned instead (``new`` False).

    Raises:
        AzureError: the workspace refused or cannot be reached (one line, from the service).

    Example:
        >>> register(service, "defect", "/art/model", tags).uri
        'azureml:defect:1'
    """
    from azure.ai.ml.constants import AssetTypes
    from azure.ai.ml.entities import Model

    candidate, model = tags[TAG_PREFIX + "candidate"], tags[TAG_PREFIX + "model"]
    versions = _versions(service, name)
    found = promoted_version(versions, candidate, model)
    where = target(service)
    if found is not None:
        return Registered("azure", where, name, str(found.version),
                          f"azureml:{name}:{found.version}", None, False)
    numbers = [int(v.version) for v in versions if str(v.version).isdigit()]
    version = str(max(numbers, default=0) + 1)
    path = Path(model_path)
    kind = AssetTypes.MLFLOW_MODEL if (path / "MLmodel").is_file() else AssetTypes.CUSTOM_MODEL
    entity = Model(path=str(path), name=name, version=version, type=kind, tags=dict(tags),
                   description=description)
    created = service._call(f"register model {name}:{version}",
                            service.client.models.create_or_update, entity)
    return Registered("azure", where, name, str(created.version),
                      f"azureml:{name}:{created.version}", None, True)


def parse(ref: str) -> tuple[str, str] | None:
    """``(name, version)`` of an ``azureml:NAME:VERSION`` reference, or None."""
    m = _AZUREML_URI.match(ref)
    return None if m is None else (m["name"], m["version"])


def fetch(service: Any, ref: str, into: Path) -> tuple[str, str, dict[str, str], Path]:
    """Download the registered version ``ref`` (``azureml:NAME:VERSION``) names into ``into``.

    Returns:
        ``(name, version, tags, path)``: the version's tags and the folder (or file) of the
        model as the registry hands it out.

    Raises:
        UsageError: not an ``azureml:NAME:VERSION`` reference.
        AzureError: no such model or version, or the workspace cannot be reached.
    """
    parsed = parse(ref)
    if parsed is None:
        raise UsageError(f"{ref!r} is not a registered Azure ML model: expected "
                         f"azureml:NAME:VERSION (a version number: trace one version)")
    name, version = parsed
    from azure.core.exceptions import ResourceNotFoundError

    def get() -> Any:
        try:
            return service.client.models.get(name, version)
        except ResourceNotFoundError:
            return None

    found = service._call(f"read model {name}:{version}", get)
    if found is None:
        ws = service.workspace
        raise UsageError(f"the Azure ML workspace {ws.workspace_name!r} has no model "
                         f"{name}:{version} to trace",
                         hint=f"list its versions with `az ml model list --name {name}`") from None
    into.mkdir(parents=True, exist_ok=True)
    service._call(f"download model {name}:{version}", service.client.models.download, name,
                  version, str(into))
    # models.download writes into/NAME/<the uploaded folder's or file's name>
    entries = sorted((into / name).iterdir()) if (into / name).is_dir() else []
    if len(entries) != 1:
        raise UsageError(f"model {name}:{version} downloaded as {len(entries)} entries under "
                         f"{into / name}, not the one folder or file it was registered from")
    return name, str(found.version), dict(found.tags or {}), entries[0]


__all__ = ["fetch", "parse", "register", "target"]
