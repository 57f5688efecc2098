"""The records the read commands answer with: runs, step runs, candidates and what they hold,
with ``models``' attribute names, read from plain SQL by ``reader.Reader``.

Plain dataclasses; their related records are read through the ``Reader`` (``Related``) on
first use. Imports neither SQLAlchemy nor ``models`` (docs/performance.md: a command that
reads stays light).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Protocol

#: Statuses, as in ``models`` (which this module must not import).
RUNNING, SUCCEEDED, FAILED, INTERRUPTED = "running", "succeeded", "failed", "interrupted"
EXECUTED, REUSED, SKIPPED = "executed", "reused", "skipped"


class Related(Protocol):
    """What a record reads its related records through on first use: ``reader.Reader``
    (named here by its methods, so that the reader may import this module)."""

    def get_run(self, run_id: str) -> Run | None:
        """The run ``run_id``."""
        ...

    def run_inputs(self, run_id: str) -> list[RunInput]:
        """A run's named inputs."""
        ...

    def code_revision(self, revision_id: int) -> CodeRevision | None:
        """A recorded code revision."""
        ...

    def step_run(self, step_run_id: str) -> StepRun | None:
        """The step run ``step_run_id``."""
        ...

    def step_artifacts(self, step_run_ids: list[str]) -> dict[str, list[StepArtifact]]:
        """The artifacts of each step run."""
        ...

    def step_metrics(self, step_run_ids: list[str]) -> dict[str, list[Metric]]:
        """The metrics of each step run."""
        ...


@dataclass(eq=False)
class CodeRevision:
    id: int
    commit: str
    dirty: bool


@dataclass(eq=False)
class Snapshot:
    id: int
    digest: str
    size: int
    file_count: int
    reference: str
    mutable: bool


@dataclass(eq=False)
class RunInput:
    run_id: str
    name: str
    snapshot_id: int
    snapshot: Snapshot


@dataclass(eq=False)
class Component:
    id: int
    name: str
    version: str
    spec_digest: str
    code_digest: str


@dataclass(eq=False)
class Environment:
    id: int
    name: str
    version: str
    digest: str
    mutable: bool


@dataclass(eq=False)
class Artifact:
    id: int
    digest: str
    kind: str
    size: int
    file_count: int
    location: str | None


@dataclass(eq=False)
class StepArtifact:
    step_run_id: str
    direction: str
    port: str
    artifact_id: int
    artifact: Artifact


@dataclass(eq=False)
class Metric:
    id: int
    step_run_id: str
    name: str
    value: float
    scope: str
    rank: int | None
    population: str | None
    reduced_over: int | None


@dataclass(eq=False)
class Run:
    """A run as ``models.Run`` has it; ``inputs`` and ``code_revision`` are read on first use."""

    id: str
    pipeline_name: str
    pipeline_digest: str
    target: str
    params: dict[str, Any]
    status: str
    started_at: datetime
    finished_at: datetime | None
    user: str | None
    host: str | None
    pid: int | None
    pid_started: str | None
    code_revision_id: int | None
    options: dict[str, Any]
    message: str | None
    reader: Related = field(repr=False)

    @cached_property
    def inputs(self) -> list[RunInput]:
        return self.reader.run_inputs(self.id)

    @cached_property
    def code_revision(self) -> CodeRevision | None:
        if self.code_revision_id is None:
            return None
        return self.reader.code_revision(self.code_revision_id)


@dataclass(eq=False)
class StepRun:
    """A step run as ``models.StepRun`` has it, with its component and environment;
    ``artifacts``, ``metrics``, ``reused_from`` and ``run`` are read on first use (``run_steps``
    reads the artifacts and metrics of all a run's steps at once)."""

    id: str
    run_id: str
    step: str
    component_version_id: int
    environment_id: int | None
    compute: dict[str, Any]
    topology: dict[str, Any]
    cache_key: str | None
    key_material: dict[str, Any] | None
    cacheable: bool
    status: str
    reused_from_id: str | None
    started_at: datetime
    finished_at: datetime | None
    log_path: str | None
    message: str | None
    component: Component
    environment: Environment | None
    reader: Related = field(repr=False)
    #: the interpreter that ran it (``models.StepRun.interpreter``), None where none did
    interpreter: dict[str, Any] | None = None

    @property
    def duration(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    @cached_property
    def artifacts(self) -> list[StepArtifact]:
        return self.reader.step_artifacts([self.id]).get(self.id, [])

    @cached_property
    def metrics(self) -> list[Metric]:
        return self.reader.step_metrics([self.id]).get(self.id, [])

    @cached_property
    def reused_from(self) -> StepRun | None:
        return None if self.reused_from_id is None else self.reader.step_run(self.reused_from_id)

    @cached_property
    def run(self) -> Run | None:
        return self.reader.get_run(self.run_id)


@dataclass(eq=False)
class Candidate:
    """A candidate with its run's pipeline name and its model's digest; ``candidate_rows``
    also reads what a reviewer scans a list for: ``metrics``, ``findings``, ``review``."""

    id: str
    run_id: str
    #: ``Candidate(name=...)``, else the pipeline's name (stored NULL before mlpipe kept it)
    name: str | None
    model_artifact_id: int
    evaluation_artifact_id: int | None
    created_at: datetime
    pipeline: str
    model_digest: str
    #: The evaluation's global metrics: (name, value, population), as its step logged them.
    metrics: list[tuple[str, float, str | None]] = field(default_factory=list)
    #: Findings of the newest sealed bundle by severity (``findings.every_finding``:
    #: compile-time, run-time and evidence, of every production); None when none is sealed.
    findings: dict[str, int] | None = None
    #: The same findings by where they came from (``compile-time``, ``run-time``, ``evidence``).
    findings_by_source: dict[str, int] | None = None
    #: The newest decision: (verdict, by, decided_at, bundle digest); None when unreviewed.
    review: tuple[str, str, datetime, str] | None = None
    #: How many later runs reproduced it (``candidate_productions``).
    productions: int = 0
    #: The key id that signed the newest sealed bundle; None when unsigned or none is sealed.
    signer: str | None = None



__all__ = ["EXECUTED", "FAILED", "INTERRUPTED", "REUSED", "RUNNING", "SKIPPED", "SUCCEEDED",
           "Artifact", "Candidate", "CodeRevision", "Component", "Environment", "Metric",
           "Related", "Run", "RunInput", "Snapshot", "StepArtifact", "StepRun"]
