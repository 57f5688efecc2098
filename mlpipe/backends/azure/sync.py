"""Reading Azure ML's answers: pipeline-job (``JobBase``), child-job (run history ``Run``) and
MLflow run payloads, parsed into plain records (status, reuse, outputs, metrics, times) for the
evidence store.

Parsing, and the walk over a pipeline job's children; the fetching is ``service``'s and the
recording is ``ingest``'s. Never imports azure-ai-ml or the store.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mlpipe.backends.azure.download import downloaded_file
from mlpipe.errors import AzureError

#: Azure ML's run properties that mark a reused child job.
REUSED_FLAG = "azureml.isreused"
REUSED_RUN = "azureml.reusedrunid"
REUSED_PIPELINE = ("azureml.reusedpipelinerunid", "azureml.reusedpipeline")
REUSED_NODE = "azureml.reusednodeid"
NODE_ID = "azureml.nodeid"
TERMINAL = {"Completed", "Failed", "Canceled", "NotResponding"}
#: The run property that marks a child run as a nested pipeline (a pipeline component node).
SUBGRAPH = ("runSource", "SubGraphCloud")
#: Run history's output types for models, as Azure ML job output types.
MODEL_TYPES = {"MLFlowModel": "mlflow_model", "CustomModel": "custom_model",
               "TritonModel": "triton_model"}
#: The MLflow run tags by which a step marks a metric's scope and population
#: (``mlpipe.scope.NAME = partial``); a metric without one is global. ``log_metric`` also
#: writes its name, rank and reduction (``mlpipe.runtime.tracking``).
SCOPE_TAG, POPULATION_TAG = "mlpipe.scope.", "mlpipe.population."
NAME_TAG, RANK_TAG, REDUCED_TAG = "mlpipe.metric.", "mlpipe.rank.", "mlpipe.reduced_over."
#: The output the export adds for the step record (docs/step-record.md).
RECORD_OUTPUT = "mlpipe_record"


def job_time(text: str | None) -> datetime | None:
    """A time Azure ML reports on a job (ISO 8601 with ``Z`` or an offset; one without is UTC),
    aware; None when absent or unreadable."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


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
    output_types: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    metric_info: dict[str, dict[str, str | None]] = field(default_factory=dict)
    reused_node: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    #: The status message of a failed job (its error), where Azure ML gives one.
    message: str | None = None
    #: The step record the job left in its ``mlpipe_record`` output (``load_record``'s
    #: document), None when it has none (a script component, an older export, not finished).
    record: dict[str, Any] | None = None
    record_note: str | None = None
    #: Outputs downloaded here (``sync_run(fetch=...)``: the candidate's evaluation report).
    downloaded: dict[str, str] = field(default_factory=dict)
    #: What Azure ML could not tell about this job (``"outputs"``, ``"metrics"``, ...) and why:
    #: unknown, never absent (a per-run call that failed is a note on the step, not the sync).
    unknown: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "record"}
        out["has_record"] = self.record is not None
        return out


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
        shape = "run history Run" if key == "runId" else "JobBase resource"
        raise AzureError(f"Azure ML returned a {what} without {key!r}",
                         hint=f"the service answer is not a {shape}; report it with the "
                              f"payload")
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
    outputs, output_types = {}, {}
    for key, out in (props.get("outputs") or {}).items():
        outputs[key] = out.get("uri") if isinstance(out, dict) else None
        if isinstance(out, dict) and out.get("jobOutputType"):
            output_types[key] = str(out["jobOutputType"])
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
        outputs=outputs, output_types=output_types, reused_node=run_props.get(REUSED_NODE))


