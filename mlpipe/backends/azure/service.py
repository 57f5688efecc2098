"""The Azure ML service boundary: the few calls mlpipe makes, and the live one over MLClient.

``MLClientService`` is the only code that talks to Azure. It submits and reads pipeline jobs
with azure-ai-ml's ``MLClient`` (``jobs.create_or_update``, ``jobs.get``, ``workspaces.get``)
and reads child jobs (run history) and their metrics (the workspace's MLflow REST API) with
azure-core over the same credential, because azure-ai-ml's child-job entities drop what mlpipe
records (status message, times, outputs). The tests run it against a loopback Azure ML
(``loopback/azureml``). Every failure becomes one ``AzureError`` line (``azure_failure``).
"""
from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from mlpipe.backends.azure.jobkinds import job_kind_named
from mlpipe.backends.azure.workspace import Workspace
from mlpipe.errors import AzureError

NO_CREDENTIALS_HINT = ("run `az login`, or set AZURE_CLIENT_ID, AZURE_TENANT_ID and "
                       "AZURE_CLIENT_SECRET, or run where a managed identity is assigned")
#: Retries of a throttled (429) or failing (408, 500, 502, 503, 504) request: how many, and
#: the longest wait between two (a Retry-After the service asks for is honoured up to it).
RETRIES, BACKOFF_FACTOR_S, MAX_WAIT_S = 4, 0.5, 30.0
HISTORY_CHILDREN = ("history/v1.0/subscriptions/{sub}/resourceGroups/{rg}/providers/"
                    "Microsoft.MachineLearningServices/workspaces/{ws}/runs/{run}/children")
#: What run history's ``rundata`` is asked for: the run's metadata, where its outputs are (the
#: body azure-ai-ml's ``jobs.download`` sends asks for the definitions too; mlpipe reads none).
RUN_DATA_REQUEST = {"selectRunMetadata": True}


class JobsService(Protocol):
    """What mlpipe asks of Azure ML. Payloads are REST JSON: ``JobBase`` for a pipeline job,
    run history's ``Run`` for a child job, MLflow's ``GetRun`` response for metrics."""

    def check_access(self) -> None:
        """Raise AzureError when credentials, the network or the workspace are missing."""

    def create(self, job: Any, experiment: str) -> dict[str, Any]:
        """Submit a loaded ``PipelineJob``; return the created job's ``JobBase`` payload."""
        ...

    def get(self, name: str) -> dict[str, Any]:
        """The ``JobBase`` payload of pipeline job ``name``."""
        ...

    def children(self, name: str) -> list[dict[str, Any]]:
        """The run-history ``Run`` payloads of the child jobs of ``name`` (every page)."""
        ...

    def metrics(self, run_id: str) -> dict[str, Any]:
        """The MLflow ``runs/get`` payload of ``run_id`` (its latest metrics)."""
        ...

    def run_data(self, run_id: str) -> dict[str, Any]:
        """Run history's ``rundata`` answer for ``run_id`` (``runMetadata.outputs``: where the
        run's outputs are, as asset ids)."""
        ...

    def fetch_output(self, job_name: str, output: str, into: Path) -> Path | None:
        """Download output ``output`` of job ``job_name`` under ``into``; the folder (or
        file) that holds it, or None when the job has no such output."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _service_error(exc: Any) -> tuple[str | None, str]:
    """The service's error code and message from an azure-core HttpResponseError."""
    error = getattr(exc, "error", None)
    code, message = getattr(error, "code", None), getattr(error, "message", None)
    response = getattr(exc, "response", None)
    if (code is None or message is None) and response is not None:
        try:
            body = response.json()
        except Exception:
            body = None
        if isinstance(body, dict):
            err = body.get("error")
            inner = err if isinstance(err, dict) else body
            code = code or inner.get("code") or inner.get("error_code")
            message = message or inner.get("message")
    return code, (message or getattr(exc, "reason", None) or _first_line(exc)).strip()


