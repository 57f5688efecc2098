"""Following a submitted pipeline job until Azure ML ends it: ``submit --target azure --wait``.

Polls the pipeline job and its steps' statuses (``sync.job_progress``), hands each snapshot to
the caller's view, and says which steps failed and where their logs are. Talks to Azure only
through the service; records nothing (``sync`` does, once the job has ended).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from mlpipe.backends.azure.sync import JobRecord, SyncedRun, job_progress

#: The job statuses that end a job badly.
BAD_ENDS = ("Failed", "Canceled", "NotResponding")


@dataclass(frozen=True, slots=True)
class Failure:
    """A step that ended badly: its node, job, status, status message and log URL."""

    step: str
    job_name: str
    status: str
    message: str | None
    log_url: str | None

    def to_dict(self) -> dict[str, str | None]:
        return {"step": self.step, "job_name": self.job_name, "status": self.status,
                "message": self.message, "log_url": self.log_url}


def log_url(step: JobRecord, pipeline: JobRecord) -> str | None:
    """Where the step's logs are shown: its studio page (outputs + logs), else the pipeline's
    studio page with the step's job in place of the pipeline job."""
    if step.studio_url:
        return step.studio_url
    if pipeline.studio_url and f"/runs/{pipeline.name}" in pipeline.studio_url:
        return pipeline.studio_url.replace(f"/runs/{pipeline.name}", f"/runs/{step.name}", 1)
    return None


def failures(progress: SyncedRun) -> list[Failure]:
    """The steps that failed or were canceled, in node order."""
    return [Failure(s.node or s.name, s.name, s.status or "?", s.message,
                    log_url(s, progress.pipeline))
            for s in progress.steps if s.status in BAD_ENDS]


def follow(job_name: str, service, *, interval: float,
           on_update: Callable[[SyncedRun], None],
           sleep: Callable[[float], None] = time.sleep) -> SyncedRun:
    """Poll pipeline job ``job_name`` every ``interval`` seconds until it ends; call
    ``on_update`` with each snapshot; return the last one.

    Raises:
        AzureError: the service could not be asked (after the client's bounded retries).

    Example:
        >>> last = follow("sad_nose_35r00rck45", service, interval=15, on_update=print)
        >>> last.pipeline.status
        'Completed'
    """
    while True:
        progress = job_progress(job_name, service)
        on_update(progress)
        if progress.pipeline.finished:
            return progress
        sleep(interval)
