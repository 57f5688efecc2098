"""The loopback service's jobs: pipeline jobs, their child jobs, and each job's MLflow run.

Plain in-memory objects that tests move through their lives (``start``, ``complete``, ``fail``,
``cancel``, ``reuse``) and fill (metrics, tags, params, outputs, artifacts). What the wire sees
is built from them by ``payloads``; nothing here speaks HTTP or imports azure-ai-ml.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

#: The statuses of Azure ML's JobStatus enumeration that a test may set.
STATUSES = ("NotStarted", "Starting", "Provisioning", "Preparing", "Queued", "Running",
            "Finalizing", "CancelRequested", "Completed", "Failed", "Canceled",
            "NotResponding", "Paused")
TERMINAL = ("Completed", "Failed", "Canceled", "NotResponding")
#: The MLflow run status of each job status (MLflow's RunStatus).
MLFLOW_STATUS = {"Completed": "FINISHED", "Failed": "FAILED", "Canceled": "KILLED",
                 "NotResponding": "FAILED", "Running": "RUNNING", "Finalizing": "RUNNING"}


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Metric:
    """One logged value of an MLflow metric."""

    key: str
    value: float
    step: int = 0
    timestamp: int = 0  # epoch milliseconds


@dataclass
class MlflowRun:
    """The MLflow run Azure ML keeps for a job (its id is the job's name)."""

    metrics: list[Metric] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    #: Files logged as MLflow artifacts, by path relative to the run's artifact root.
    artifacts: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Output:
    """A job output as the service reports it: where it lives and its type."""

    uri: str | None
    type: str = "uri_folder"
    mode: str | None = "ReadWriteMount"
    #: The run that wrote it (the original's, for a reused job's output): its asset id names
    #: that run (``azureml_<runId>_output_data_<port>``).
    origin: str | None = None


class Job:
    """One Azure ML job in the loopback workspace.

    A pipeline job is created by a client's PUT; its child jobs appear when a test moves them
    (``pipeline.child("train").start()``), as the service creates a child run when its node
    is scheduled. A node that is itself a pipeline (a pipeline component) becomes a child job of
    kind ``SubGraph`` with child jobs of its own.

    Attributes:
        name: the job's name (the run id).
        kind: ``Pipeline``, ``Command`` or ``SubGraph``.
        node: the node name in the parent pipeline (None for a top-level job).
        status: one of ``STATUSES``.
        properties: the run properties (``azureml.nodeid``, ``azureml.isreused``, ...).
        tags: the job's tags.
        outputs: each output port's location and type.
        mlflow: the job's MLflow run (metrics, params, tags, artifacts).
        error: the status message of a failed job.
    """

    def __init__(self, service: Any, name: str, kind: str, *, display_name: str | None = None,
                 experiment: str = "Default", parent: Job | None = None,
                 node: str | None = None, definition: dict[str, Any] | None = None,
                 compute: str | None = None, tags: dict[str, str] | None = None,
                 properties: dict[str, str] | None = None) -> None:
        self.service = service
        self.name = name
        self.kind = kind
        self.display_name = display_name or node or name
        self.experiment = experiment
        self.experiment_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"experiment:{experiment}"))
        self.parent = parent
        self.node = node
        self.node_id = uuid.uuid4().hex[:8]
        #: The REST definition this job was created from (a PUT body's ``properties`` for a
        #: pipeline job; the node's definition and its component's spec for a child).
        self.definition = definition or {}
        self.compute = compute
        self.tags: dict[str, str] = dict(tags or {})
        self.properties: dict[str, str] = dict(properties or {})
        self.status = "NotStarted"
        self.error: str | None = None
        self.created_at = now()
        self.started_at: datetime | None = None
        self.ended_at: datetime | None = None
        self.outputs: dict[str, Output] = {}
        self.inputs: dict[str, Any] = {}
        self.mlflow = MlflowRun()
        self.reused_from: Job | None = None
        self._children: dict[str, Job] = {}
        self._script: list[Callable[[Job], Any]] = []
        self._lock = threading.RLock()

    # --- the tree ---------------------------------------------------------------------------

    @property
    def root(self) -> Job:
        job = self
        while job.parent is not None:
            job = job.parent
        return job

    @property
    def node_path(self) -> str:
        """``outer.inner`` for a job of a nested pipeline."""
        parts, job = [], self
        while job.parent is not None:
            parts.append(job.node or job.name)
            job = job.parent
        return ".".join(reversed(parts))

    def nodes(self) -> dict[str, dict[str, Any]]:
        """The node definitions of a pipeline job (or of a SubGraph's pipeline component)."""
        if self.kind == "Pipeline":
            return dict(self.definition.get("jobs") or {})
        if self.kind == "SubGraph":
            spec = self.definition.get("componentSpec") or {}
            return dict(spec.get("jobs") or {})
        return {}

    def child(self, path: str) -> Job:
        """The child job of node ``path`` (``train``, or ``inner.fit`` inside a nested
        pipeline), created as the service would when the node is scheduled.

        Raises:
            KeyError: the pipeline has no such node.
        """
        head, _, rest = path.partition(".")
        with self._lock:
            if head not in self._children:
                nodes = self.nodes()
                if head not in nodes:
                    raise KeyError(f"job {self.name} has no node {head!r} "
                                   f"(nodes: {', '.join(sorted(nodes)) or 'none'})")
                self._children[head] = self.service._new_child(self, head, nodes[head])
            found = self._children[head]
        return found.child(rest) if rest else found

    @property
    def children(self) -> list[Job]:
        """The child jobs created so far, in creation order (``listed_children`` is the order
        run history lists them in)."""
        with self._lock:
            return list(self._children.values())

    @property
    def listed_children(self) -> list[Job]:
        """The child jobs in the order ``runs/{id}/children`` gives them: by run id, a GUID,
        so in no order a client may rely on (recorded: test_pipeline_job_child_run_download,
        the children entry lists node 1's run before node 2's only by chance)."""
        return sorted(self.children, key=lambda j: j.name)

    def walk(self) -> Iterable[Job]:
        """This job and every job below it."""
        yield self
        for child in self.children:
            yield from child.walk()

    # --- its life -----------------------------------------------------------------------------

    def set_status(self, status: str, message: str | None = None) -> Job:
        """Move the job to ``status`` (one of ``STATUSES``), with a status message."""
        if status not in STATUSES:
            raise ValueError(f"{status!r} is not an Azure ML job status ({', '.join(STATUSES)})")
        with self._lock:
            self.status = status
            if status not in ("NotStarted", "Queued", "Preparing", "Starting", "Provisioning"):
                self.started_at = self.started_at or now()
            if status in TERMINAL:
                self.ended_at = now()
            if message is not None:
                self.error = message
        return self

    def start(self) -> Job:
        """``Running`` (a pipeline's parents start with their first child)."""
        if self.parent is not None and self.parent.status == "NotStarted":
            self.parent.start()
        return self.set_status("Running")

    def complete(self) -> Job:
        """``Completed``; outputs not set by the test get the service's default location."""
        if self.started_at is None:
            self.start()
        for port in self.declared_outputs():
            self.outputs.setdefault(port, Output(self.service.default_output_uri(self, port),
                                                 self.declared_outputs()[port]))
        return self.set_status("Completed")

    def fail(self, message: str = "UserError: the job's command exited with code 1") -> Job:
        """``Failed`` with ``message`` as its error."""
        if self.started_at is None:
            self.start()
        return self.set_status("Failed", message)

    def cancel(self, message: str = "Canceled by the user") -> Job:
        return self.set_status("Canceled", message)

    def end_unstarted(self, status: str = "Canceled", message: str | None = None) -> Job:
        """End the job without it ever starting (a node the service never ran after an upstream
        one failed): no start time and no MLflow run (``runs/get`` answers 404)."""
        if status not in TERMINAL:
            raise ValueError(f"{status!r} is not a terminal status ({', '.join(TERMINAL)})")
        with self._lock:
            self.status, self.ended_at = status, now()
            self.error = message if message is not None else self.error
        return self

    def reuse(self, original: Job) -> Job:
        """Mark this child as reused from ``original`` the way the service does: it completes
        at once, its run properties name the original run, node and pipeline run, and its
        outputs are the original's."""
        with self._lock:
            self.reused_from = original
            self.properties.update({
                "azureml.isreused": "true",
                "azureml.reusedrunid": original.name,
                "azureml.reusednodeid": original.node_id,
                "azureml.reusedpipeline": original.root.name,
                "azureml.reusedpipelinerunid": original.root.name,
            })
            self.outputs = {port: Output(out.uri, out.type, out.mode,
                                         out.origin or original.name)
                            for port, out in original.outputs.items()}
        if self.parent is not None and self.parent.status == "NotStarted":
            self.parent.start()
        self.started_at = self.started_at or now()
        return self.set_status("Completed")

    def declared_outputs(self) -> dict[str, str]:
        """Each declared output port and its type, from the job's definition."""
        if self.kind == "Pipeline":
            outs = self.definition.get("outputs") or {}
        else:
            spec = self.definition.get("componentSpec") or {}
            outs = spec.get("outputs") or {}
        return {port: str((out or {}).get("jobOutputType") or (out or {}).get("type")
                          or "uri_folder") for port, out in outs.items()}

    # --- what a step logs ------------------------------------------------------------------

    def log_metric(self, key: str, value: float, step: int = 0,
                   timestamp: int | None = None) -> Job:
        """Log one value of metric ``key`` to this job's MLflow run."""
        self.mlflow.metrics.append(Metric(key, float(value), int(step),
                                          int(timestamp if timestamp is not None
                                              else time.time() * 1000)))
        return self

    def set_tag(self, key: str, value: str) -> Job:
        """Set an MLflow run tag (``mlpipe.scope.acc = partial``)."""
        self.mlflow.tags[key] = str(value)
        return self

    def log_param(self, key: str, value: Any) -> Job:
        self.mlflow.params[key] = str(value)
        return self

    def log_artifact(self, path: str, data: bytes | str) -> Job:
        """Log a file as an MLflow artifact of this job's run."""
        self.mlflow.artifacts[path.strip("/")] = data.encode() if isinstance(data, str) else data
        return self

    def set_output(self, port: str, *, uri: str | None = None, type: str | None = None,
                   files: dict[str, bytes | str] | None = None) -> Job:
        """Set where output ``port`` lives (by default the service's location for this job),
        and put ``files`` there, in the workspace's default datastore."""
        declared = self.declared_outputs()
        where = uri or self.service.default_output_uri(self, port)
        self.outputs[port] = Output(where, type or declared.get(port, "uri_folder"))
        for rel, data in (files or {}).items():
            self.service.put_datastore_file(where, rel, data)
        return self

    # --- scripted lives ----------------------------------------------------------------------

    def script(self, *steps: Callable[[Job], Any]) -> Job:
        """Steps applied one per GET of this job (``jobs.get`` from a client that follows it),
        so a test can stage a life that a waiting client sees unfold, independent of timing.

        Example:
            >>> pipeline.script(lambda p: p.child("prepare").start(),
            ...                 lambda p: p.child("prepare").complete())
        """
        with self._lock:
            self._script.extend(steps)
        return self

    def _advance(self) -> None:
        with self._lock:
            step = self._script.pop(0) if self._script else None
        if step is not None:
            step(self)

    def __repr__(self) -> str:
        return f"<Job {self.name} {self.kind} {self.node_path or ''} {self.status}>"
