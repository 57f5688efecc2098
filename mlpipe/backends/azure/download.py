"""Bringing the Azure ML outputs a sealed evidence bundle names back here, so that
``mlpipe evidence C --verify --fetch`` can re-hash them against the digests their step records
gave.

Reads the bundle (its run's recorded plan says which Azure ML job produced each step's outputs
and in which workspace) and downloads through the service (``JobsService.fetch_output``, i.e.
azure-ai-ml's ``jobs.download``); never writes to the store.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlpipe.backends.azure.workspace import Workspace
from mlpipe.errors import UsageError


class OutputFetcher:
    """A ``mlpipe.evidence.bundles.verify.Fetch``: downloads the Azure ML output a bundle's artifact
    is into ``folder`` (``folder/<job>/<port>``) and returns where its bytes are (the file of
    a ``uri_file`` output), or None when the job has nothing for that output any more.

    Args:
        service_for: the service for a workspace (``MLClientService(workspace, credential)``).
        folder: where downloads go (the caller removes it).
        workspace: the workspace to download from; by default the one the run was submitted to
            (recorded in the bundle's ``run.options.workspace``).

    Raises (when called):
        UsageError: the artifact is no output of an Azure ML job of the bundle's run.
        AzureError: no credentials, no network, no workspace: nothing can be downloaded.
    """

    def __init__(self, service_for: Callable[[Workspace], Any], folder: Path,
                 workspace: Workspace | None = None) -> None:
        self.service_for = service_for
        self.folder = Path(folder)
        self.workspace = workspace
        self._service: Any = None

    def _job(self, statement: dict[str, Any], artifact: dict[str, Any]) -> tuple[str, str]:
        p = statement["predicate"]
        plan = (p["run"].get("options") or {}).get("steps") or {}
        for st in p["steps"]:
            for out in st["outputs"]:
                job = (plan.get(st["step"]) or {}).get("job_name")
                if out["digest"] == artifact["digest"] and job:
                    return job, out["port"]
        raise UsageError(f"{artifact['location']} is no output of an Azure ML job of run "
                         f"{p['run']['id']}, so --fetch cannot download it",
                         hint="verify without --fetch; it is listed as not re-hashed")

    def __call__(self, statement: dict[str, Any], artifact: dict[str, Any]) -> str | None:
        job, port = self._job(statement, artifact)
        if self._service is None:
            workspace = self.workspace or _recorded(statement)
            self._service = self.service_for(workspace)
            self._service.check_access()
        target = self.folder / job / port
        got = self._service.fetch_output(job, port, target)
        if got is None or not any(p.is_file() for p in [got, *got.rglob("*")]):
            return None
        return str(downloaded_file(got))


def _recorded(statement: dict[str, Any]) -> Workspace:
    run = statement["predicate"]["run"]
    stored = (run.get("options") or {}).get("workspace") or {}
    names = ("subscription_id", "resource_group", "workspace_name")
    if not all(stored.get(k) for k in names):
        raise UsageError(f"run {run['id']} recorded no Azure ML workspace, so --fetch does not "
                         f"know where to download from", hint="verify without --fetch")
    return Workspace(*(stored[k] for k in names), source="the evidence bundle")


def downloaded_file(path: Path) -> Path:
    """The file a downloaded uri_file output is: Azure ML downloads it as a folder holding the
    one file."""
    if path.is_dir():
        entries = list(path.iterdir())
        if len(entries) == 1 and entries[0].is_file():
            return entries[0]
    return path


__all__ = ["OutputFetcher", "downloaded_file"]