def refusal(exc: Any) -> str:
    """What the service answered to a refused request, on one line: ``404 ResourceNotFound:
    The resource was not found.`` (an empty body leaves the status and azure-core's reason)."""
    status = getattr(getattr(exc, "response", None), "status_code", None) or getattr(
        exc, "status_code", None)
    code, message = _service_error(exc)
    text = " ".join(f"{code}: {message}".split()) if code else " ".join(message.split())
    return f"{status} {text}" if status else text


def _url(exc: Any) -> str:
    response = getattr(exc, "response", None)
    request = getattr(response, "request", None)
    return str(getattr(request, "url", "") or "")


#: azure-ai-ml's own words for a compute the job names that answered 404 (its body empty).
_NO_COMPUTE = re.compile(r"Not found compute with name '?([^\s'\")]+)", re.I)
_MISSING = re.compile(r"\b(compute|environment|component|data|datastore|code)\b[^.]*?\b"
                      r"(?:was )?not (?:be )?found", re.I)


def azure_failure(exc: BaseException, workspace: Workspace, doing: str = "call Azure ML"
                  ) -> AzureError:
    """One clear line (and a hint) for an exception raised by azure-core, azure-identity or
    azure-ai-ml while mlpipe was ``doing`` something (``"submit the job"``).

    Example:
        >>> azure_failure(ServiceRequestError("no route"), ws).message
        'no network: Azure ML cannot be reached (no route)'
    """
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

    where = (f"workspace {workspace.workspace_name!r} (resource group "
             f"{workspace.resource_group!r}, subscription {workspace.subscription_id!r})")
    status = getattr(getattr(exc, "response", None), "status_code", None) or getattr(
        exc, "status_code", None)
    if isinstance(exc, ClientAuthenticationError) and status is None:
        return AzureError("no credentials: DefaultAzureCredential found none that works "
                          f"({_first_line(exc)})", hint=NO_CREDENTIALS_HINT)
    if not isinstance(exc, HttpResponseError):
        return _failure_without_response(exc, where, doing)
    return _failure_of_response(exc, status, workspace, where, doing)


def _failure_without_response(exc: BaseException, where: str, doing: str) -> AzureError:
    """No answer from the service: no network, no cloud endpoints, or azure-ai-ml's own
    validation refusing the job before it was sent."""
    from azure.core.exceptions import ServiceRequestError, ServiceResponseError

    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return AzureError(f"no network: Azure ML cannot be reached ({_first_line(exc)})",
                          hint="check the connection, proxy (HTTPS_PROXY) and firewall, then "
                               "run again")
    if "Unknown cloud environment" in str(exc):
        import os

        url = os.environ.get("ARM_CLOUD_METADATA_URL")
        return AzureError("no network: azure-ai-ml cannot read the cloud's endpoints"
                          + (f" from ARM_CLOUD_METADATA_URL ({url})" if url else "")
                          + f" ({_first_line(exc)})",
                          hint="check the connection and ARM_CLOUD_METADATA_URL (unset it for "
                               "the public Azure cloud), then run again")
    found = _validation_errors(exc)
    if found:
        path, text = found[0]
        compute = _NO_COMPUTE.search(text)
        if compute:
            return _no_compute(compute.group(1), where, f"{path}: {text}")
        missing = _MISSING.search(text)
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        if missing:
            return _missing(missing.group(1).lower(), where, f"{path}: {text}{more}")
        return AzureError(f"azure-ai-ml refused the job before sending it: {path}: "
                          f"{text}{more}", hint="fix the pipeline's definition; `mlpipe "
                                                "compile` writes the YAML azure-ai-ml reads")
    return AzureError(f"Azure ML call failed while trying to {doing}: "
                      f"{type(exc).__name__}: {_first_line(exc)}",
                      hint="run again; if it persists, report it with this line")


