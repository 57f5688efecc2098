"""The evidence store's tables, as SQLAlchemy 2 declarative models.

Only the schema lives here; writing and querying are the store's job. Every change to these
models needs an Alembic migration in ``mlpipe/evidence/storage/migrations/versions``.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Optional

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: Run, step run and candidate statuses.
RUNNING, SUCCEEDED, FAILED, INTERRUPTED = "running", "succeeded", "failed", "interrupted"
EXECUTED, REUSED, SKIPPED = "executed", "reused", "skipped"


class Base(DeclarativeBase):
    type_annotation_map: ClassVar = {dict[str, Any]: JSON, list[Any]: JSON}


class PipelineSpecRow(Base):
    """A pipeline definition, identified by its spec digest."""

    __tablename__ = "pipeline_specs"
    digest: Mapped[str] = mapped_column(String(80), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    spec: Mapped[dict[str, Any]]


class ComponentVersion(Base):
    """A component as declared: name, version and the digests of its spec and code."""

    __tablename__ = "component_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(100))
    spec_digest: Mapped[str] = mapped_column(String(80), unique=True)
    code_digest: Mapped[str] = mapped_column(String(80))
    spec: Mapped[dict[str, Any]]


class EnvironmentRow(Base):
    """The software a step ran in; ``digest`` is its resolved content, never a mutable tag."""

    __tablename__ = "environments"
    __table_args__ = (UniqueConstraint("name", "version", "digest"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(100))  # "" when the environment has none
    digest: Mapped[str] = mapped_column(String(80))
    mutable: Mapped[bool] = mapped_column(Boolean, default=False)


class CodeRevision(Base):
    """The git commit the pipeline's code came from, and whether the tree was dirty."""

    __tablename__ = "code_revisions"
    __table_args__ = (UniqueConstraint("commit", "dirty"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    commit: Mapped[str] = mapped_column(String(64))  # "" outside a git work tree
    dirty: Mapped[bool] = mapped_column(Boolean)


class Snapshot(Base):
    """A data snapshot: the content digest of a file or folder and the reference given."""

    __tablename__ = "snapshots"
    __table_args__ = (UniqueConstraint("digest", "reference"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(80), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    file_count: Mapped[int] = mapped_column(Integer)
    reference: Mapped[str] = mapped_column(Text)
    mutable: Mapped[bool] = mapped_column(Boolean)


class Run(Base):
    """One submission of a pipeline."""

    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_pipeline_started", "pipeline_name", "started_at"),
                      Index("ix_runs_status", "status"),
                      Index("ix_runs_started", "started_at", "id"))
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    pipeline_name: Mapped[str] = mapped_column(String(200))
    pipeline_digest: Mapped[str] = mapped_column(ForeignKey("pipeline_specs.digest"))
    target: Mapped[str] = mapped_column(String(40))
    params: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(20))
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[Optional[datetime]] = mapped_column(DateTime)
    user: Mapped[Optional[str]] = mapped_column(String(200))
    host: Mapped[Optional[str]] = mapped_column(String(255))
    pid: Mapped[Optional[int]] = mapped_column(Integer)
    pid_started: Mapped[Optional[str]] = mapped_column(String(40))
    code_revision_id: Mapped[Optional[int]] = mapped_column(ForeignKey("code_revisions.id"))
    options: Mapped[dict[str, Any]]
    message: Mapped[Optional[str]] = mapped_column(Text)

    pipeline: Mapped[PipelineSpecRow] = relationship()
    code_revision: Mapped[Optional[CodeRevision]] = relationship()
    steps: Mapped[list["StepRun"]] = relationship(back_populates="run",
                                                  order_by="StepRun.started_at")
    inputs: Mapped[list["RunInput"]] = relationship(back_populates="run")


class RunInput(Base):
    """Which data snapshot a run was given for each pipeline input."""

    __tablename__ = "run_inputs"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    snapshot_id: Mapped[int] = mapped_column(ForeignKey("snapshots.id"), index=True)

    run: Mapped[Run] = relationship(back_populates="inputs")
    snapshot: Mapped[Snapshot] = relationship()


class StepRun(Base):
    """One step of one run: executed, reused (naming the executed original), failed, skipped."""

    __tablename__ = "step_runs"
    __table_args__ = (Index("ix_step_runs_key_status", "cache_key", "status"),
                      Index("ix_step_runs_step", "step", "started_at"))
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    step: Mapped[str] = mapped_column(String(300))
    component_version_id: Mapped[int] = mapped_column(ForeignKey("component_versions.id"))
    environment_id: Mapped[Optional[int]] = mapped_column(ForeignKey("environments.id"))
    compute: Mapped[dict[str, Any]]
    topology: Mapped[dict[str, Any]]
    cache_key: Mapped[Optional[str]] = mapped_column(String(80))
    key_material: Mapped[Optional[dict[str, Any]]]
    cacheable: Mapped[bool] = mapped_column(Boolean, default=True)
    status: Mapped[str] = mapped_column(String(20))
    reused_from_id: Mapped[Optional[str]] = mapped_column(ForeignKey("step_runs.id"), index=True)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[Optional[datetime]] = mapped_column(DateTime)
    log_path: Mapped[Optional[str]] = mapped_column(Text)
    message: Mapped[Optional[str]] = mapped_column(Text)
    #: The step record the runtime left, as stored (``mlpipe.runtime.record.stored``;
    #: docs/step-record.md); None for a step that left none (reused, skipped, script).
    record: Mapped[Optional[dict[str, Any]]]
    #: The interpreter that ran the step (``backends.local.isolation.Interpreter.evidence``;
    #: for a step Azure ML ran, its step record's, ``backends.azure.ingest``): its path,
    #: version, the digest of its installed package set, and whether it was the step's
    #: declared environment; None where no runtime of mlpipe's described it.
    interpreter: Mapped[Optional[dict[str, Any]]]

    run: Mapped[Run] = relationship(back_populates="steps")
    component: Mapped[ComponentVersion] = relationship()
    environment: Mapped[Optional[EnvironmentRow]] = relationship()
    reused_from: Mapped[Optional["StepRun"]] = relationship(remote_side="StepRun.id")
    artifacts: Mapped[list["StepArtifact"]] = relationship(back_populates="step_run")
    metrics: Mapped[list["Metric"]] = relationship(back_populates="step_run")

    @property
    def duration(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class Artifact(Base):
    """A file or folder in the content-addressed store, by digest."""

    __tablename__ = "artifacts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(80), unique=True)
    kind: Mapped[str] = mapped_column(String(40))
    size: Mapped[int] = mapped_column(BigInteger)
    file_count: Mapped[int] = mapped_column(Integer)
    location: Mapped[str] = mapped_column(Text)
    #: Where the artifact lives in an artifact root, relative to the root
    #: (``blake3/c1/<hex>/data``, ``mlpipe.evidence.storage.roots``); each run resolves it
    #: against its own root. None for what is not in a root (a pipeline input, an Azure ML output).
    key: Mapped[Optional[str]] = mapped_column(Text)
    #: Each file's ``{"name", "size", "sha256", "blake3"}`` where the files are not at
    #: ``location`` to hash (an Azure ML output, from its step record); else None.
    files: Mapped[Optional[list[Any]]]


class StepArtifact(Base):
    """That a step run consumed (``input``) or produced (``output``) an artifact on a port."""

    __tablename__ = "step_artifacts"
    step_run_id: Mapped[str] = mapped_column(ForeignKey("step_runs.id"), primary_key=True)
    direction: Mapped[str] = mapped_column(String(6), primary_key=True)
    port: Mapped[str] = mapped_column(String(200), primary_key=True)
    artifact_id: Mapped[int] = mapped_column(ForeignKey("artifacts.id"), index=True)

    step_run: Mapped[StepRun] = relationship(back_populates="artifacts")
    artifact: Mapped[Artifact] = relationship()


class Metric(Base):
    """A value a step logged, with its scope (global or partial) and the rank that logged it."""

    __tablename__ = "metrics"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    step_run_id: Mapped[str] = mapped_column(ForeignKey("step_runs.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[float] = mapped_column(Float)
    scope: Mapped[str] = mapped_column(String(10))
    rank: Mapped[Optional[int]] = mapped_column(Integer)
    population: Mapped[Optional[str]] = mapped_column(Text)
    #: How many ranks a global value was aggregated over (``all_reduce_metric``); None when
    #: it was logged by one process as it was.
    reduced_over: Mapped[Optional[int]] = mapped_column(Integer)

    step_run: Mapped[StepRun] = relationship(back_populates="metrics")


class CandidateRow(Base):
    """A model candidate a successful run registered. A later run that reproduces the same
    model and evaluation bytes (and name) is a ``Production`` of it, not a new candidate."""

    __tablename__ = "candidates"
    __table_args__ = (Index("ix_candidates_created", "created_at", "id"),
                      Index("ix_candidates_model", "model_artifact_id"))
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    name: Mapped[Optional[str]] = mapped_column(String(200))
    model_artifact_id: Mapped[int] = mapped_column(ForeignKey("artifacts.id"))
    evaluation_artifact_id: Mapped[Optional[int]] = mapped_column(ForeignKey("artifacts.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime)

    run: Mapped[Run] = relationship()
    model: Mapped[Artifact] = relationship(foreign_keys=[model_artifact_id])
    evaluation: Mapped[Optional[Artifact]] = relationship(foreign_keys=[evaluation_artifact_id])


class CheckResult(Base):
    """A diagnostic the compile-time checks reported for a run (warnings and info: a run with
    an error never starts)."""

    __tablename__ = "check_results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    code: Mapped[str] = mapped_column(String(10))
    name: Mapped[str] = mapped_column(String(100))
    severity: Mapped[str] = mapped_column(String(10))
    message: Mapped[str] = mapped_column(Text)
    hint: Mapped[Optional[str]] = mapped_column(Text)
    step: Mapped[Optional[str]] = mapped_column(String(300))
    port: Mapped[Optional[str]] = mapped_column(String(200))
    source: Mapped[Optional[str]] = mapped_column(String(500))
    target: Mapped[Optional[str]] = mapped_column(String(500))
    file: Mapped[Optional[str]] = mapped_column(Text)
    line: Mapped[Optional[int]] = mapped_column(Integer)


class BundleRow(Base):
    """A sealed evidence bundle: its exact bytes, once, under the sha256 digest of those bytes.

    ``previous_digest`` is the candidate's bundle sealed before this one (a chain).
    """

    __tablename__ = "bundles"
    __table_args__ = (Index("ix_bundles_candidate_sealed", "candidate_id", "sealed_at"),)
    digest: Mapped[str] = mapped_column(String(80), primary_key=True)
    candidate_id: Mapped[str] = mapped_column(ForeignKey("candidates.id"))
    previous_digest: Mapped[Optional[str]] = mapped_column(String(80))
    sealed_at: Mapped[datetime] = mapped_column(DateTime)
    content: Mapped[bytes] = mapped_column(LargeBinary)


#: A decision's verdicts.
ACCEPTED, REJECTED = "accepted", "rejected"


class Decision(Base):
    """A reviewer's recorded decision on a candidate (``mlpipe review``), citing the exact
    bundle digest it read; never written by orchestration."""

    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_candidate", "candidate_id", "decided_at"),
                      # one decision per bundle (0012: partial where older doubles remain)
                      Index("uq_decisions_bundle", "bundle_digest", unique=True))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[str] = mapped_column(ForeignKey("candidates.id"))
    bundle_digest: Mapped[str] = mapped_column(ForeignKey("bundles.digest"))
    verdict: Mapped[str] = mapped_column(String(10))
    reviewer: Mapped[str] = mapped_column(String(200))
    note: Mapped[str] = mapped_column(Text)
    #: The policy evaluated with the decision: file, digest, name, passed, criteria.
    policy: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON)
    decided_at: Mapped[datetime] = mapped_column(DateTime)
    #: The decision's DSSE envelope (a VSA-shaped in-toto statement) and its signer's key id;
    #: None for an unsigned decision.
    envelope: Mapped[Optional[bytes]] = mapped_column(LargeBinary)
    signer: Mapped[Optional[str]] = mapped_column(String(80))


class BundleSignature(Base):
    """A sealed bundle's DSSE envelope (its exact bytes as the payload), signed by the key that
    sealed it (docs/signing.md)."""

    __tablename__ = "bundle_signatures"
    bundle_digest: Mapped[str] = mapped_column(ForeignKey("bundles.digest"), primary_key=True)
    keyid: Mapped[str] = mapped_column(String(80))
    envelope: Mapped[bytes] = mapped_column(LargeBinary)
    signed_at: Mapped[datetime] = mapped_column(DateTime)


class ModelSignature(Base):
    """A candidate's model folder signed with OpenSSF Model Signing (a Sigstore bundle, JSON),
    by ``keyid``; ``digest`` is the sha256 of ``signature``, which the bundle names."""

    __tablename__ = "model_signatures"
    candidate_id: Mapped[str] = mapped_column(ForeignKey("candidates.id"), primary_key=True)
    keyid: Mapped[str] = mapped_column(String(80))
    digest: Mapped[str] = mapped_column(String(80))
    signature: Mapped[bytes] = mapped_column(LargeBinary)
    signed_at: Mapped[datetime] = mapped_column(DateTime)


class Production(Base):
    """A later run that reproduced a candidate's model and evaluation bytes."""

    __tablename__ = "candidate_productions"
    candidate_id: Mapped[str] = mapped_column(ForeignKey("candidates.id"), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), primary_key=True, index=True)
    recorded_at: Mapped[datetime] = mapped_column(DateTime)


class SourceText(Base):
    """A component's source file as it was when ``code_digest`` was recorded (once per
    digest): what ``show --why`` and ``diff`` print a unified diff of. ``file`` as the project
    shows it, ``function`` the component's qualified name, ``line`` where it is defined."""

    __tablename__ = "source_texts"
    code_digest: Mapped[str] = mapped_column(String(80), primary_key=True)
    file: Mapped[str] = mapped_column(Text)
    function: Mapped[str | None] = mapped_column(String(400))
    line: Mapped[int | None] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class StoreKey(Base):
    """A key the store keeps for itself; ``secret-hmac`` keys the hashes that stand for
    ``Param[Secret]`` values (see ``mlpipe.secret``). Created once, on first use."""

    __tablename__ = "store_keys"
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    #: the key's bytes, hex-encoded
    value: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Promotion(Base):
    """A candidate's model registered into a model registry (``mlpipe promote``), gated on an
    accepted decision: where it went (registry, target, name, version, alias), the decision and
    bundle it was gated on, and the tags that carry the lineage there."""

    __tablename__ = "promotions"
    __table_args__ = (UniqueConstraint("registry", "target", "name", "version",
                                       name="uq_promotions_version"),
                      Index("ix_promotions_candidate", "candidate_id", "promoted_at"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[str] = mapped_column(ForeignKey("candidates.id"))
    decision_id: Mapped[int] = mapped_column(ForeignKey("decisions.id"))
    #: the bundle the decision cites (what the reviewer read)
    bundle_digest: Mapped[str] = mapped_column(ForeignKey("bundles.digest"))
    model_digest: Mapped[str] = mapped_column(String(80))
    #: ``mlflow`` or ``azure`` (column ``registry``: the attribute name is SQLAlchemy's)
    registry_kind: Mapped[str] = mapped_column("registry", String(20))
    #: the tracking URI, or the Azure ML workspace (and registry) the model went to
    target: Mapped[str] = mapped_column(String(500))
    name: Mapped[str] = mapped_column(String(255))
    version: Mapped[str] = mapped_column(String(40))
    alias: Mapped[Optional[str]] = mapped_column(String(255))
    #: ``models:/NAME/3`` or ``azureml:NAME:3``
    uri: Mapped[str] = mapped_column(String(600))
    tags: Mapped[dict[str, Any]] = mapped_column(JSON)
    promoted_by: Mapped[Optional[str]] = mapped_column(String(200))
    promoted_at: Mapped[datetime] = mapped_column(DateTime)


class PromotionClaim(Base):
    """A promotion under way (``mlpipe promote``): recorded before the registry is written and
    removed with the promotion's record, so a second promoter of the candidate to the same
    model name waits for the first, and one killed midway is taken over by the next."""

    __tablename__ = "promotion_claims"
    __table_args__ = (UniqueConstraint("candidate_id", "registry", "target", "name",
                                       name="uq_promotion_claims"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[str] = mapped_column(ForeignKey("candidates.id"))
    registry_kind: Mapped[str] = mapped_column("registry", String(20))
    target: Mapped[str] = mapped_column(String(500))
    name: Mapped[str] = mapped_column(String(255))
    #: the promoting process, as runs record theirs (``liveness``)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    pid_started: Mapped[Optional[str]] = mapped_column(String(40))
    claimed_at: Mapped[datetime] = mapped_column(DateTime)
