"""Which Azure ML workspace to use: from flags, environment variables or a ``config.json``.

Only resolves names; never contacts Azure and never reads credentials (azure-identity's
DefaultAzureCredential does that, in ``service``).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlpipe.errors import AzureError

#: Environment variables read for each field, first match wins.
ENV_VARS = {
    "subscription_id": ("AZUREML_SUBSCRIPTION_ID", "AZURE_SUBSCRIPTION_ID"),
    "resource_group": ("AZUREML_RESOURCE_GROUP", "AZURE_RESOURCE_GROUP"),
    "workspace_name": ("AZUREML_WORKSPACE_NAME", "AZURE_ML_WORKSPACE"),
}
_FLAGS = {"subscription_id": "--subscription", "resource_group": "--resource-group",
          "workspace_name": "--workspace"}


@dataclass(frozen=True, slots=True)
class Workspace:
    """An Azure ML workspace by its three names, and where each was found."""

    subscription_id: str
    resource_group: str
    workspace_name: str
    source: str = ""

    @property
    def arm_id(self) -> str:
        return (f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}/"
                f"providers/Microsoft.MachineLearningServices/workspaces/{self.workspace_name}")


def find_config(start: str | os.PathLike[str]) -> Path | None:
    """``config.json`` or ``.azureml/config.json`` in ``start`` or a parent (as Azure ML's
    ``MLClient.from_config`` searches)."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        for candidate in (folder / "config.json", folder / ".azureml" / "config.json"):
            if candidate.is_file():
                return candidate
    return None


def resolve_workspace(*, subscription_id: str | None = None, resource_group: str | None = None,
                      workspace_name: str | None = None,
                      config: str | os.PathLike[str] | None = None,
                      env: Mapping[str, str] | None = None,
                      cwd: str | os.PathLike[str] = ".") -> Workspace:
    """The workspace named by flags, else environment variables, else ``config.json``
    (field by field, in that order).

    Args:
        subscription_id, resource_group, workspace_name: from ``--subscription``,
            ``--resource-group``, ``--workspace``.
        config: an explicit ``config.json``; otherwise one is searched from ``cwd`` upwards.
        env: the environment (``os.environ`` by default).

    Raises:
        AzureError: a field is found nowhere (the message names it and the three ways to
            give it), or ``config.json`` is not the JSON object Azure ML writes.

    Example:
        >>> resolve_workspace(subscription_id="s", resource_group="rg", workspace_name="ws")
    """
    env = os.environ if env is None else env
    found: dict[str, str] = {}
    sources: dict[str, str] = {}
    for field, value in (("subscription_id", subscription_id),
                         ("resource_group", resource_group),
                         ("workspace_name", workspace_name)):
        if value:
            found[field], sources[field] = value, "flag"
            continue
        for var in ENV_VARS[field]:
            if env.get(var):
                found[field], sources[field] = env[var], f"${var}"
                break
    path = Path(config) if config is not None else find_config(cwd)
    if len(found) < 3 and path is not None:
        data = _read_config(path)
        for field in ENV_VARS:
            if field not in found and data.get(field):
                found[field], sources[field] = str(data[field]), str(path)
    missing = [f for f in ENV_VARS if f not in found]
    if missing:
        field = missing[0]
        raise AzureError(
            f"no workspace: the {field.replace('_', ' ')} is not given",
            hint=f"pass {_FLAGS[field]}, set {ENV_VARS[field][0]}, or put \"{field}\" in a "
                 f"config.json (Azure ML studio: workspace > Download config file)")
    return Workspace(found["subscription_id"], found["resource_group"], found["workspace_name"],
                     source=", ".join(f"{k}={v}" for k, v in sources.items()))


def _read_config(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AzureError(f"no workspace: {path} does not exist",
                         hint="give the config.json Azure ML studio downloads") from None
    except (OSError, ValueError) as exc:
        raise AzureError(f"no workspace: {path} is not a JSON file ({exc})",
                         hint="give the config.json Azure ML studio downloads") from None
    if not isinstance(data, dict):
        raise AzureError(f"no workspace: {path} holds a JSON {type(data).__name__}, not an "
                         f"object", hint="give the config.json Azure ML studio downloads")
    return data