def _failure_of_response(exc: BaseException, status: int | None, workspace: Workspace,
                         where: str, doing: str) -> AzureError:
    """An answer from the service that refuses the request, by its status."""
    from azure.core.exceptions import ResourceNotFoundError

    code, message = _service_error(exc)
    said = f"{status} {code}: {message}" if code else f"{status}: {message}"
    if status == 401:
        return AzureError(f"not authenticated: Azure ML refused the credentials' token ({said})",
                          hint="sign in again (`az login`) or renew the service principal's "
                               "secret; check that AZURE_TENANT_ID is the workspace's tenant")
    if status == 403:
        return AzureError(f"not authorized: the signed-in identity may not {doing} in {where} "
                          f"({said})", hint="ask for a role on the workspace that allows it "
                                            "(AzureML Data Scientist submits and reads jobs)")
    if status == 429:
        return AzureError(f"throttled: Azure ML kept answering 429 Too Many Requests while "
                          f"mlpipe tried to {doing} ({RETRIES + 1} tries, waits up to "
                          f"{MAX_WAIT_S:g} s between them)",
                          hint="wait a few minutes and run again; other clients may be using "
                               "the workspace's request quota")
    if status is not None and status >= 500:
        return AzureError(f"Azure ML service error while trying to {doing}: {said} "
                          f"({RETRIES + 1} tries)",
                          hint="run again later; if it persists, check the Azure status page "
                               "and report it with this line")
    missing = _MISSING.search(message)
    if isinstance(exc, ResourceNotFoundError) or status == 404 or missing:
        return _not_found(exc, code, said, missing, workspace, where)
    return AzureError(f"Azure ML rejected the request to {doing}: {said}",
                      hint="read the message above; the pipeline or the workspace needs it "
                           "fixed")


def _not_found(exc: BaseException, code: Any, said: str, missing: re.Match[str] | None,
               workspace: Workspace, where: str) -> AzureError:
    """What a 404 (or a message that something was not found) says is missing: the
    workspace, a job, or what the job names."""
    from urllib.parse import unquote

    url = _url(exc)
    if re.search(r"/workspaces/[^/?]+(\?|$)", url) or "SubscriptionNotFound" in str(code) \
            or "ResourceGroupNotFound" in str(code) or (
                url.rstrip("/").split("?")[0].endswith(workspace.workspace_name)):
        return AzureError(f"no workspace: {where} was not found ({said})",
                          hint="check --workspace, --resource-group and --subscription")
    run = re.search(r"/mlflow/.*[?&]run_id=([^&]+)", url)
    if run:  # a job that never started has no MLflow run
        return AzureError(f"no MLflow run: the workspace's MLflow has no run "
                          f"{unquote(run.group(1))!r} ({said})",
                          hint="a job that never started logged nothing; sync again once it ran")
    compute = _NO_COMPUTE.search(said) or re.search(r"/computes/([^/?]+)", url)
    if compute:  # the service answers a missing compute 404 with an empty body
        return _no_compute(compute.group(1), where, said)
    job = re.search(r"/jobs/([^/?]+)", url)
    if job and not missing:
        return AzureError(f"no job: Azure ML has no job {job.group(1)!r} in {where}",
                          hint="check the job name (`mlpipe runs` shows the runs and their "
                               "jobs); a deleted job cannot be synced")
    return _missing(missing.group(1).lower() if missing else "resource", where, said)


_MISSING_HINTS = {
    "compute": "create the compute cluster in the workspace, or pass --compute NAME of one "
               "that exists (`az ml compute list`)",
    "environment": "register the environment version the component names (`az ml environment "
                   "create`), or change the component's Environment(...)",
    "data": "register the data asset version, or pass --input NAME=PATH/URI of data that "
            "exists"}


def _no_compute(name: str, where: str, said: str) -> AzureError:
    return AzureError(f"no compute: {where} has no compute {name!r} ({said})",
                      hint=f"create it (`az ml compute create --type amlcompute --name {name} "
                           f"...`), or pass --compute NAME of one that exists (`az ml compute "
                           f"list`)")


