"""A step's text with the run's secret values masked: its logs, failure message, record
and metrics' populations (what mlpipe keeps of a step)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from mlpipe.backends.local.stepjob import StepJob, StepOutcome
from mlpipe.backends.local.steplogs import rank_logs
from mlpipe.secret import Redactor


def masked(job: StepJob, outcome: StepOutcome) -> StepOutcome:
    """The run's secret values masked wherever the step wrote text for mlpipe to keep: its
    log, its ranks' logs, its failure message, the free text of its record (failure messages,
    the diagnosis; never a key, digest, path or time, which masking a short secret would
    garble) and its metrics' populations."""
    redact = Redactor({**job.masked, **{name: job.params[name] for name in job.secrets
                                        if isinstance(job.params.get(name), str)}})
    if not redact:
        return outcome
    redact.file(job.log)
    folder = rank_logs(job.log)
    if folder.is_dir():
        for path in folder.iterdir():
            redact.file(path)
    metrics = [{**m, "population": redact.text(m["population"])}
               if isinstance(m.get("population"), str) else m for m in outcome.metrics]
    return replace(outcome, message=None if outcome.message is None
                   else redact.text(outcome.message),
                   record=_masked_record(outcome.record, redact), metrics=metrics)


def _masked_record(record: dict[str, Any] | None, redact: Redactor) -> dict[str, Any] | None:
    if not isinstance(record, dict):
        return record

    def failure(part: Any) -> Any:
        if isinstance(part, dict) and isinstance(part.get("failure"), dict) \
                and isinstance(part["failure"].get("message"), str):
            return {**part, "failure": {**part["failure"],
                                        "message": redact.text(part["failure"]["message"])}}
        return part

    masked = {**record, "step": failure(record.get("step")),
              "ranks": [failure(r) for r in record.get("ranks") or []]}
    diagnosis = record.get("diagnosis")
    if isinstance(diagnosis, dict):
        masked["diagnosis"] = {
            **diagnosis, **{k: redact.text(diagnosis[k]) for k in ("message", "hint")
                            if isinstance(diagnosis.get(k), str)},
            "findings": [redact.text(f) if isinstance(f, str) else f
                         for f in diagnosis.get("findings") or []]}
    return masked