def parse_run(payload: dict[str, Any]) -> JobRecord:
    """A JobRecord from a run-history ``Run`` payload (how Azure ML lists a pipeline's child
    jobs: ``GET .../runs/NAME/children``). The node is the run's display name (Azure ML's
    ``azureml.nodeid`` is an opaque id); a child run with ``runSource: SubGraphCloud`` is a
    nested pipeline, recorded with job type ``Pipeline``.

    Example:
        >>> parse_run({"runId": "3f2c", "displayName": "train", "status": "Failed",
        ...            "error": {"error": {"message": "exit code 1"}}}).message
        'exit code 1'
    """
    name = _require(payload, "runId", "child job")
    props = {str(k): v for k, v in (payload.get("properties") or {}).items()}
    tags = {str(k): str(v) for k, v in (payload.get("tags") or {}).items()}
    nested = props.get(SUBGRAPH[0]) == SUBGRAPH[1]
    outputs, output_types = {}, {}
    for port, ref in (payload.get("outputs") or {}).items():
        outputs[port] = ref.get("assetId") if isinstance(ref, dict) else None
        kind = ref.get("type") if isinstance(ref, dict) else None
        if kind:
            output_types[port] = MODEL_TYPES.get(str(kind), str(kind))
    compute = (payload.get("compute") or {}).get("target") or payload.get("target")
    error = ((payload.get("error") or {}).get("error") or {})
    studio = ((payload.get("services") or {}).get("Studio") or {}).get("endpoint")
    reused_from = props.get(REUSED_RUN)
    return JobRecord(
        name=name, job_type="Pipeline" if nested else "Command", status=payload.get("status"),
        display_name=payload.get("displayName"), experiment=payload.get("experimentId"),
        studio_url=studio, node=payload.get("displayName") or props.get(NODE_ID),
        compute=compute, reused=str(props.get(REUSED_FLAG, "")).lower() == "true"
        or reused_from is not None, reused_from=reused_from,
        reused_pipeline=next((props[k] for k in REUSED_PIPELINE if k in props), None),
        created_at=payload.get("createdUtc"), tags=tags, outputs=outputs,
        output_types=output_types, reused_node=props.get(REUSED_NODE),
        started_at=payload.get("startTimeUtc"), finished_at=payload.get("endTimeUtc"),
        message=(error.get("message") if isinstance(error, dict) else None)
        or payload.get("cancelationReason"))


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