def _missing(kind: str, where: str, said: str) -> AzureError:
    return AzureError(f"no {kind}: Azure ML could not find what the job names in {where} "
                      f"({said})", hint=_MISSING_HINTS.get(kind, "check the names the job "
                                                                 "refers to"))


def _validation_errors(exc: BaseException) -> list[tuple[str, str]]:
    """``(field path, first line)`` of each error in azure-ai-ml's validation result, which
    its exceptions carry as JSON (``{"result": "Failed", "errors": [...]}``)."""
    import json

    text = str(getattr(exc, "message", None) or exc)
    start = text.find("{")
    try:
        found = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return []
    errors = found.get("errors") if isinstance(found, dict) else None
    return [(str(e.get("path") or "job"), _first_line(Exception(str(e.get("message") or ""))))
            for e in errors or [] if isinstance(e, dict)]


def _retry_policy():
    from azure.core.pipeline.policies import RetryPolicy

    class BoundedRetryPolicy(RetryPolicy):
        """azure-core's retries, with each wait (Retry-After included) capped at MAX_WAIT_S."""

        def sleep(self, settings, transport, response=None):
            import time

            wait = None
            if response is not None:
                wait = self.get_retry_after(response)
            if wait is None:
                wait = self.get_backoff_time(settings)
            if wait and wait > 0:
                time.sleep(min(wait, MAX_WAIT_S))

    return BoundedRetryPolicy(retry_total=RETRIES, retry_status=RETRIES, retry_connect=RETRIES,
                              retry_read=RETRIES, retry_backoff_factor=BACKOFF_FACTOR_S,
                              retry_backoff_max=MAX_WAIT_S)


