"""The loopback Azure ML workspace: its assets, its jobs, the faults a test asks for, and the
HTTPS server in front of them.

``AzureMLLoopback`` is what tests hold (see the package docstring for its API). The wire
protocol lives in ``server`` (routes) and ``payloads`` (response bodies); this module keeps
the state and starts and stops the server.
"""
from __future__ import annotations

import re
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopback.azureml.jobs import Job, now

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
#: The storage account name that prefixes every blob path on this host (azure-storage-blob
#: reads the account from the first path segment of an IP-address URL).
STORAGE_ACCOUNT = "loopbackstore"


@dataclass
class Fault:
    """An error answer the service gives instead of the real one.

    Attributes:
        status: the HTTP status (401, 403, 404, 429, 500, 503, ...).
        match: a regular expression searched in ``"METHOD /path"`` (no query); None: any
            request but the cloud metadata.
        times: how many matching requests get it (None: all, until ``clear_faults``).
        retry_after: the ``Retry-After`` header (seconds), if any.
        code, message: the ARM error body's code and message (defaults by status).
    """

    status: int
    match: str | None = None
    times: int | None = 1
    retry_after: float | None = None
    code: str | None = None
    message: str | None = None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return self.match is None or re.search(self.match, f"{method} {path}") is not None


@dataclass
class Request:
    """One request the service answered."""

    method: str
    path: str
    query: str
    status: int
    body: bytes = b""


@dataclass
class Asset:
    kind: str
    name: str
    version: str | None
    body: dict[str, Any] = field(default_factory=dict)


DEFAULT_COMPUTES = {"cpu-cluster": ("Standard_DS3_v2", 4), "gpu-cluster": ("Standard_NC24rs_v3", 2)}
DEFAULT_ENVIRONMENTS = {
    ("defect-cpu", "4"): "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04",
    ("defect-gpu", "7"): "mcr.microsoft.com/azureml/curated/acpt-pytorch-2.2-cuda12.1"}
DEFAULT_DATA = {("defect-images", "1"): "uri_folder", ("defect-split", "1"): "uri_file",
                ("defect-split", "2"): "uri_file"}
#: The region's VM sizes (``.../locations/LOC/vmSizes``): name -> (family, vCPUs, GPUs).
DEFAULT_VM_SIZES = {
    "Standard_DS3_v2": ("standardDSv2Family", 4, 0),
    "Standard_D4s_v3": ("standardDSv3Family", 4, 0),
    "Standard_E4ds_v4": ("standardEDSv4Family", 4, 0),
    "Standard_NC6s_v3": ("standardNCSv3Family", 6, 1),
    "Standard_NC24rs_v3": ("standardNCSv3Family", 24, 4),
    "Standard_ND96asr_v4": ("standardNDASv4_A100Family", 96, 8)}
#: The subscription's quota in the region (``.../locations/LOC/usages``): family -> (vCPUs in
#: use, limit).
DEFAULT_USAGES = {"standardDSv2Family": (8, 100), "standardDSv3Family": (0, 100),
                  "standardEDSv4Family": (0, 100), "standardNCSv3Family": (24, 48),
                  "standardNDASv4_A100Family": (0, 0)}


