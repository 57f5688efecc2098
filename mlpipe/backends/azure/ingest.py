"""Writing a synced Azure ML pipeline job into the evidence store: step runs (executed, reused,
failed), their outputs and metrics, the run's status and times, and its candidate. Where a job
left its step record (docs/step-record.md), it is read exactly as a local run's: failure and
layer, output content digests (and each file's), metrics with rank and reduction, and the
coordination check of a distributed step (MP520-MP526).

Idempotent: syncing the same job twice updates rows, never duplicates them. Never talks to
Azure (``sync`` fetches) and never reloads the user's pipeline (the plan ``record`` stored in
``Run.options`` says which step is which).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mlpipe.backends.azure.record import reference_digest
from mlpipe.backends.azure.sync import (
    TERMINAL,
    JobRecord,
    SyncedRun,
    job_time,
    unknown_facts,
)
from mlpipe.digests.snapshot import snapshot
from mlpipe.distribution import MetricPolicy, as_distribution
from mlpipe.errors import UsageError
from mlpipe.evidence.records.queries import find_run
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store, new_id, utcnow
from mlpipe.judgements.coordination import check_coordination
from mlpipe.judgements.reads import check_reads
from mlpipe.runtime import record as step_record
from mlpipe.runtime import tracking

#: Azure ML job status -> mlpipe run status (anything else: still running).
RUN_STATUS = {"Completed": m.SUCCEEDED, "Failed": m.FAILED, "NotResponding": m.FAILED,
              "Canceled": m.INTERRUPTED}


@dataclass(slots=True)
class SyncOutcome:
    """What ``record_sync`` wrote: the run's status, each step's, the candidate, and notes."""

    run_id: str
    job_name: str
    status: str
    azure_status: str | None
    steps: dict[str, str] = field(default_factory=dict)
    candidate_id: str | None = None
    notes: list[str] = field(default_factory=list)


def find_azure_run(s: Session, ref: str) -> m.Run:
    """The Azure run ``ref`` names: an mlpipe run id, a unique prefix of one, or the Azure ML
    pipeline job name it was submitted as.

    Raises:
        UsageError: no such run, or a run that did not go to Azure ML.
    """
    run = find_run(s, ref)
    if run is None:
        run = s.scalars(select(m.Run).where(m.Run.target == "azure",
                                            m.Run.options["job_name"].as_string() == ref)
                        .order_by(m.Run.started_at.desc()).limit(1)).first()
    if run is None:
        raise UsageError(f"no run {ref!r} in the evidence store (neither an mlpipe run id nor "
                         f"the Azure ML job of one)",
                         hint="give a run id from `mlpipe runs` (target azure) or the job name "
                              "`mlpipe submit --target azure` printed")
    if run.target != "azure":
        raise UsageError(f"run {run.id} ran with target {run.target!r}; mlpipe sync reads Azure "
                         f"ML runs", hint=f"see it with `mlpipe show {run.id}`")
    if not (run.options or {}).get("job_name"):
        raise UsageError(f"run {run.id} was never submitted to Azure ML: "
                         f"{run.message or run.status}",
                         hint="submit the pipeline again with `mlpipe submit --target azure`")
    return run


def _when(text: str | None) -> datetime | None:
    """A time Azure ML reported, as the store keeps times (naive UTC)."""
    value = job_time(text)
    return None if value is None else value.replace(tzinfo=None)


def step_status(job: JobRecord) -> str:
    """An Azure ML child job's status as a step run status."""
    if job.status == "Completed":
        return m.REUSED if job.reused else m.EXECUTED
    return RUN_STATUS.get(job.status or "", m.RUNNING)