class MLClientService:
    """The live service: azure-ai-ml's MLClient, DefaultAzureCredential unless a credential is
    given, bounded retries on throttling and service errors."""

    def __init__(self, workspace: Workspace, credential: Any = None) -> None:
        import logging

        # azure-identity logs every credential it tried; mlpipe says it in one line instead.
        for name in ("azure.identity", "azure.core", "azure.ai.ml"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        from mlpipe.backends.azure.validate import uncollected

        with uncollected():
            from azure.ai.ml import MLClient

        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        self.workspace = workspace
        self.credential = credential
        self.retry_policy = _retry_policy()
        self.client = self._call(
            "connect", MLClient, credential, workspace.subscription_id, workspace.resource_group,
            workspace.workspace_name, show_progress=False, retry_policy=self.retry_policy)
        self._rest = None
        self._base = None

    def _call(self, doing: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AzureError:
            raise
        except Exception as exc:
            raise azure_failure(exc, self.workspace, doing) from exc

    # --- raw REST over azure-core, for run history and MLflow -----------------------------------

    def _scope(self, which: str) -> str:
        from azure.ai.ml._azure_environments import (
            _get_aml_resource_id_from_metadata,
            _get_base_url_from_metadata,
        )

        if which == "aml":
            return _get_aml_resource_id_from_metadata() + "/.default"
        return _get_base_url_from_metadata() + "/.default"

    def _send(self, doing: str, url: str, scope: str, json: Any = None) -> Any:
        from azure.core import PipelineClient
        from azure.core.exceptions import HttpResponseError, map_error
        from azure.core.pipeline.policies import (
            BearerTokenCredentialPolicy,
            HeadersPolicy,
            UserAgentPolicy,
        )
        from azure.core.rest import HttpRequest

        from mlpipe.version import __version__

        if self._rest is None:
            self._rest = {}
        clients = self._rest
        if scope not in clients:
            clients[scope] = PipelineClient(base_url="https://localhost", policies=[
                HeadersPolicy(), UserAgentPolicy(f"mlpipe/{__version__}"), self.retry_policy,
                BearerTokenCredentialPolicy(self.credential, scope)])

        def go():
            response = clients[scope].send_request(
                HttpRequest("GET", url) if json is None else HttpRequest("POST", url, json=json))
            if response.status_code != 200:
                map_error(response.status_code, response, {})
                raise HttpResponseError(response=response)
            return response.json()

        return self._call(doing, go)

    def _service_url(self) -> str:
        """The workspace's data-plane base URL, from its discovery document."""
        if self._base is None:
            ws = self._call("read the workspace", self.client.workspaces.get,
                            self.workspace.workspace_name)
            found = self._send("read the workspace's discovery document", ws.discovery_url,
                               self._scope("arm"))
            self._base = str(found.get("api") or found.get("history")).rstrip("/")
            self._tracking = ws.mlflow_tracking_uri
        return self._base

    # --- the JobsService calls ------------------------------------------------------------------

    def check_access(self) -> None:
        self._call("get a token", self.credential.get_token, self._scope("arm"))
        self._service_url()

    def create(self, job: Any, experiment: str) -> dict[str, Any]:
        import contextlib
        import io
        import sys

        # azure-ai-ml prints a color reset and blank lines to stderr after each code upload,
        # even with show_progress=False; pass on only what says something.
        printed = io.StringIO()
        try:
            with contextlib.redirect_stderr(printed):
                created = self._call("submit the pipeline job",
                                     self.client.jobs.create_or_update, job,
                                     experiment_name=experiment)
        finally:
            said = re.sub(r"\x1b\[[0-9;]*m", "", printed.getvalue()).strip()
            if said:
                print(said, file=sys.stderr)
        return job_payload(created)

    def get(self, name: str) -> dict[str, Any]:
        return job_payload(self._call(f"read job {name!r}", self.client.jobs.get, name))

    def children(self, name: str) -> list[dict[str, Any]]:
        from urllib.parse import quote

        ws = self.workspace
        url = f"{self._service_url()}/" + HISTORY_CHILDREN.format(
            sub=ws.subscription_id, rg=ws.resource_group, ws=ws.workspace_name,
            run=quote(name, safe=""))
        runs: list[dict[str, Any]] = []
        token = None
        while True:
            page = self._send(f"list the child jobs of {name!r}",
                              url + (f"?$continuationtoken={quote(token, safe='')}" if token
                                     else ""), self._scope("arm"))
            runs.extend(page.get("value") or [])
            token = page.get("continuationToken")
            if not token:
                return runs

    def metrics(self, run_id: str) -> dict[str, Any]:
        from urllib.parse import quote, urlsplit

        self._service_url()
        tracking = urlsplit(self._tracking or "")
        path = tracking.path.replace("/mlflow/v1.0/", "/mlflow/v2.0/", 1).rstrip("/")
        url = (f"https://{tracking.netloc}{path}/api/2.0/mlflow/runs/get?"
               f"run_id={quote(run_id, safe='')}")
        return self._send(f"read the MLflow run of {run_id!r}", url, self._scope("aml"))

    def run_data(self, run_id: str) -> dict[str, Any]:
        return self._send(f"read the run data of {run_id!r}",
                          self._workspace_path("history/v1.0") + "/rundata", self._scope("arm"),
                          json={"runId": run_id, **RUN_DATA_REQUEST})

    def fetch_output(self, job_name: str, output: str, into: Path) -> Path | None:
        # jobs.download reads the job's outputs from run history (a pipeline's child job has
        # no outputs in the entity jobs.get gives), resolves the output's asset id through
        # the data or model plane, and downloads its files from the datastore's storage
        # account, under <download_path>/named-outputs/<output>; an output the job does not
        # have is skipped (nothing downloaded).
        doing = f"download output {output!r} of job {job_name!r}"
        try:
            self._call(doing, self.client.jobs.download, job_name, download_path=str(into),
                       output_name=output)
        except AzureError as err:
            if not _cannot_resolve_models(err.__cause__):
                raise
            self._download_model(job_name, output, Path(into), doing)
        found = Path(into) / "named-outputs" / output
        return found if found.exists() else None

    def _workspace_path(self, api: str) -> str:
        ws = self.workspace
        return (f"{self._service_url()}/{api}/subscriptions/{ws.subscription_id}/resourceGroups/"
                f"{ws.resource_group}/providers/Microsoft.MachineLearningServices/workspaces/"
                f"{ws.workspace_name}")

    def _download_model(self, job_name: str, output: str, into: Path, doing: str) -> None:
        """What ``jobs.download`` does for a model output, where azure-ai-ml cannot: the run's
        output (of the job it reused, for a reused job), its asset id resolved through the model
        registry, its files downloaded from the datastore by azure-ai-ml."""
        from urllib.parse import quote

        from azure.ai.ml._artifacts._artifact_utilities import download_artifact_from_aml_uri

        run = self._send(doing, self._workspace_path("history/v1.0") + "/runs/"
                         + quote(job_name, safe=""), self._scope("arm"))
        props = run.get("properties") or {}
        if str(props.get("azureml.isreused", "")).lower() == "true" and props.get(
                "azureml.reusedrunid"):
            job_name = props["azureml.reusedrunid"]
        # run history's runs/{id} answers "outputs": null; the outputs are in its run data
        found_run = (self.run_data(job_name).get("runMetadata") or {})
        asset = ((found_run.get("outputs") or {}).get(output) or {}).get("assetId")
        if not asset:
            return
        found = self._send(doing, self._workspace_path("modelregistry/v1.0")
                           + "/models/batchGetResolvedUris", self._scope("arm"),
                           json={"values": [asset]})
        path = (((found or {}).get("values") or {}).get(asset) or {}).get("path")
        if path:
            self._call(doing, download_artifact_from_aml_uri, uri=path,
                       destination=str(into / "named-outputs" / output),
                       datastore_operation=self.client.datastores)


def _cannot_resolve_models(exc: BaseException | None) -> bool:
    """azure-ai-ml 1.35's ``jobs.download`` of a model output (run history type
    ``MLFlowModel``, ``CustomModel``, ``TritonModel``) fails before sending anything: it builds
    ``BatchGetResolvedUrisDto(values=...)``, a keyword its model does not accept."""
    return isinstance(exc, TypeError) and "BatchGetResolvedUrisDto" in str(exc)


def job_payload(job: Any) -> dict[str, Any]:
    """A ``JobBase`` REST payload from an azure-ai-ml ``Job`` entity (``jobs.get`` and
    ``jobs.create_or_update`` give entities; their ``_to_rest_object`` drops the status and
    the services)."""
    created = getattr(getattr(job, "creation_context", None), "created_at", None)
    outputs = {}
    for port, out in (getattr(job, "outputs", None) or {}).items():
        path = getattr(out, "path", None)
        outputs[port] = {"jobOutputType": str(getattr(out, "type", "") or "") or None,
                         "uri": str(path) if path else None}
    services = {}
    if getattr(job, "studio_url", None):
        services["Studio"] = {"jobServiceType": "Studio", "endpoint": job.studio_url}
    status = getattr(job, "status", None)
    kind = str(getattr(job, "type", "") or "")
    return {
        "id": getattr(job, "id", None), "name": job.name,
        "systemData": {"createdAt": created.isoformat() if isinstance(created, date)
                       else created},
        "properties": {
            "jobType": getattr(job_kind_named(kind), "rest_type", None) or kind or None,
            "status": str(getattr(status, "value", status)) if status is not None else None,
            "displayName": getattr(job, "display_name", None),
            "experimentName": getattr(job, "experiment_name", None),
            "tags": dict(getattr(job, "tags", None) or {}),
            "properties": dict(getattr(job, "properties", None) or {}),
            "services": services, "outputs": outputs,
            "computeId": getattr(job, "compute", None)}}

