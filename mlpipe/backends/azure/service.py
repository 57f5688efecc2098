"""The Azure ML service boundary: the few calls mlpipe makes, and the live one over MLClient.

Everything on mlpipe's side of this boundary is tested; ``MLClientService`` is the only code
that talks to Azure, is kept to one call per method, and is NOT exercised by the tests (no
test here can reach Azure; see docs/azure.md). It turns Azure's failures into one AzureError
line each: no credentials, no network, rejected request.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from mlpipe.backends.azure.workspace import Workspace
from mlpipe.errors import AzureError

MANAGEMENT_SCOPE = "https://management.azure.com/.default"
NO_CREDENTIALS_HINT = ("run `az login`, or set AZURE_CLIENT_ID, AZURE_TENANT_ID and "
                       "AZURE_CLIENT_SECRET, or run where a managed identity is assigned")


class JobsService(Protocol):
    """What mlpipe asks of Azure ML. Payloads are REST JSON (the ``JobBase`` resource)."""

    def check_access(self) -> None:
        """Raise AzureError when credentials or the network are missing."""

    def create(self, job: Any, experiment: str) -> dict[str, Any]:
        """Submit a loaded ``PipelineJob``; return the created job's REST payload."""

    def get(self, name: str) -> dict[str, Any]:
        """The REST payload of job ``name``."""

    def children(self, name: str) -> list[dict[str, Any]]:
        """The REST payloads of the child jobs of pipeline job ``name``."""

    def metrics(self, run_id: str) -> dict[str, Any]:
        """The MLflow ``runs/get`` payload of ``run_id`` (its latest metrics)."""

    def fetch_output(self, job_name: str, output: str, into: Path) -> Path | None:
        """Download output ``output`` of job ``job_name`` under ``into``; the folder (or
        file) that holds it, or None when the job has no such output."""


def azure_failure(exc: BaseException, workspace: Workspace) -> AzureError:
    """One clear line for an exception raised by azure-core / azure-identity."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ResourceNotFoundError,
        ServiceRequestError,
    )

    if isinstance(exc, ClientAuthenticationError):
        return AzureError("no credentials: DefaultAzureCredential found none that works "
                          f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
                          hint=NO_CREDENTIALS_HINT)
    if isinstance(exc, ServiceRequestError):
        return AzureError("no network: Azure ML cannot be reached "
                          f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
                          hint="check the connection, proxy (HTTPS_PROXY) and firewall, then "
                               "run again")
    if isinstance(exc, ResourceNotFoundError):
        return AzureError(f"no workspace: {workspace.workspace_name!r} was not found in "
                          f"resource group {workspace.resource_group!r} of subscription "
                          f"{workspace.subscription_id!r}",
                          hint="check --workspace, --resource-group and --subscription")
    if isinstance(exc, HttpResponseError):
        return AzureError(f"Azure ML rejected the request: {exc.message or exc}",
                          hint="read the message above; the workspace or job may need it fixed")
    return AzureError(f"Azure ML call failed: {type(exc).__name__}: {exc}")


class MLClientService:
    """The live service: azure-ai-ml's MLClient with DefaultAzureCredential. Not exercised
    by the tests."""

    def __init__(self, workspace: Workspace, credential: Any = None) -> None:
        import logging

        # azure-identity logs every credential it tried; mlpipe says it in one line instead.
        for name in ("azure.identity", "azure.core", "azure.ai.ml"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        from azure.ai.ml import MLClient
        from azure.identity import DefaultAzureCredential

        self.workspace = workspace
        self.credential = credential or DefaultAzureCredential()
        self.client = MLClient(self.credential, workspace.subscription_id,
                               workspace.resource_group, workspace.workspace_name)

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AzureError:
            raise
        except Exception as exc:
            raise azure_failure(exc, self.workspace) from exc

    def check_access(self) -> None:
        self._call(self.credential.get_token, MANAGEMENT_SCOPE)
        self._call(self.client.workspaces.get, self.workspace.workspace_name)

    def create(self, job: Any, experiment: str) -> dict[str, Any]:
        created = self._call(self.client.jobs.create_or_update, job, experiment_name=experiment)
        return created._to_rest_object().serialize(keep_readonly=True)

    def get(self, name: str) -> dict[str, Any]:
        job = self._call(self.client.jobs.get, name)
        return job._to_rest_object().serialize(keep_readonly=True)

    def children(self, name: str) -> list[dict[str, Any]]:
        jobs = self._call(lambda: list(self.client.jobs.list(parent_job_name=name)))
        return [j._to_rest_object().serialize(keep_readonly=True) for j in jobs]

    def metrics(self, run_id: str) -> dict[str, Any]:
        # MLflow's REST API on the workspace's tracking server, with the same credential.
        import json
        import urllib.request

        uri = self._call(lambda: self.client.workspaces.get(
            self.workspace.workspace_name).mlflow_tracking_uri)
        base = uri.replace("azureml://", "https://", 1).replace("/mlflow/v1.0/", "/mlflow/v2.0/")
        token = self._call(self.credential.get_token, "https://ml.azure.com/.default").token
        request = urllib.request.Request(f"{base}/api/2.0/mlflow/runs/get?run_id={run_id}",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)
        except OSError as exc:
            raise AzureError(f"no network: the MLflow tracking server cannot be reached ({exc})",
                             hint="check the connection and run `mlpipe sync` again") from exc

    def fetch_output(self, job_name: str, output: str, into: Path) -> Path | None:
        # azure-ai-ml puts a named output under <download_path>/named-outputs/<output>
        job = self._call(self.client.jobs.get, job_name)
        if output not in (getattr(job, "outputs", None) or {}):
            return None
        self._call(self.client.jobs.download, job_name, download_path=str(into),
                   output_name=output)
        found = Path(into) / "named-outputs" / output
        return found if found.exists() else None