class _Ingest:
    def __init__(self, store: Store, run_id: str, synced: SyncedRun) -> None:
        self.store, self.run_id, self.synced = store, run_id, synced
        with store.session() as s:
            run = s.get(m.Run, run_id)
            assert run is not None  # the caller found it (find_azure_run)
            self.options: dict[str, Any] = run.options
            self.plan: dict[str, Any] = self.options.get("steps") or {}
        self.produced: dict[str, dict[str, int]] = {}  # step -> port -> artifact id
        self.failed_coordination: dict[str, str] = {}  # step -> what its check found
        self.unknown: dict[str, dict[str, str]] = {}  # step -> fact -> why it is unknown
        self.outcome = SyncOutcome(run_id, synced.pipeline.name, m.RUNNING,
                                   synced.pipeline.status)

    # --- facts from Azure -------------------------------------------------------------------

    def _origin(self, s: Session, job: JobRecord) -> m.StepRun | None:
        """The step run of an earlier recorded Azure run that ``job`` reused, if recorded."""
        if not job.reused_pipeline:
            return None
        runs = s.scalars(select(m.Run).where(
            m.Run.target == "azure", m.Run.id != self.run_id,
            m.Run.options["job_name"].as_string() == job.reused_pipeline)).all()
        for run in runs:
            planned = (run.options or {}).get("steps") or {}
            step = next((sid for sid, p in planned.items() if p.get("job_name") == job.reused_from),
                        None) or (job.node if job.node in planned else job.reused_node)
            found = s.scalars(select(m.StepRun).where(m.StepRun.run_id == run.id,
                                                      m.StepRun.step == step)).first()
            if found is not None and found.status in (m.EXECUTED, m.REUSED):
                return found.reused_from if found.reused_from_id else found
        return None

    def _outputs(self, sid: str, job: JobRecord) -> dict[str, m.Artifact]:
        """One artifact per output URI: by the content digest the step record gives (with
        each file's digests), else by a digest of the reference."""
        kinds = self.plan[sid].get("outputs") or {}
        recorded = ((job.record or {}).get("step") or {}).get("outputs") or {}
        arts = {}
        for port, uri in sorted(job.outputs.items()):
            if not uri or port not in kinds:
                continue  # the record's own output is not a step output
            kind = kinds.get(port) or job.output_types.get(port) or "uri_folder"
            entry = recorded.get(port) or {}
            here = job.downloaded.get(port)
            if entry.get("digest"):
                if here and snapshot(here).digest == entry["digest"]:
                    uri = here  # downloaded, and the same content: read here like a local one
                files = None if entry.get("files_omitted") else [
                    {k: f[k] for k in ("name", "size", "sha256", "blake3")}
                    for f in entry.get("files") or []]
                arts[port] = self.store.artifact(entry["digest"], kind, int(entry["size"]),
                                                 int(entry["file_count"]), uri, files=files)
            else:
                arts[port] = self.store.artifact(reference_digest(uri), kind, 0, 0, uri)
        return arts

    # --- writing ----------------------------------------------------------------------------

    def go(self) -> SyncOutcome:
        jobs: dict[str, JobRecord] = {}
        for job in self.synced.steps:
            if job.node in self.plan:
                jobs[job.node] = job
            else:
                self.outcome.notes.append(f"Azure ML job {job.name} (node {job.node!r}) is not a "
                                          f"step of run {self.run_id}'s pipeline; not recorded")
        outputs = {sid: self._outputs(sid, job) for sid, job in jobs.items()}
        for fact, why in sorted(self.synced.pipeline.unknown.items()):
            self.outcome.notes.append(f"pipeline job {self.synced.pipeline.name}: its {fact} "
                                      f"could not be read from Azure ML ({why}); recorded as "
                                      f"unknown")
        for sid, job in sorted(jobs.items()):
            self.unknown[sid] = unknown_facts(job, self.plan[sid])
            if job.record_note:  # an mlpipe step whose runtime never wrote: unknown, said so
                self.outcome.notes.append(
                    f"step {sid!r}: {job.record_note}; its checks, digests and observations "
                    f"are unknown" + (" (did its environment have mlpipe installed?)"
                                      if job.status == "Failed" else ""))
            for fact, why in sorted(self.unknown[sid].items()):
                if not (fact == "step record" and job.record_note):
                    self.outcome.notes.append(f"step {sid!r}: its {fact} could not be read "
                                              f"from Azure ML ({why}); recorded as unknown")
            for finding in check_reads(job.record, step=sid):
                self.outcome.notes.append(finding.render())
        with self.store.session() as s:
            existing = {sr.step: sr for sr in s.scalars(
                select(m.StepRun).where(m.StepRun.run_id == self.run_id))}
            for sid, job in sorted(jobs.items()):
                self._step(s, sid, job, existing.get(sid), outputs[sid])
            pipeline = self.synced.pipeline
            if pipeline.status in TERMINAL:
                for sid in sorted(set(self.plan) - set(jobs)):
                    self._never_ran(s, sid, existing.get(sid), pipeline.status)
            s.flush()
            rows = s.scalars(select(m.StepRun).where(m.StepRun.run_id == self.run_id)).all()
            links = s.execute(select(m.StepRun.step, m.StepArtifact)
                              .join(m.StepArtifact, m.StepArtifact.step_run_id == m.StepRun.id)
                              .where(m.StepRun.run_id == self.run_id)).all()
            have = {(step, a.direction, a.port) for step, a in links}
            for step, a in links:
                if a.direction == "output":
                    self.produced.setdefault(step, {})[a.port] = a.artifact_id
            for sr in rows:
                self.outcome.steps[sr.step] = sr.status
                self._link_inputs(s, sr, have)
            self._update_run(s, jobs)
        self.outcome.candidate_id = self._candidate()
        return self.outcome

    def _step(self, s: Session, sid: str, job: JobRecord, row: m.StepRun | None,
              outputs: dict[str, m.Artifact]) -> None:
        planned = self.plan[sid]
        status = step_status(job)
        origin = self._origin(s, job) if status == m.REUSED else None
        message = None
        if status == m.REUSED:
            message = (f"reused Azure ML job {job.reused_from or '?'}"
                       + (f" (pipeline job {job.reused_pipeline})" if job.reused_pipeline else "")
                       + ("" if origin is not None else "; that run is not in this store"))
        elif status in (m.FAILED, m.INTERRUPTED):
            message = (step_record.failure_message(sid, job.record)
                       or f"Azure ML job {job.name} ended {job.status}")
        topology = self._topology(sid, planned, job)
        unknown = dict(self.unknown.get(sid) or {})
        earlier = (row if row is not None and row.record is not None and job.record is None
                   and unknown else None)
        kept = earlier is not None
        if earlier is not None:  # an earlier sync read the record: what this one could not
            topology = {**(earlier.topology or {}), **topology}   # read is no loss
            unknown.pop("step record", None)
        topology.pop("unknown", None)
        if unknown:
            topology["unknown"] = dict(sorted(unknown.items()))
        coordination = topology.get("coordination")
        if status == m.EXECUTED and coordination and not coordination["ok"]:
            # the job ended, but its ranks did not coordinate: failed, as locally
            status, message = m.FAILED, (f"step {sid!r} did not coordinate: "
                                         f"{self.failed_coordination[sid]}")
        record = earlier.record if earlier is not None else step_record.stored(job.record)
        if status == m.FAILED and not kept and (record is not None or coordination):
            record = _diagnosed(sid, message or "", record, coordination,
                                planned.get("wiring"))
        fields = dict(
            component_version_id=planned["component_version_id"],
            environment_id=planned["environment_id"],
            compute={"declared": planned.get("compute"), "ran_on": job.compute},
            topology=topology, status=status,
            record=record,
            reused_from_id=origin.id if origin is not None else None,
            started_at=_when(job.started_at) or _when(job.created_at)
            or (row.started_at if row is not None else utcnow()),
            finished_at=_when(job.finished_at) if status != m.RUNNING else None,
            message=message)
        # no cache key (Azure ML's is not reported); the parameters, as a local run keeps them
        fields["key_material"] = {"params": planned.get("params") or {}}
        fields["interpreter"] = _interpreter(s, planned, job)
        if row is None:
            row = m.StepRun(id=new_id("s"), run_id=self.run_id, step=sid, cache_key=None,
                            cacheable=False, **fields)
            s.add(row)
            s.flush()
        else:
            for key, value in fields.items():
                setattr(row, key, value)
        have = {(a.direction, a.port): a for a in s.scalars(
            select(m.StepArtifact).where(m.StepArtifact.step_run_id == row.id))}
        for port, art in outputs.items():
            link = have.get(("output", port))
            if link is not None and link.artifact_id != art.id:
                s.delete(link)  # an earlier sync knew only the reference; now the content
                link = None
            if link is None:
                s.add(m.StepArtifact(step_run_id=row.id, direction="output", port=port,
                                     artifact_id=art.id))
        # Metrics are replaced, never appended: a second sync must not double them. A reused
        # step whose original is recorded reads the original's metrics, as locally. Metrics
        # this sync could not read (no MLflow run, no record) leave an earlier sync's.
        if not ("metrics" in unknown and job.record is None):
            s.execute(delete(m.Metric).where(m.Metric.step_run_id == row.id))
            for metric in _metrics(job) if origin is None else []:
                s.add(m.Metric(step_run_id=row.id, **metric))
        planned.update(job_name=job.name, studio_url=job.studio_url, azure_status=job.status,
                       reused_job=job.reused_from if job.reused else None)

    def _topology(self, sid: str, planned: dict[str, Any], job: JobRecord) -> dict[str, Any]:
        """The declared launch and, from the step record, the ranks that ran and the
        coordination check of a distributed step, as a local run records them."""
        topology = dict(planned.get("topology") or {})
        ranks = [p for p in (job.record or {}).get("ranks") or []
                 if p.get("role", "worker") == "worker"]
        declared = topology.get("declared")
        if not ranks:
            return topology
        if not declared:  # one process, as a local run records it
            return {**topology, "processes": len(ranks), "distributed": False}
        world = max(int(p.get("world_size") or 1) for p in ranks)
        dist = declared.get("distribution")
        per_node = max(int((p.get("launch") or {}).get("processes_per_node") or 0)
                       for p in ranks) or max(1, world // int(declared.get("instances") or 1))
        topology.update(distributed=True, ran={
            "framework": (dist or {}).get("type") or "none",
            "instances": len({p.get("node_rank") for p in ranks}) or 1,
            "processes_per_node": per_node, "world_size": world,
            "ranks": [{"rank": p["rank"], "local_rank": p.get("local_rank"),
                       "node_rank": p.get("node_rank"), "role": p.get("role", "worker"),
                       "returncode": None if p.get("status") == "running"
                       else int(p.get("status") == "failed"), "joined": None}
                      for p in ranks]})
        if world > 1:
            distribution = _declared_distribution(dist)
            report = check_coordination((job.record or {}).get("ranks") or [],
                                        world_size=world, distribution=distribution,
                                        step_part=(job.record or {}).get("step"))
            topology["coordination"] = report.to_dict()
            if not report.ok:
                self.failed_coordination[sid] = report.failure_text()
        return topology

    def _never_ran(self, s: Session, sid: str, row: m.StepRun | None, status: str) -> None:
        if row is not None and row.status != m.RUNNING:
            return
        planned = self.plan[sid]
        fields = dict(status=m.SKIPPED, finished_at=None,
                      message=f"Azure ML did not run it (the pipeline job ended {status})")
        if row is None:
            s.add(m.StepRun(id=new_id("s"), run_id=self.run_id, step=sid,
                            component_version_id=planned["component_version_id"],
                            environment_id=planned["environment_id"],
                            compute={"declared": planned.get("compute"), "ran_on": None},
                            topology=planned.get("topology") or {}, cache_key=None,
                            key_material=None, cacheable=False, started_at=utcnow(), **fields))
        else:
            for key, value in fields.items():
                setattr(row, key, value)

    def _artifact_of(self, ref: list[str] | None) -> int | None:
        if not ref:
            return None
        if ref[0] == "step":
            return self.produced.get(ref[1], {}).get(ref[2])
        return ((self.options.get("inputs") or {}).get(ref[1]) or {}).get("artifact_id")

    def _link_inputs(self, s: Session, sr: m.StepRun, have: set[tuple[str, str, str]]) -> None:
        for port, ref in sorted((self.plan.get(sr.step, {}).get("inputs") or {}).items()):
            art_id = self._artifact_of(ref)
            if art_id is not None and (sr.step, "input", port) not in have:
                s.add(m.StepArtifact(step_run_id=sr.id, direction="input", port=port,
                                     artifact_id=art_id))

    def _update_run(self, s: Session, jobs: dict[str, JobRecord]) -> None:
        run = s.get(m.Run, self.run_id)
        assert run is not None  # read in __init__; runs are never deleted while syncing
        pipeline = self.synced.pipeline
        status = RUN_STATUS.get(pipeline.status or "", m.RUNNING)
        options = dict(self.options)
        options.update(azure_status=pipeline.status, synced_at=utcnow().isoformat(),
                       studio_url=pipeline.studio_url or options.get("studio_url"),
                       outputs={k: v for k, v in sorted(pipeline.outputs.items()) if v},
                       steps=self.plan)
        run.options = options
        run.status = status
        run.started_at = _when(pipeline.started_at) or run.started_at
        run.finished_at = _when(pipeline.finished_at) if status != m.RUNNING else None
        failed = sorted(sid for sid, job in jobs.items() if step_status(job) == m.FAILED)
        failed += sorted(set(self.failed_coordination) - set(failed))
        if status == m.SUCCEEDED and self.failed_coordination:
            status = run.status = m.FAILED  # mlpipe's judgement of the ranks, as locally
        run.message = None if status in (m.RUNNING, m.SUCCEEDED) else (
            f"Azure ML job {pipeline.name} ended {pipeline.status}"
            + (f": step{'s' if len(failed) > 1 else ''} {', '.join(failed)} failed"
               if failed else ""))
        self.outcome.status = status

    def _candidate(self) -> str | None:
        planned = self.options.get("candidate")
        if planned is None or self.outcome.status != m.SUCCEEDED:
            return None
        with self.store.session() as s:
            found = s.scalars(select(m.CandidateRow.id).where(
                m.CandidateRow.run_id == self.run_id)).first()
            if found is not None:
                return found
            model_id = self._artifact_of(planned.get("model"))
            evaluation_id = self._artifact_of(planned.get("evaluation"))
            model = s.get(m.Artifact, model_id) if model_id is not None else None
            evaluation = s.get(m.Artifact, evaluation_id) if evaluation_id is not None else None
        if model is None:
            label = ".".join((planned.get("model") or [])[1:])
            self.outcome.notes.append(f"no candidate: Azure ML reported no URI for the model "
                                      f"output {label!r}")
            return None
        return self.store.register_candidate(self.run_id, model, evaluation, planned.get("name"))


def _interpreter(s: Session, planned: dict[str, Any], job: JobRecord) -> dict[str, Any] | None:
    """The interpreter that ran the step on Azure ML, as its step record describes it (None
    without one), in the form a local step run records: Azure ML built the declared
    environment and ran the step in it, so ``in_declared_environment`` is true (null when the
    component declares none)."""
    seen = ((job.record or {}).get("step") or {}).get("interpreter")
    if not isinstance(seen, dict):
        return None
    env = s.get(m.EnvironmentRow, planned.get("environment_id"))
    declared = None if env is None or env.name == "local" else (
        f"{env.name}:{env.version}" if env.version else env.name)
    return {**seen, "isolated": False, "built_with": "azure-ml",
            "declared_environment": declared,
            "in_declared_environment": None if declared is None else True, "note": None}


def _diagnosed(sid: str, message: str, record: dict[str, Any] | None,
               coordination: dict[str, Any] | None, planned_wiring: Any = None) -> dict[str, Any]:
    """The failed step's record with its diagnosis, judged as a local run's is (its logs are
    Azure ML's: the job's studio page, not a path here; its wiring the submitted plan's)."""
    from mlpipe.judgements.diagnosis import StepFailure, Wire, diagnose

    wires = tuple(w for v in (planned_wiring if isinstance(planned_wiring, list) else ())
                  if (w := Wire.read(v)) is not None)

    failed = coordination is not None and not coordination.get("ok", True)
    found = diagnose(StepFailure(
        sid, message, record=record, launch="coordination" if failed else None,
        coordination=(coordination or {}).get("findings") or () if failed else (),
        logs={"step": None, "ranks": {}}, wiring=wires))
    base = dict(record) if record is not None else {
        "format": step_record.FORMAT, "version": step_record.VERSION, "stored": True,
        "step": None, "ranks": []}
    return {**base, "diagnosis": found.to_json()}


def _declared_distribution(value: dict[str, Any] | None) -> Any:
    """The Distribution a plan's ``Distribution.to_dict()`` describes (None if none)."""
    if not value:
        return None
    try:
        return as_distribution({
            **{k: v for k, v in value.items() if k not in ("writers", "metrics")},
            "writers": dict(value.get("writers") or []),
            "metrics": {k: MetricPolicy(**v) for k, v in (value.get("metrics") or {}).items()}})
    except (TypeError, ValueError):
        return None


def _metrics(job: JobRecord) -> list[dict[str, Any]]:
    """The step's metrics: every value its step record holds (with rank and reduction, as a
    local run records them), then each MLflow metric the record does not account for (logged
    with MLflow directly), scoped by mlpipe's tags."""
    rows = [{"name": str(x["name"]), "value": float(x["value"]), "scope": str(x["scope"]),
             "rank": x.get("rank"), "population": x.get("population"),
             "reduced_over": x.get("reduced_over")}
            for x in step_record.metrics(job.record)]
    known = {tracking.metric_key(r["name"], r["scope"], r["rank"]) for r in rows}
    for key, value in sorted(job.metrics.items()):
        if key in known:
            continue
        info = job.metric_info.get(key) or {}
        rows.append({"name": info.get("name") or key, "value": value,
                     "scope": info.get("scope") or "global", "rank": info.get("rank"),
                     "population": info.get("population"),
                     "reduced_over": info.get("reduced_over")})
    return rows


def outputs_to_fetch(options: dict[str, Any]) -> dict[str, set[str]]:
    """What ``sync`` downloads for run ``options``: the candidate's evaluation report (small,
    and read by the bundle for its population and metrics)."""
    planned = (options.get("candidate") or {}).get("evaluation")
    if not planned or planned[0] != "step":
        return {}
    return {planned[1]: {planned[2]}}


def record_sync(store: Store, run_id: str, synced: SyncedRun) -> SyncOutcome:
    """Record what ``sync_run`` fetched for run ``run_id`` (an Azure run ``submit`` recorded).

    Each child job becomes the step run of its node: ``executed``, ``reused`` (naming the
    reused Azure job, and its step run when that run is recorded here), ``failed``,
    ``interrupted`` (canceled) or still ``running``; outputs become artifacts with their Azure
    URIs and a reference digest (Azure ML reports no content digest); MLflow metrics are
    recorded with scope ``global`` unless the job tagged them partial. The run takes the
    pipeline job's status and times; a completed run registers its candidate. Syncing again
    updates the same rows.

    Returns:
        What was recorded.

    Example:
        >>> record_sync(store, "r-0a1b2c3d4e", sync_run("sincere_lamp_7k2m9", service)).status
        'succeeded'
    """
    return _Ingest(store, run_id, synced).go()


__all__ = ["RUN_STATUS", "SyncOutcome", "find_azure_run", "outputs_to_fetch", "record_sync",
           "step_status"]
