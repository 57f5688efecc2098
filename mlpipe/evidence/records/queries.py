"""The questions reviewers and tools ask of the store, each one indexed query.

Read-only: nothing here writes. Each function takes an open session.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, and_, bindparam, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, selectinload

from mlpipe.evidence.storage import models as m


def pipeline_runs(s: Session, pipeline: str | None = None, *, limit: int | None = 50
                  ) -> list[m.Run]:
    """The runs of ``pipeline`` (every pipeline when None), newest first.

    Example:
        >>> [r.id for r in pipeline_runs(s, "defect-classifier", limit=2)]
        ['r-9c1d2e3f4a', 'r-0b1c2d3e4f']
    """
    query = select(m.Run).order_by(m.Run.started_at.desc(), m.Run.id.desc())
    if pipeline is not None:
        query = query.where(m.Run.pipeline_name == pipeline)
    if limit is not None:
        query = query.limit(limit)
    return list(s.scalars(query))


def runs_reusing(s: Session, step_run_id: str) -> list[m.Run]:
    """Every run with a step that reused the outputs of step run ``step_run_id``."""
    reusing = select(m.StepRun.run_id).where(m.StepRun.reused_from_id == step_run_id)
    query = select(m.Run).where(m.Run.id.in_(reusing)).order_by(m.Run.started_at.desc())
    return list(s.scalars(query))


def candidates_on_snapshot(s: Session, digest: str) -> list[m.CandidateRow]:
    """Every candidate whose run was given the data snapshot with content ``digest``."""
    runs = (select(m.RunInput.run_id)
            .join(m.Snapshot, m.Snapshot.id == m.RunInput.snapshot_id)
            .where(m.Snapshot.digest == digest))
    query = (select(m.CandidateRow).where(m.CandidateRow.run_id.in_(runs))
             .order_by(m.CandidateRow.created_at.desc()))
    return list(s.scalars(query))


def find_run(s: Session, ref: str) -> m.Run | None:
    """The run with id ``ref``, or the only run whose id starts with it."""
    run = s.get(m.Run, ref)
    if run is not None:
        return run
    found = list(s.scalars(select(m.Run).where(m.Run.id.startswith(ref, autoescape=True))
                           .limit(2)))
    return found[0] if len(found) == 1 else None


def candidate_rows(s: Session, *, limit: int | None = 50
                   ) -> list[tuple[m.CandidateRow, str, str]]:
    """Candidates, newest first, each with its run's pipeline name and its model's digest."""
    query = (select(m.CandidateRow, m.Run.pipeline_name, m.Artifact.digest)
             .join(m.Run, m.Run.id == m.CandidateRow.run_id)
             .join(m.Artifact, m.Artifact.id == m.CandidateRow.model_artifact_id)
             .order_by(m.CandidateRow.created_at.desc(), m.CandidateRow.id.desc()))
    if limit is not None:
        query = query.limit(limit)
    return [(cand, name, digest) for cand, name, digest in s.execute(query).all()]


def running_run_ids(s: Session, run_ids: list[str]) -> set[str]:
    """Those of ``run_ids`` still recorded as running."""
    return set(s.scalars(select(m.Run.id).where(m.Run.id.in_(run_ids),
                                               m.Run.status == m.RUNNING)))


def run_steps(s: Session, run_id: str) -> list[m.StepRun]:
    """A run's step runs with their component, environment, artifacts and metrics loaded."""
    query = (select(m.StepRun).where(m.StepRun.run_id == run_id)
             .options(selectinload(m.StepRun.component), selectinload(m.StepRun.environment),
                      selectinload(m.StepRun.artifacts).selectinload(m.StepArtifact.artifact),
                      selectinload(m.StepRun.metrics))
             .order_by(m.StepRun.started_at, m.StepRun.step))
    return list(s.scalars(query))


@dataclass(slots=True)
class Reusable:
    """An executed step run whose outputs a new step may reuse (detached, plain data)."""

    id: str
    run_id: str
    topology: dict[str, Any]
    outputs: dict[str, m.Artifact] = field(default_factory=dict)
    #: what it read outside its declared inputs (the step record's ``hidden_inputs``)
    hidden_inputs: list[dict[str, Any]] | None = None


