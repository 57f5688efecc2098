"""JSON views of the store for scripts: runs, one run, candidates, two runs' differences.

The shapes are documented in docs/json.md and pinned by tests/test_json_output.py: keys are
added, never renamed or removed, and every key is present (null where a fact is unknown).
Read-only; the facts come from the ``reader`` and ``views``.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from mlpipe.evidence.records.read_records import Candidate, Run
from mlpipe.evidence.records.reader import Reader
from mlpipe.evidence.records.views import run_differences

#: The version of these shapes, in every document's ``"format"`` (``mlpipe.runs/1``).
VERSION = 1


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat() + ("Z" if value.tzinfo is None else "")


def _took(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else round((end - start).total_seconds(), 3)


def run_summary(run: Run) -> dict[str, Any]:
    """One run, as ``mlpipe runs --format json`` lists it."""
    opts = run.options or {}
    azure = run.target == "azure"
    return {
        "run_id": run.id, "pipeline": run.pipeline_name, "pipeline_digest": run.pipeline_digest,
        "status": run.status, "target": run.target, "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at), "duration_s": _took(run.started_at,
                                                                 run.finished_at),
        "job_name": opts.get("job_name") if azure else None,
        "studio_url": opts.get("studio_url") if azure else None,
        "azure_status": opts.get("azure_status") if azure else None,
        "message": run.message, "ci": opts.get("ci"),
    }


def runs_document(runs: list[Run]) -> dict[str, Any]:
    """``mlpipe runs --format json``."""
    return {"format": f"mlpipe.runs/{VERSION}", "runs": [run_summary(r) for r in runs]}


def run_document(s: Reader, run: Run) -> dict[str, Any]:
    """``mlpipe show RUN --format json``: the run, its inputs, its steps and candidates."""
    steps = []
    for sr in s.run_steps(run.id):
        planned = ((run.options or {}).get("steps") or {}).get(sr.step) or {}
        steps.append({
            "step": sr.step, "status": sr.status, "step_run_id": sr.id,
            "reused_from": sr.reused_from_id,
            "component": f"{sr.component.name}@{sr.component.version}",
            "started_at": _iso(sr.started_at), "finished_at": _iso(sr.finished_at),
            "duration_s": sr.duration, "message": sr.message,
            "job_name": planned.get("job_name"), "studio_url": planned.get("studio_url"),
            "metrics": [{"name": x.name, "value": x.value, "scope": x.scope, "rank": x.rank,
                         "population": x.population} for x in sr.metrics],
            "log": sr.log_path,
            "diagnosis": ((s.step_record(sr.id) or {}).get("diagnosis")
                          if sr.status == "failed" else None),
        })
    candidates = s.candidates_of_run(run.id)
    return {
        "format": f"mlpipe.run/{VERSION}", **run_summary(run),
        "params": dict(run.params or {}),
        "inputs": [{"name": ri.name, "reference": ri.snapshot.reference,
                    "digest": ri.snapshot.digest, "mutable": ri.snapshot.mutable}
                   for ri in sorted(run.inputs, key=lambda r: r.name)],
        "code": None if run.code_revision is None else {
            "commit": run.code_revision.commit, "dirty": run.code_revision.dirty},
        "steps": steps,
        "candidates": [c.id for c in candidates],
    }


def candidates_document(rows: list[Candidate],
                        signatures: dict[str, Any] | None = None) -> dict[str, Any]:
    """``mlpipe candidates --format json`` (rows from ``Reader.candidate_rows``; ``signatures``:
    candidate id -> ``views.signature_state``)."""
    return {"format": f"mlpipe.candidates/{VERSION}", "candidates": [
        {"candidate_id": c.id, "name": c.name, "pipeline": c.pipeline, "run_id": c.run_id,
         "created_at": _iso(c.created_at), "model_digest": c.model_digest,
         "metrics": [{"name": n, "value": v, "population": p} for n, v, p in c.metrics],
         "findings": c.findings, "findings_by_source": c.findings_by_source,
         "productions": c.productions,
         "review": {"status": "unreviewed" if c.review is None else c.review[0],
                    "by": None if c.review is None else c.review[1],
                    "decided_at": None if c.review is None else _iso(c.review[2]),
                    "bundle": None if c.review is None else c.review[3]},
         "signature": (signatures or {}).get(c.id)}
        for c in rows]}


def diff_document(s: Reader, a: Run, b: Run) -> dict[str, Any]:
    """``mlpipe diff A B --format json``: both runs and what differs, by section."""
    found = run_differences(s, a, b)
    return {"format": f"mlpipe.diff/{VERSION}", "run_a": run_summary(a),
            "run_b": run_summary(b), "differences": found,
            "identical": not any(found.values())}