def parse_metric_info(payload: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    """Each metric's scope and population from an MLflow ``runs/get`` payload's run tags.

    A metric is ``global`` unless the run carries the tag ``mlpipe.scope.NAME = partial``;
    ``mlpipe.population.NAME`` names what it was computed on.

    Example:
        >>> parse_metric_info({"run": {"data": {"metrics": [{"key": "acc", "value": 1}],
        ...     "tags": [{"key": "mlpipe.scope.acc", "value": "partial"}]}}})
        {'acc': {'scope': 'partial', 'population': None}}
    """
    data = ((payload or {}).get("run") or {}).get("data") or {}
    tags = {str(t.get("key")): t.get("value") for t in data.get("tags") or []
            if isinstance(t, dict)}
    info: dict[str, dict[str, Any]] = {}
    for key in sorted({m.get("key") for m in data.get("metrics") or [] if m.get("key")}):
        scope = "partial" if str(tags.get(SCOPE_TAG + key, "")).lower() == "partial" else "global"
        info[key] = {"scope": scope, "population": tags.get(POPULATION_TAG + key)}
        extra = {"name": tags.get(NAME_TAG + key), "rank": _int(tags.get(RANK_TAG + key)),
                 "reduced_over": _int(tags.get(REDUCED_TAG + key))}
        info[key].update({k: v for k, v in extra.items() if v is not None})
    return info


def _int(text: Any) -> int | None:
    return int(text) if isinstance(text, str) and text.strip().isdigit() else None


def parse_run_times(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(start, end)`` of an MLflow run as ISO-8601 UTC text (None where not given)."""
    info = ((payload or {}).get("run") or {}).get("info") or {}

    def iso(ms: Any) -> str | None:
        if ms in (None, "", 0):
            return None
        try:
            return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).isoformat()
        except (TypeError, ValueError, OverflowError, OSError):
            return None

    return iso(info.get("start_time")), iso(info.get("end_time"))


def _with_record(record: JobRecord, service: Any) -> JobRecord:
    """The job with the step record its ``mlpipe_record`` output holds (of the job it reused,
    for a reused job), once the job has ended; a record that cannot be fetched is a note."""
    import tempfile

    from mlpipe.runtime.record import load_record

    fetch = getattr(service, "fetch_output", None)
    if fetch is None or not record.finished or RECORD_OUTPUT not in record.outputs:
        return record
    with tempfile.TemporaryDirectory(prefix="mlpipe-record-") as tmp:
        for name in dict.fromkeys([record.name, record.reused_from]):
            if not name:
                continue
            try:
                folder = fetch(name, RECORD_OUTPUT, Path(tmp) / name)
            except AzureError as exc:
                note = f"job {name}'s step record could not be downloaded ({exc.message})"
                return replace(record, record_note=note,
                               unknown={**record.unknown, "step record": note})
            found = load_record(folder) if folder is not None else None
            if found is not None:
                return replace(record, record=found)
    return replace(record, record_note=f"job {record.name} left no step record in its "
                                       f"{RECORD_OUTPUT!r} output")


def parse_run_outputs(payload: dict[str, Any]) -> tuple[dict[str, str | None], dict[str, str]]:
    """Each output's asset id and type from run history's ``rundata`` answer
    (``runMetadata.outputs.PORT = {"assetId", "type"}``), where Azure ML keeps a job's outputs:
    its ``runs/{id}`` and ``runs/{id}/children`` answers carry ``"outputs": null``.

    Example:
        >>> parse_run_outputs({"runMetadata": {"outputs": {"model": {
        ...     "assetId": "azureml://locations/westus/workspaces/w/data/m/versions/1",
        ...     "type": "MLFlowModel"}}}})[1]
        {'model': 'mlflow_model'}
    """
    outputs: dict[str, str | None] = {}
    types: dict[str, str] = {}
    found = ((payload or {}).get("runMetadata") or {}).get("outputs") or {}
    for port, ref in (found.items() if isinstance(found, dict) else ()):
        outputs[str(port)] = ref.get("assetId") if isinstance(ref, dict) else None
        kind = ref.get("type") if isinstance(ref, dict) else None
        if kind:
            types[str(port)] = MODEL_TYPES.get(str(kind), str(kind))
    return outputs, types


def unknown_facts(job: JobRecord, planned: dict[str, Any]) -> dict[str, str]:
    """What the evidence cannot know about step ``job`` and why: each per-run read that
    failed, and, for an mlpipe function step (``planned["record"]``) that completed, a step
    record it did not leave (its digests, checks and observations are then unknown).

    Example:
        >>> unknown_facts(JobRecord("j", "Command", "Completed", None, None, None, "train",
        ...     None, False, None, None, None), {"record": True})["step record"]
        "job j completed but its run data names no 'mlpipe_record' output"
    """
    found = dict(job.unknown)
    if planned.get("record") and job.status == "Completed" and job.record is None \
            and "step record" not in found:
        found["step record"] = job.record_note or (
            f"job {job.name} completed but its run data names no {RECORD_OUTPUT!r} output"
            if RECORD_OUTPUT not in job.outputs else f"job {job.name} left no step record")
    return found


def _unknown(record: JobRecord, fact: str, exc: AzureError) -> JobRecord:
    return replace(record, unknown={**record.unknown, fact: exc.message})


def _with_outputs(record: JobRecord, service: Any) -> JobRecord:
    """The job with the outputs ``rundata`` names (of the job it reused, where its own names
    none), over any its run-history answer gave; a failed read leaves them unknown."""
    read = getattr(service, "run_data", None)
    if read is None or not record.finished:
        return record
    try:
        outputs, types = parse_run_outputs(read(record.name))
        if not outputs and record.reused_from:
            outputs, types = parse_run_outputs(read(record.reused_from))
    except AzureError as exc:
        return _unknown(record, "outputs", exc)
    return replace(record, outputs={**record.outputs, **outputs},
                   output_types={**record.output_types, **types})


def _with_mlflow(record: JobRecord, service: Any) -> JobRecord:
    try:
        own = service.metrics(record.name)
    except AzureError as exc:  # e.g. 404: a child that never started has no MLflow run
        return _unknown(record, "metrics", exc) if record.finished else record
    started, finished = parse_run_times(own)
    # A reused step logged its metrics in the run it reused.
    try:
        source = service.metrics(record.reused_from) if record.reused_from else own
    except AzureError as exc:
        return _unknown(replace(record, started_at=started or record.started_at,
                                finished_at=finished or record.finished_at), "metrics", exc)
    return replace(record, metrics=parse_metrics(source), metric_info=parse_metric_info(source),
                   started_at=started or record.started_at,
                   finished_at=finished or record.finished_at)


def _download(record: JobRecord, service: Any, ports: set[str], into: Path) -> JobRecord:
    """The job with outputs ``ports`` downloaded under ``into/<job>/<port>``."""
    import shutil
    import tempfile

    fetch = getattr(service, "fetch_output", None)
    if fetch is None or not record.finished:
        return record
    found: dict[str, str] = {}
    for port in sorted(ports & set(record.outputs)):
        target = into / (record.reused_from or record.name) / port
        if not target.exists():
            with tempfile.TemporaryDirectory(prefix="mlpipe-output-") as tmp:
                try:
                    got = fetch(record.reused_from or record.name, port, Path(tmp))
                except AzureError:
                    got = None  # read by the bundle as unreadable, as before
                if got is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(downloaded_file(got)), target)
        found[port] = str(target)
    return replace(record, downloaded=found)


def child_studio_url(pipeline: JobRecord, run_id: str) -> str | None:
    """The studio page of child run ``run_id``, from its pipeline job's: run history gives a
    child ``"services": {}``, and the studio addresses a child run as it does its pipeline
    (``https://ml.azure.com/runs/<runId>?wsid=...``).

    Example:
        >>> child_studio_url(parse_job({"name": "p1", "properties": {"services": {"Studio": {
        ...     "endpoint": "https://ml.azure.com/runs/p1?wsid=/s/1"}}}}), "0f3e")
        'https://ml.azure.com/runs/0f3e?wsid=/s/1'
    """
    url = pipeline.studio_url
    marker = f"/runs/{pipeline.name}"
    if not url or marker not in url:
        return None
    from urllib.parse import quote

    return url.replace(marker, f"/runs/{quote(run_id, safe='')}", 1)


def _leaf_jobs(name: str, service: Any, prefix: str, fetch: dict[str, set[str]],
               into: Path | None, details: bool = True,
               pipeline: JobRecord | None = None) -> list[JobRecord]:
    steps = []
    for child in service.children(name):
        record = parse_run(child)
        if record.studio_url is None and pipeline is not None:
            record = replace(record, studio_url=child_studio_url(pipeline, record.name))
        node = prefix + (record.node or record.name)
        if (record.job_type or "").lower() == "pipeline":
            # mlpipe flattens nested pipelines: their steps are "outer.inner"
            steps += _leaf_jobs(record.name, service, node + ".", fetch, into, details,
                                pipeline)
            continue
        if not details:
            steps.append(replace(record, node=node))
            continue
        record = _with_outputs(record, service)
        record = replace(_with_record(_with_mlflow(record, service), service), node=node)
        if into is not None and fetch.get(node):
            record = _download(record, service, fetch[node], into)
        steps.append(record)
    return steps


def job_progress(job_name: str, service: Any) -> SyncedRun:
    """The pipeline job and its steps' statuses as they stand, without MLflow metrics, step
    records or downloads (what a client following the job polls; ``sync_run`` reads
    everything)."""
    pipeline = parse_job(service.get(job_name))
    steps = _leaf_jobs(job_name, service, "", {}, None, details=False, pipeline=pipeline)
    return SyncedRun(pipeline, sorted(steps, key=lambda s: s.node or s.name))


def sync_run(job_name: str, service: Any, *, fetch: dict[str, set[str]] | None = None,
             into: Path | None = None) -> SyncedRun:
    """Fetch a pipeline job and its child jobs (with their MLflow metrics and times, and the
    step record each finished job left in its ``mlpipe_record`` output) and parse them. Child
    jobs of nested pipeline jobs are listed as ``outer.inner`` steps.

    Args:
        fetch: step -> outputs to download under ``into`` (the candidate's evaluation report,
            so the bundle reads it as it reads a local one).

    Raises:
        AzureError: no credentials, no network, or a payload that is not a job.
    """
    service.check_access()
    pipeline = _with_mlflow(parse_job(service.get(job_name)), service)
    if any(uri is None for uri in pipeline.outputs.values()):
        # A pipeline job's outputs read ``uri: null`` (every recorded JobBase read); their
        # asset ids are in its run data, as a step's are.
        known = {k: v for k, v in pipeline.outputs.items() if v}
        pipeline = _with_outputs(pipeline, service)
        pipeline = replace(pipeline, outputs={**pipeline.outputs, **known})
    steps = _leaf_jobs(job_name, service, "", fetch or {}, into, pipeline=pipeline)
    return SyncedRun(pipeline, sorted(steps, key=lambda s: s.node or s.name))