def reusable_outputs(s: Session | Connection, cache_key: str) -> list[Reusable]:
    """The executed, cacheable step runs with ``cache_key`` (up to five, newest first), with
    their output artifacts, in one query. The executor asks this for every step it considers
    reusing."""
    a = m.Artifact
    found: dict[str, Reusable] = {}
    for r in s.execute(_reusable_outputs_query(), {"cache_key": cache_key}):
        origin = found.get(r.id)
        if origin is None:
            step = (r.record or {}).get("step") if isinstance(r.record, dict) else None
            origin = found[r.id] = Reusable(r.id, r.run_id, r.topology,
                                            hidden_inputs=(step or {}).get("hidden_inputs"))
        if r.port is not None:
            origin.outputs[r.port] = a(id=r.artifact_id, digest=r.digest, kind=r.kind,
                                       size=r.size, file_count=r.file_count,
                                       location=r.location, key=r.key)
    return list(found.values())


@functools.cache
def _reusable_outputs_query() -> Select:
    origins = (select(m.StepRun.id, m.StepRun.run_id, m.StepRun.topology,
                      m.StepRun.started_at, m.StepRun.record)
               .where(m.StepRun.cache_key == bindparam("cache_key"),
                      m.StepRun.status == m.EXECUTED, m.StepRun.cacheable.is_(True))
               .order_by(m.StepRun.started_at.desc()).limit(5).subquery())
    a = m.Artifact
    return (select(origins, m.StepArtifact.port, a.id.label("artifact_id"), a.digest, a.kind,
                   a.size, a.file_count, a.location, a.key)
            .outerjoin(m.StepArtifact, and_(m.StepArtifact.step_run_id == origins.c.id,
                                            m.StepArtifact.direction == "output"))
            .outerjoin(a, a.id == m.StepArtifact.artifact_id)
            .order_by(origins.c.started_at.desc(), origins.c.id))


def previous_step_run(s: Session, step_run: m.StepRun) -> m.StepRun | None:
    """The nearest earlier run of the same step of the same pipeline that has key material."""
    query = (select(m.StepRun).join(m.Run, m.Run.id == m.StepRun.run_id)
             .where(m.StepRun.step == step_run.step,
                    m.StepRun.started_at < step_run.started_at,
                    m.StepRun.key_material.is_not(None),
                    m.Run.pipeline_name == step_run.run.pipeline_name)
             .order_by(m.StepRun.started_at.desc()).limit(1))
    return s.scalars(query).first()


def candidate_story(s: Session, candidate_id: str) -> dict[str, Any] | None:
    """Everything the store knows about candidate ``candidate_id``, as plain data.

    Returns:
        ``{"candidate", "run", "pipeline", "code", "inputs", "steps"}`` or None if unknown.
    """
    cand = s.get(m.CandidateRow, candidate_id)
    if cand is None:
        return None
    run = cand.run
    inputs = s.execute(select(m.RunInput.name, m.Snapshot)
                       .join(m.Snapshot, m.Snapshot.id == m.RunInput.snapshot_id)
                       .where(m.RunInput.run_id == run.id)).all()
    steps = []
    for sr in run_steps(s, run.id):
        origin = sr.reused_from if sr.reused_from_id else sr
        assert origin is not None  # reused_from_id is a foreign key: the step run it names exists
        steps.append({
            "id": sr.id, "step": sr.step, "status": sr.status,
            "reused_from": sr.reused_from_id,
            "component": {"name": sr.component.name, "version": sr.component.version,
                          "spec_digest": sr.component.spec_digest,
                          "code_digest": sr.component.code_digest},
            "environment": None if sr.environment is None else {
                "name": sr.environment.name, "version": sr.environment.version,
                "digest": sr.environment.digest},
            "compute": sr.compute, "topology": sr.topology, "cache_key": sr.cache_key,
            "artifacts": [{"direction": a.direction, "port": a.port,
                           "digest": a.artifact.digest, "kind": a.artifact.kind}
                          for a in sr.artifacts],
            "metrics": [{"name": x.name, "value": x.value, "scope": x.scope, "rank": x.rank,
                         "population": x.population, "from_step_run": origin.id}
                        for x in origin.metrics],
        })
    return {
        "candidate": {"id": cand.id, "name": cand.name, "model": cand.model.digest,
                      "evaluation": cand.evaluation.digest if cand.evaluation else None},
        "run": {"id": run.id, "status": run.status, "target": run.target,
                "params": run.params, "started_at": run.started_at.isoformat(),
                "user": run.user, "host": run.host},
        "pipeline": {"name": run.pipeline_name, "digest": run.pipeline_digest},
        "code": None if run.code_revision is None else {
            "commit": run.code_revision.commit, "dirty": run.code_revision.dirty},
        "inputs": {name: {"digest": snap.digest, "reference": snap.reference,
                          "mutable": snap.mutable, "size": snap.size,
                          "file_count": snap.file_count} for name, snap in inputs},
        "steps": steps,
    }
