"""Reading Azure ML's answers: job and child-job REST payloads and MLflow run payloads,
parsed into plain records (status, reuse, outputs, metrics) for the evidence store.

Pure parsing; the fetching is ``service``'s and the recording is the store's (issue 4).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlpipe.errors import AzureError

#: Azure ML's run properties that mark a reused child job.
REUSED_FLAG = "azureml.isreused"
REUSED_RUN = "azureml.reusedrunid"
REUSED_PIPELINE = ("azureml.reusedpipelinerunid", "azureml.reusedpipeline")
NODE_ID = "azureml.nodeid"
TERMINAL = {"Completed", "Failed", "Canceled", "NotResponding"}


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One Azure ML job (a pipeline job or one of its child jobs) as mlpipe records it."""

    name: str
    job_type: str | None
    status: str | None
    display_name: str | None
    experiment: str | None
    studio_url: str | None
    node: str | None
    compute: str | None
    reused: bool
    reused_from: str | None
    reused_pipeline: str | None
    created_at: str | None
    tags: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str | None] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class SyncedRun:
    """A pipeline job and its child jobs, as fetched by ``sync``."""

    pipeline: JobRecord
    steps: list[JobRecord]

    @property
    def run_id(self) -> str | None:
        return self.pipeline.tags.get("mlpipe.run_id")

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "pipeline": self.pipeline.to_dict(),
                "steps": [s.to_dict() for s in self.steps]}


def _require(payload: Any, key: str, what: str) -> Any:
    if not isinstance(payload, dict) or key not in payload:
        raise AzureError(f"Azure ML returned a {what} without {key!r}",
                         hint="the service answer is not a JobBase resource; report it with "
                              "the payload")
    return payload[key]


def parse_job(payload: dict[str, Any]) -> JobRecord:
    """A JobRecord from a ``JobBase`` REST payload (``GET .../jobs/NAME``).

    Example:
        >>> parse_job({"name": "j1", "properties": {"jobType": "Pipeline",
        ...            "status": "Running"}}).status
        'Running'
    """
    name = _require(payload, "name", "job")
    props = _require(payload, "properties", "job")
    run_props = props.get("properties") or {}
    tags = {str(k): str(v) for k, v in (props.get("tags") or {}).items()}
    studio = ((props.get("services") or {}).get("Studio") or {}).get("endpoint")
    reused_from = run_props.get(REUSED_RUN)
    reused = str(run_props.get(REUSED_FLAG, "")).lower() == "true" or reused_from is not None
    outputs = {}
    for key, out in (props.get("outputs") or {}).items():
        outputs[key] = out.get("uri") if isinstance(out, dict) else None
    compute = props.get("computeId")
    return JobRecord(
        name=name, job_type=props.get("jobType"), status=props.get("status"),
        display_name=props.get("displayName"), experiment=props.get("experimentName"),
        studio_url=studio, node=run_props.get(NODE_ID) or tags.get(NODE_ID)
        or props.get("displayName"),
        compute=compute.rsplit("/", 1)[-1] if isinstance(compute, str) else None,
        reused=reused, reused_from=reused_from,
        reused_pipeline=next((run_props[k] for k in REUSED_PIPELINE if k in run_props), None),
        created_at=(payload.get("systemData") or {}).get("createdAt"), tags=tags,
        outputs=outputs)


def parse_metrics(payload: dict[str, Any]) -> dict[str, float]:
    """The latest value of each metric in an MLflow ``runs/get`` payload."""
    data = ((payload or {}).get("run") or {}).get("data") or {}
    latest: dict[str, tuple[int, int, float]] = {}
    for m in data.get("metrics") or []:
        key = m.get("key")
        order = (int(m.get("step", 0) or 0), int(m.get("timestamp", 0) or 0))
        if key is not None and (key not in latest or order >= latest[key][:2]):
            latest[key] = (*order, float(m["value"]))
    return {k: v[2] for k, v in sorted(latest.items())}


def sync_run(job_name: str, service: Any) -> SyncedRun:
    """Fetch a pipeline job and its child jobs (with their MLflow metrics) and parse them.

    Raises:
        AzureError: no credentials, no network, or a payload that is not a job.
    """
    service.check_access()
    pipeline = parse_job(service.get(job_name))
    steps = []
    for child in service.children(job_name):
        record = parse_job(child)
        # A reused step logged its metrics in the run it reused.
        metrics = parse_metrics(service.metrics(record.reused_from or record.name))
        steps.append(JobRecord(**{**record.to_dict(), "metrics": metrics}))
    return SyncedRun(pipeline, sorted(steps, key=lambda s: s.node or s.name))