class AzureMLLoopback:
    """An Azure ML workspace on ``https://127.0.0.1:PORT``, for the real ``MLClient``.

    Args:
        subscription_id, resource_group, workspace_name, location: the workspace's names.
        folder: where the throw-away certificate is written (a temporary folder by default).
    """

    def __init__(self, *, subscription_id: str = SUBSCRIPTION, resource_group: str = "rg-ml",
                 workspace_name: str = "ws-defects", location: str = "westeurope",
                 folder: str | Path | None = None) -> None:
        self.subscription_id = subscription_id
        self.resource_group = resource_group
        self.workspace_name = workspace_name
        self.location = location
        self.workspace_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"ws:{workspace_name}"))
        self.created_at = now()
        self._tmp = None if folder is not None else tempfile.TemporaryDirectory(
            prefix="mlpipe-loopback-azureml-")
        self.folder = Path(folder if folder is not None else self._tmp.name)
        self._lock = threading.RLock()
        self._server: Any = None
        self._proxy: Any = None
        self._tunnels: list[str] = []
        self.url = ""
        #: Children per run-history page (None: all on one page). azure-ai-ml's
        #: ``jobs.list(parent_job_name=)`` reads only the first page.
        self.page_size: int | None = None
        self.reset()

    # --- names --------------------------------------------------------------------------------

    @property
    def resource_group_id(self) -> str:
        return f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"

    @property
    def workspace_id_arm(self) -> str:
        return (f"{self.resource_group_id}/providers/Microsoft.MachineLearningServices/"
                f"workspaces/{self.workspace_name}")

    @property
    def storage_account(self) -> str:
        return STORAGE_ACCOUNT

    @property
    def storage_account_id(self) -> str:
        return (f"{self.resource_group_id}/providers/Microsoft.Storage/storageAccounts/"
                f"{self.storage_account}")

    @property
    def container(self) -> str:
        return f"azureml-blobstore-{self.workspace_id}"

    @property
    def storage_suffix(self) -> str:
        """The cloud's storage suffix (its metadata's ``suffixes.storage``)."""
        return "core.loopback.test"

    @property
    def storage_host(self) -> str:
        """The blob host azure-ai-ml reaches the datastore by: ``<account>.blob.<suffix>``,
        served here through the proxy (``loopback.azureml.proxy``)."""
        return f"{self.storage_account}.blob.{self.storage_suffix}"

    @property
    def storage_key(self) -> str:
        """The storage account's key (``listSecrets``); the service does not check signatures."""
        import base64

        return base64.b64encode(f"loopback-key-{self.workspace_id}".encode()).decode()

    @property
    def proxy_url(self) -> str:
        """What ``HTTPS_PROXY`` is set to: the proxy that tunnels the storage host here."""
        return f"http://127.0.0.1:{self._proxy.server_address[1]}"

    @property
    def tunnels(self) -> list[str]:
        """The host of each tunnel the proxy opened, in order (a test can see that a download
        reached the storage host)."""
        return self._tunnels

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def metadata_url(self) -> str:
        """What ``ARM_CLOUD_METADATA_URL`` is set to (ARM's cloud metadata endpoint)."""
        return f"{self.url}/metadata/endpoints?api-version=2019-05-01"

    @property
    def mlflow_tracking_uri(self) -> str:
        """The workspace's MLflow tracking URI, in the ``azureml://`` form the service gives."""
        return (f"azureml://127.0.0.1:{self.port}/mlflow/v1.0{self.workspace_id_arm}")

    @property
    def mlflow_https_uri(self) -> str:
        """The workspace's MLflow as a plain ``https`` tracking URI (what ``azureml-mlflow``
        turns the ``azureml://`` one into), for an MLflow client without that plugin."""
        return f"{self.url}/mlflow/v2.0{self.workspace_id_arm}"

    @property
    def cert_path(self) -> Path:
        return self.folder / "cert.pem"

    def job_arm_id(self, name: str) -> str:
        return f"{self.workspace_id_arm}/jobs/{name}"

    def studio_url(self, job: Job) -> str:
        # azure-ai-ml appends the tenant (``&tid=``) itself.
        return f"https://ml.azure.test/runs/{job.name}?wsid={self.workspace_id_arm}"

    def default_output_uri(self, job: Job, port: str) -> str:
        return f"azureml://datastores/workspaceblobstore/paths/azureml/{job.name}/{port}/"

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> AzureMLLoopback:
        """Write the certificate and serve on a free loopback port (a daemon thread)."""
        from loopback.azureml.proxy import serve_proxy
        from loopback.azureml.server import serve
        from loopback.azureml.tls import write_certificate

        cert, key = write_certificate(self.folder, hosts=(self.storage_host,))
        self._server = serve(self, cert, key)
        self.url = f"https://127.0.0.1:{self.port}"
        self._proxy, self._tunnels = serve_proxy(self._route)
        return self

    def _route(self, host: str) -> tuple[str, int] | None:
        """Where the proxy tunnels ``CONNECT host:443``: the storage host to this service."""
        return ("127.0.0.1", self.port) if host == self.storage_host else None

    def stop(self) -> None:
        for server in (self._server, self._proxy):
            if server is not None:
                server.shutdown()
                server.server_close()
        self._server = self._proxy = None
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> AzureMLLoopback:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def environ(self) -> dict[str, str]:
        """The environment that points azure-ai-ml (and ``ssl``) at this service: the cloud
        metadata, the certificate to trust, and the proxy through which the storage host is
        reached (both spellings: ``urllib`` prefers the lower-case one when both are set;
        loopback addresses bypass it)."""
        bypass = "127.0.0.1,localhost,::1"
        return {"ARM_CLOUD_METADATA_URL": self.metadata_url,
                "REQUESTS_CA_BUNDLE": str(self.cert_path), "SSL_CERT_FILE": str(self.cert_path),
                "HTTPS_PROXY": self.proxy_url, "https_proxy": self.proxy_url,
                "NO_PROXY": bypass, "no_proxy": bypass}

    def credential(self, lifetime_s: int = 3600):
        """A static token credential that this service accepts."""
        from loopback.azureml.credential import StaticTokenCredential

        return StaticTokenCredential(lifetime_s)

    def reset(self) -> None:
        """Back to a fresh workspace: default computes, environments and data assets, no jobs,
        no faults, no requests, no blobs."""
        with self._lock:
            self.jobs: dict[str, Job] = {}
            self.faults: list[Fault] = []
            self.hooks: list[tuple[str, Any]] = []
            #: Exceptions raised while answering (a loopback bug, or a test's script step or
            #: hook that failed): the fixture fails the test that caused them.
            self.errors: list[str] = []
            #: Seconds spent answering requests (summed over the server's threads).
            self.answering_s = 0.0
            self.requests: list[Request] = []
            self.blobs: dict[tuple[str, str], bytes] = {}
            self.blocks: dict[tuple[str, str, str], bytes] = {}
            self.blob_metadata: dict[tuple[str, str], dict[str, str]] = {}
            self._tunnels.clear()
            self.assets: dict[tuple[str, str, str | None], Asset] = {}
            self.computes: dict[str, tuple[str, int]] = dict(DEFAULT_COMPUTES)
            self.environments: dict[tuple[str, str], str] = dict(DEFAULT_ENVIRONMENTS)
            self.data: dict[tuple[str, str], str] = dict(DEFAULT_DATA)
            #: conda specifications of environment versions (YAML text), by (name, version)
            self.conda_files: dict[tuple[str, str], str] = {}
            self.environment_extras: dict[tuple[str, str], dict[str, Any]] = {}
            self.vm_sizes: dict[str, tuple[str, int, int]] = dict(DEFAULT_VM_SIZES)
            self.usages: dict[str, tuple[int, int]] = dict(DEFAULT_USAGES)

    def request_kinds(self) -> dict[str, int]:
        """How many requests of each kind were answered (``PUT components``, ``PUT blob`` ...)."""
        kinds: dict[str, int] = {}
        for r in self.requests:
            if r.path.startswith(f"/{STORAGE_ACCOUNT}/"):
                what = "blob"
            else:
                parts = [p for p in re.split(r"/workspaces/[^/]+", r.path, maxsplit=1)[-1]
                         .split("/") if p]
                what = parts[0] if parts else r.path.strip("/").split("/")[0] or "workspace"
            key = f"{r.method} {what}"
            kinds[key] = kinds.get(key, 0) + 1
        return dict(sorted(kinds.items()))

    # --- what a test sets up ------------------------------------------------------------------

    def add_compute(self, name: str, vm_size: str = "Standard_DS3_v2", max_nodes: int = 4) -> None:
        self.computes[name] = (vm_size, max_nodes)

    def add_environment(self, name: str, version: str,
                        image: str = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04",
                        conda_file: str | None = None, build: str | None = None,
                        tags: dict[str, str] | None = None) -> None:
        """An environment version: its image, or the URI of its Docker build context
        (``build``), and optionally its conda specification and tags."""
        self.environments[(name, version)] = image
        if conda_file is not None:
            self.conda_files[(name, version)] = conda_file
        if build is not None or tags:
            self.environment_extras[(name, version)] = {"build": build, "tags": dict(tags or {})}

    def add_component(self, name: str, version: str) -> None:
        """A registered command component version (as ``az ml component create`` leaves it)."""
        body = {"properties": {"componentSpec": {
            "$schema": "https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json",
            "name": name, "version": version, "type": "command", "command": "echo hello",
            "environment": "azureml:defect-cpu:4"}}}
        self.assets[("components", name, version)] = Asset("components", name, version, body)

    def set_usage(self, family: str, current: int, limit: int) -> None:
        """The quota of VM family ``family`` in the region: vCPUs in use and the limit."""
        self.usages[family] = (current, limit)

    def add_data(self, name: str, version: str, kind: str = "uri_folder") -> None:
        self.data[(name, version)] = kind

    def fail(self, status: int, match: str | None = None, *, times: int | None = 1,
             retry_after: float | None = None, code: str | None = None,
             message: str | None = None) -> Fault:
        """Answer the next ``times`` requests matching ``match`` with ``status``.

        Example:
            >>> lb.fail(429, r"PUT .*/jobs/", times=2, retry_after=0)
        """
        fault = Fault(status, match, times, retry_after, code, message)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def on(self, match: str, fn: Any) -> None:
        """Call ``fn(method, path)`` before answering each request whose ``"METHOD /path"``
        matches (to look at the client's side at that moment); its exception becomes a 500."""
        with self._lock:
            self.hooks.append((match, fn))

    # --- jobs -----------------------------------------------------------------------------------

    def job(self, name: str) -> Job:
        """The job called ``name`` (top-level or child)."""
        return self.jobs[name]

    @property
    def pipelines(self) -> list[Job]:
        """The top-level jobs, oldest first."""
        with self._lock:
            return [j for j in self.jobs.values() if j.parent is None]

    @property
    def last_job(self) -> Job:
        """The newest top-level job (what the last submission created)."""
        found = self.pipelines
        if not found:
            raise LookupError("no job was submitted to the loopback workspace")
        return found[-1]

    def _new_child(self, parent: Job, node: str, definition: dict[str, Any]) -> Job:
        component = self._component_spec(definition.get("componentId"))
        kind = "SubGraph" if (component.get("type") == "pipeline"
                              or definition.get("type") == "pipeline") else "Command"
        name = str(uuid.uuid4())
        root = parent.root
        compute = _last(definition.get("computeId")) or _last(
            (root.definition.get("settings") or {}).get("default_compute"))
        props = {"azureml.runsource": "azureml.StepRun", "azureml.pipelinerunid": root.name,
                 "azureml.pipeline": root.name, "ContentSnapshotId": str(uuid.uuid4()),
                 "StepType": "CommandStep" if kind == "Command" else "SubGraphCloudStep",
                 "ComputeTargetType": "AmlCompute"}
        if kind == "SubGraph":
            props["runSource"] = "SubGraphCloud"
        child = Job(self, name, kind, node=node, parent=parent, experiment=root.experiment,
                    definition={**definition, "componentSpec": component},
                    compute=None if kind == "SubGraph" else compute,
                    tags={"azureml.nodeid": "", "azureml.pipeline": root.name},
                    properties=props)
        child.properties["azureml.nodeid"] = child.node_id
        child.tags["azureml.nodeid"] = child.node_id
        with self._lock:
            self.jobs[name] = child
        return child

    def _component_spec(self, component_id: Any) -> dict[str, Any]:
        if not isinstance(component_id, str):
            return {}
        match = re.search(r"/components/([^/]+)/versions/([^/]+)$", component_id)
        if match is None:
            return {}
        asset = self.assets.get(("components", match.group(1), match.group(2)))
        return dict(((asset.body if asset else {}).get("properties") or {})
                    .get("componentSpec") or {})

    def put_datastore_file(self, uri: str, rel: str, data: bytes | str) -> None:
        """Put a file under an ``azureml://datastores/workspaceblobstore/paths/...`` folder."""
        prefix = uri.split("/paths/", 1)[1] if "/paths/" in uri else uri
        blob = f"{prefix.rstrip('/')}/{rel.lstrip('/')}" if rel else prefix.rstrip("/")
        with self._lock:
            self.blobs[(self.container, blob)] = data.encode() if isinstance(data, str) else data

    def long_datastore_uri(self, uri: str) -> str:
        """``azureml://datastores/D/paths/P`` in the long form the service resolves asset ids
        to (``azureml://subscriptions/.../workspaces/W/datastores/D/paths/P``)."""
        if not uri.startswith("azureml://datastores/"):
            return uri
        return (f"azureml://subscriptions/{self.subscription_id}/resourcegroups/"
                f"{self.resource_group}/workspaces/{self.workspace_name}/"
                + uri[len("azureml://"):])

    def output_asset_id(self, job: Job, port: str) -> str:
        """The asset id run history gives output ``port`` of ``job`` in its ``rundata``: a data
        asset the service registers for each job output, named after the run that wrote it
        (``azureml_<runId>_output_data_<port>``, version 1; issue 35's reading of the
        recordings). A model output's id has no recording: it is shaped as a data output's, in
        the model registry (``models/azureml_<runId>_output_model_<port>``)."""
        out = job.outputs[port]
        run = out.origin or job.name
        model = out.type in ("mlflow_model", "custom_model", "triton_model")
        kind = "models" if model else "data"
        what = "model" if model else "data"
        return (f"azureml://locations/{self.location}/workspaces/{self.workspace_id}/{kind}/"
                f"azureml_{run}_output_{what}_{port}/versions/1")

    def output_of_asset(self, asset_id: str) -> Any:
        """The job output whose run-history asset id is ``asset_id`` (None if none is)."""
        with self._lock:
            for job in self.jobs.values():
                for port, out in job.outputs.items():
                    if out.uri and self.output_asset_id(job, port) == asset_id:
                        return out
        return None

    def datastore_files(self, uri: str) -> dict[str, bytes]:
        """The files under a datastore folder URI, by path relative to it."""
        prefix = (uri.split("/paths/", 1)[1] if "/paths/" in uri else uri).rstrip("/") + "/"
        with self._lock:
            return {blob[len(prefix):]: data for (container, blob), data in self.blobs.items()
                    if container == self.container and blob.startswith(prefix)}


def _last(arm_id: Any) -> str | None:
    if not isinstance(arm_id, str) or not arm_id:
        return None
    return arm_id.rstrip("/").rsplit("/", 1)[-1].removeprefix("azureml:")
