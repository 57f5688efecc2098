"""Opening the evidence store and writing what ran, in short committed transactions.

Knows the models and the schema; knows nothing of graphs, executors or the CLI. Every write
commits at once so nothing recorded before a failure is lost; a step event (started, reused,
finished) is one transaction.
"""
from __future__ import annotations

import contextlib
import functools
import os
import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import bindparam, create_engine, event, func, insert, select, text, update
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from mlpipe.errors import StoreError
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.config import missing_store, redact, scrub
from mlpipe.evidence.storage.contention import contended, is_contention
from mlpipe.evidence.storage.liveness import alive as _alive
from mlpipe.evidence.storage.liveness import host, process_token
from mlpipe.evidence.storage.migrate import auto_upgrade_enabled, ensure_schema
from mlpipe.evidence.storage.room import want_of_room
from mlpipe.evidence.storage.roots import KEY

BUSY_TIMEOUT_MS = 60_000
T = TypeVar("T")


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def new_id(prefix: str, nbytes: int = 6) -> str:
    """A random id such as ``r-3f9a0c1b22d4``; ``prefix`` says what it names."""
    return f"{prefix}-{secrets.token_hex(nbytes)}"


def _sqlite_engine(url: str, *, create: bool = True) -> Engine:
    parsed = make_url(url)
    if parsed.database and parsed.database != ":memory:":
        if not create and not Path(parsed.database).exists():
            raise missing_store(parsed.database)
        try:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder of the evidence store "
                             f"{parsed.database}: {exc.strerror or exc}",
                             hint="point MLPIPE_STORE_URL at a writable location") from None
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        # IMMEDIATE takes the write lock up front: a deferred transaction that later writes
        # fails with "database is locked" instead of waiting when another writer got there.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for ``url``: SQLite in WAL mode with a busy timeout, or any SQLAlchemy URL."""
    try:
        if make_url(url).get_backend_name() == "sqlite":
            return _sqlite_engine(url, create=create)
        return create_engine(url, pool_pre_ping=True)
    except (ArgumentError, SQLAlchemyError, ImportError, ValueError) as exc:
        # ValueError: a port that is not a number
        raise StoreError(f"cannot use the evidence store URL {redact(url)!r}: "
                         f"{scrub(str(exc), url)}",
                         hint="set MLPIPE_STORE_URL to a SQLAlchemy URL such as "
                              "sqlite:///evidence/store.sqlite or "
                              "postgresql+psycopg://user@host/db") from exc


class Store:
    """An open evidence store.

    Args:
        url: a SQLAlchemy URL; see :func:`mlpipe.evidence.storage.config.locate` for the default.

    Example:
        >>> store = Store.open("sqlite:///evidence/store.sqlite")
        >>> with store.session() as s:
        ...     runs = pipeline_runs(s, "defect-classifier")
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str, *, auto_upgrade: bool | None = None, create: bool = True) -> "Store":
        """Connect, bring the schema to head, and mark dead runs of this host interrupted.

        With ``create=False`` a SQLite store that does not exist yet is an error instead of a
        new empty store (what commands that only read want: a mistyped location must not
        look like "nothing was ever run").
        """
        engine = make_engine(url, create=create)
        ensure_schema(engine, auto_upgrade=auto_upgrade_enabled() if auto_upgrade is None
                      else auto_upgrade)
        store = cls(engine)
        store.mark_interrupted()
        return store

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def _why(self, exc: BaseException) -> str:
        """A database error's own words, without the store's password."""
        return scrub(str(getattr(exc, "orig", None) or exc).strip(),
                     self.engine.url.render_as_string(hide_password=False))

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose work is committed on exit (rolled back on an exception)."""
        try:
            with self._sessions.begin() as session:
                yield session
        except SQLAlchemyError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: BaseException) -> StoreError:
        """The store's error, naming want of room where the system shows it (evidence.room)."""
        why = self._why(exc)
        if is_contention(exc):
            return contended(self.url, why.splitlines()[0] if why else why)
        sqlite = self.engine.dialect.name == "sqlite"
        room = want_of_room(self.engine.url.database if sqlite else None, why)
        if room is not None:
            return StoreError(f"the evidence store {self.url!r} failed: {why}: {room[0]}",
                              hint=room[1])
        return StoreError(f"the evidence store {self.url!r} failed: {why}",
                          hint="check that the database is reachable and writable")

    def _write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one committed Core transaction; again (up to three times) when it
        collided with a concurrent writer on a unique row, e.g. two runs filing one artifact."""
        for attempt in range(3):
            try:
                with self.engine.begin() as conn:
                    return work(conn)
            except SQLAlchemyError as exc:
                if isinstance(exc, IntegrityError) and attempt < 2:
                    continue
                raise self._failed(exc) from exc
        raise AssertionError("unreachable")

    # --- interrupted runs -------------------------------------------------------------------

    def mark_interrupted(self) -> list[str]:
        """Mark runs left ``running`` by a dead executor on this host as interrupted.

        Returns:
            The ids of the runs marked.
        """
        here = host()
        with self.session() as s:
            # A run without a local process (an Azure ML run) is not this host's to interrupt.
            rows = s.execute(select(m.Run.id, m.Run.pid, m.Run.pid_started).where(
                m.Run.status == m.RUNNING, m.Run.host == here, m.Run.pid.is_not(None))).all()
            dead = [r.id for r in rows if not _alive(r.pid, r.pid_started)]
            if dead:
                self._interrupt(s, dead, "the executor stopped without finishing the run "
                                         "(killed or crashed)")
        return dead

    @staticmethod
    def _interrupt(s: Session, run_ids: list[str], why: str) -> None:
        now = utcnow()
        s.execute(update(m.Run).where(m.Run.id.in_(run_ids), m.Run.status == m.RUNNING)
                  .values(status=m.INTERRUPTED, finished_at=now, message=why))
        s.execute(update(m.StepRun).where(m.StepRun.run_id.in_(run_ids),
                                          m.StepRun.status == m.RUNNING)
                  .values(status=m.INTERRUPTED, finished_at=now, message=why))

    def interrupt_run(self, run_id: str, why: str) -> None:
        """Mark one run (and its running steps) interrupted, e.g. on Ctrl-C."""
        with self.session() as s:
            self._interrupt(s, [run_id], why)

    # --- get-or-create rows that many runs share ---------------------------------------------

    def _get_or_create(self, model: type, where: dict[str, Any], extra: dict[str, Any]):
        for _attempt in range(3):
            with self.session() as s:
                row = s.execute(select(model).filter_by(**where)).scalar_one_or_none()
                if row is not None:
                    return row
            try:
                with self.session() as s:
                    row = model(**where, **extra)
                    s.add(row)
                    s.flush()
                    return row
            except StoreError as exc:
                if not isinstance(exc.__cause__, IntegrityError):
                    raise
        raise StoreError(f"could not record a {model.__tablename__} row for {where}",
                         hint="check the store's health and try again")

    def secret_key(self) -> bytes:
        """The key of the hashes that stand for ``Param[Secret]`` values in this store
        (``mlpipe.secret.keyed_hash``): 32 random bytes, made by whichever writer needs it
        first, the same for everyone who shares the store (so their steps reuse each other's).
        """
        row = self._get_or_create(m.StoreKey, {"name": SECRET_KEY},
                                  {"value": secrets.token_hex(32), "created_at": utcnow()})
        return bytes.fromhex(row.value)

    def pipeline_spec(self, digest: str, name: str, spec: dict[str, Any]) -> m.PipelineSpecRow:
        return self._get_or_create(m.PipelineSpecRow, {"digest": digest},
                                   {"name": name, "spec": spec})

    def component_version(self, name: str, version: str, spec_digest: str, code_digest: str,
                          spec: dict[str, Any]) -> m.ComponentVersion:
        return self._get_or_create(m.ComponentVersion, {"spec_digest": spec_digest},
                                   {"name": name, "version": version,
                                    "code_digest": code_digest, "spec": spec})

    def source_text(self, code_digest: str, file: str | None, function: str | None,
                    line: int | None, mask: Callable[[str], str] | None = None) -> bool:
        """Keep the source file of the code that ``code_digest`` names, once per digest (what
        ``show --why`` and ``diff`` print a unified diff of). ``mask`` masks the run's secret
        values in it (``mlpipe.secret.Redactor.text``): code may hold one as a literal.

        Returns:
            Whether the text is kept (False: no file to read, e.g. a function built at run
            time, or a script component, whose code folder has its own digest).
        """
        if not file or not os.path.isfile(file):
            return False
        try:
            with open(file, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            return False
        if mask is not None:
            text = mask(text)
        shown = os.path.relpath(file) if not os.path.relpath(file).startswith("..") else file
        self._get_or_create(m.SourceText, {"code_digest": code_digest},
                            {"file": shown, "function": function, "line": line, "text": text,
                             "created_at": utcnow()})
        return True

    def environment(self, name: str, version: str | None, digest: str,
                    mutable: bool) -> m.EnvironmentRow:
        return self._get_or_create(m.EnvironmentRow, {"name": name, "version": version or "",
                                                      "digest": digest}, {"mutable": mutable})

    def code_revision(self, commit: str | None, dirty: bool) -> m.CodeRevision:
        return self._get_or_create(m.CodeRevision, {"commit": commit or "", "dirty": dirty}, {})

    def snapshot(self, digest: str, reference: str, size: int, file_count: int,
                 mutable: bool) -> m.Snapshot:
        return self._get_or_create(m.Snapshot, {"digest": digest, "reference": reference},
                                   {"size": size, "file_count": file_count, "mutable": mutable})

    def artifact(self, digest: str, kind: str, size: int, file_count: int,
                 location: str, files: list[dict[str, Any]] | None = None) -> m.Artifact:
        """The artifact with content ``digest`` (created with these values when new).

        ``files``: each file's ``{name, size, sha256, blake3}`` where they are not at
        ``location`` to hash (an Azure ML output); added to a known artifact that has none.
        """
        art = self._get_or_create(m.Artifact, {"digest": digest},
                                  {"kind": kind, "size": size, "file_count": file_count,
                                   "location": location, "files": files})
        if files is not None and art.files is None:
            with self.session() as s:
                s.execute(update(m.Artifact).where(m.Artifact.id == art.id)
                          .values(files=files))
            art.files = files
        return art

    # --- runs and step runs -----------------------------------------------------------------

    def begin_run(self, *, pipeline: m.PipelineSpecRow, target: str, params: dict[str, Any],
                  inputs: dict[str, m.Snapshot], code: m.CodeRevision | None,
                  options: dict[str, Any], run_id: str | None = None) -> str:
        """Record a new run as ``running`` by this process; return its id (``run_id`` when
        given: chosen by the caller, e.g. to name the run's files first, or one already
        written into an Azure ML job's tags). ``options["ci"]`` is the CI provenance of this
        process (``evidence.ci.ci_provenance``) unless the caller gives it."""
        from mlpipe.evidence.storage.ci import ci_provenance

        run_id = run_id or new_id("r", 5)
        # Which CI run started this one (None outside CI): evidence.ci, docs/ci.md.
        options = {**options, "ci": options.get("ci", ci_provenance())}
        with self.session() as s:
            s.add(m.Run(id=run_id, pipeline_name=pipeline.name, pipeline_digest=pipeline.digest,
                        target=target, params=params, status=m.RUNNING, started_at=utcnow(),
                        user=_user(), host=host(), pid=os.getpid(),
                        pid_started=process_token(os.getpid()),
                        code_revision_id=code.id if code else None, options=options))
            for name, snap in inputs.items():
                s.add(m.RunInput(run_id=run_id, name=name, snapshot_id=snap.id))
        return run_id

    def finish_run(self, run_id: str, status: str, message: str | None = None) -> None:
        with self.session() as s:
            s.execute(update(m.Run).where(m.Run.id == run_id).values(
                status=status, finished_at=utcnow(), message=message))

    def add_step_run(self, **fields: Any) -> str:
        """Insert a step run (fields as in :class:`~mlpipe.evidence.storage.models.StepRun`)."""
        step_run_id = new_id("s")
        with self.session() as s:
            s.add(m.StepRun(id=step_run_id, started_at=fields.pop("started_at", utcnow()),
                            **fields))
        return step_run_id

    def finish_step_run(self, step_run_id: str, *, status: str, message: str | None = None,
                        cacheable: bool | None = None, topology: dict[str, Any] | None = None,
                        outputs: dict[str, m.Artifact] | None = None,
                        metrics: list[dict[str, Any]] | None = None,
                        record: dict[str, Any] | None = None) -> None:
        """Close a step run with its status, produced artifacts, logged metrics and the step
        record its runtime left."""
        values: dict[str, Any] = {"status": status, "finished_at": utcnow(), "message": message}
        if record is not None:
            values["record"] = record
        if cacheable is not None:
            values["cacheable"] = cacheable
        if topology is not None:
            values["topology"] = topology
        with self.session() as s:
            s.execute(update(m.StepRun).where(m.StepRun.id == step_run_id).values(**values))
            for port, art in (outputs or {}).items():
                s.add(m.StepArtifact(step_run_id=step_run_id, direction="output", port=port,
                                     artifact_id=art.id))
            for metric in metrics or ():
                s.add(m.Metric(step_run_id=step_run_id, **metric))

    # --- one transaction per step event -----------------------------------------------------

    def begin_step_run(self, *, inputs: dict[str, m.Artifact], **fields: Any) -> str:
        """Insert a step run and link the artifacts it consumes, in one transaction.

        Args:
            inputs: input port -> artifact.
            fields: the step run's columns, as in :class:`~mlpipe.evidence.storage.models.StepRun`.

        Returns:
            The new step run's id.
        """
        step_run_id = new_id("s")
        row = {"id": step_run_id, "started_at": fields.pop("started_at", None) or utcnow(),
               **fields}

        def work(conn: Connection) -> None:
            conn.execute(_SQL.insert_step_run, [row])
            _link(conn, step_run_id, "input", inputs)

        self._write(work)
        return step_run_id

    def record_reused(self, *, original_id: str, inputs: dict[str, m.Artifact],
                      outputs: dict[str, m.Artifact], **fields: Any) -> str:
        """Record a reused step run (finished at once, naming the executed ``original_id``)
        with the artifacts it consumed and the original's outputs, in one transaction.

        Returns:
            The new step run's id.
        """
        now = utcnow()
        step_run_id = new_id("s")
        row = {"id": step_run_id, **fields, "status": m.REUSED, "reused_from_id": original_id,
               "started_at": now, "finished_at": now, "message": f"reused from {original_id}"}

        def work(conn: Connection) -> None:
            conn.execute(_SQL.insert_step_run, [row])
            _link(conn, step_run_id, "input", inputs)
            _link(conn, step_run_id, "output", outputs)

        self._write(work)
        return step_run_id

    def complete_step_run(self, step_run_id: str, *, status: str, message: str | None,
                          cacheable: bool, topology: dict[str, Any],
                          outputs: dict[str, tuple[str, str, int, int, str]],
                          metrics: list[dict[str, Any]],
                          record: dict[str, Any] | None = None) -> dict[str, m.Artifact]:
        """Close an executed step run in one transaction: file its output artifacts (kept as
        they are when the store already knows the digest), link them, add its metrics and
        keep its step record.

        Args:
            outputs: port -> ``(digest, kind, size, file_count, key)``: the root-relative
                key an output was filed under (``evidence.storage.roots``), also its location.
            record: the step record as stored (``mlpipe.runtime.record.stored``).

        Returns:
            Port -> the artifact recorded for it (detached rows).
        """
        values = {"status": status, "finished_at": utcnow(), "message": message,
                  "cacheable": cacheable, "topology": topology, "record": record}

        def work(conn: Connection) -> dict[str, m.Artifact]:
            arts = _artifacts(conn, outputs)
            conn.execute(_SQL.close_step_run, {"step_run_id": step_run_id, **values})
            _link(conn, step_run_id, "output", arts)
            if metrics:
                conn.execute(_SQL.insert_metric, [{"step_run_id": step_run_id, **x}
                                                for x in metrics])
            return arts

        return self._write(work)

    def register_candidate(self, run_id: str, model: m.Artifact,
                           evaluation: m.Artifact | None, name: str | None) -> str:
        """The candidate of ``run_id``'s model and evaluation: a new one, or, when an earlier
        run of the same pipeline (its name and spec digest, which covers every component's
        code digest, the training component's too) registered a candidate with the same
        model bytes, evaluation bytes and name, that one, with this run recorded as another
        production of it (a re-run that reproduced it). A run of another pipeline that
        happens to produce the same bytes gets a candidate of its own (docs/review.md).
        ``name`` None is the pipeline's name (a candidate stored before mlpipe kept the
        default has NULL, read the same way).

        One transaction, serialized per model: on SQLite every session holds the write lock
        (BEGIN IMMEDIATE); on PostgreSQL an advisory lock on the model's artifact, so runs
        that reproduce the same bytes at the same moment still make one candidate."""
        with self.session() as s:
            if s.get_bind().dialect.name == "postgresql":
                s.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                          {"k": _CANDIDATE_LOCK ^ int(model.id)})
            run = s.get(m.Run, run_id)
            if run is None:
                raise StoreError(f"run {run_id} is not in the evidence store",
                                 hint="report this as an mlpipe defect")
            name = name or run.pipeline_name
            same = (select(m.CandidateRow.id)
                    .join(m.Run, m.Run.id == m.CandidateRow.run_id)
                    .where(m.CandidateRow.model_artifact_id == model.id,
                           m.CandidateRow.evaluation_artifact_id.is_(None) if evaluation is None
                           else m.CandidateRow.evaluation_artifact_id == evaluation.id,
                           func.coalesce(m.CandidateRow.name, m.Run.pipeline_name) == name,
                           m.Run.pipeline_name == run.pipeline_name,
                           m.Run.pipeline_digest == run.pipeline_digest,
                           m.CandidateRow.run_id != run_id)
                    .order_by(m.CandidateRow.created_at, m.CandidateRow.id).limit(1))
            found = s.scalars(same).first()
            if found is not None:
                if s.get(m.Production, (found, run_id)) is None:
                    s.add(m.Production(candidate_id=found, run_id=run_id, recorded_at=utcnow()))
                return found
            candidate_id = new_id("c", 5)
            s.add(m.CandidateRow(id=candidate_id, run_id=run_id, name=name,
                                 model_artifact_id=model.id,
                                 evaluation_artifact_id=evaluation.id if evaluation else None,
                                 created_at=utcnow()))
        return candidate_id


class _Statements:
    """The statements every step event runs, built once (building one costs more than
    running it on SQLite)."""

    @functools.cached_property
    def insert_step_run(self):
        return insert(m.StepRun)

    @functools.cached_property
    def close_step_run(self):
        return (update(m.StepRun).where(m.StepRun.id == bindparam("step_run_id"))
                .values({c: bindparam(c) for c in ("status", "finished_at", "message",
                                                   "cacheable", "topology", "record")}))

    @functools.cached_property
    def insert_link(self):
        return insert(m.StepArtifact)

    @functools.cached_property
    def insert_metric(self):
        return insert(m.Metric)

    @functools.cached_property
    def insert_artifact(self):
        return insert(m.Artifact)

    @functools.cached_property
    def set_key(self):
        return (update(m.Artifact).where(m.Artifact.id == bindparam("i"),
                                         m.Artifact.key.is_(None))
                .values(key=bindparam("k")))

    @functools.cached_property
    def artifacts_by_digest(self):
        return select(m.Artifact.id, m.Artifact.digest, m.Artifact.kind, m.Artifact.size,
                      m.Artifact.file_count, m.Artifact.location, m.Artifact.key).where(
            m.Artifact.digest.in_(bindparam("digests", expanding=True)))


_SQL = _Statements()
SECRET_KEY = "secret-hmac"  # the store_keys row of Store.secret_key
_CANDIDATE_LOCK = 0x6D6C7063 << 32  # "mlpc": advisory locks of candidate registration


def _link(conn: Connection, step_run_id: str, direction: str,
          artifacts: dict[str, m.Artifact]) -> None:
    if artifacts:
        conn.execute(_SQL.insert_link, [
            {"step_run_id": step_run_id, "direction": direction, "port": port,
             "artifact_id": art.id} for port, art in artifacts.items()])


def _artifacts(conn: Connection, wanted: dict[str, tuple[str, str, int, int, str]]
               ) -> dict[str, m.Artifact]:
    """Get or create the artifact rows for ``wanted`` (port -> digest, kind, size, count,
    key); a digest already known keeps its row and location, and gets the key when it had
    none (it was recorded before it was filed in a root)."""
    if not wanted:
        return {}
    digests = sorted({w[0] for w in wanted.values()})

    def known() -> dict[str, Any]:
        return {r.digest: r for r in conn.execute(_SQL.artifacts_by_digest,
                                                  {"digests": digests})}

    found = known()
    new_rows = {w[0]: w for w in wanted.values() if w[0] not in found}
    if new_rows:
        conn.execute(_SQL.insert_artifact, [
            {"digest": d, "kind": k, "size": size, "file_count": count, "location": key,
             "key": key if KEY.fullmatch(key) else None}
            for d, k, size, count, key in new_rows.values()])
        found = known()
    unkeyed = [{"i": found[d].id, "k": w[4]} for d, w in {w[0]: w for w in wanted.values()}.items()
               if found[d].key is None and KEY.fullmatch(w[4])]
    if unkeyed:
        conn.execute(_SQL.set_key, unkeyed)
        found = known()
    return {port: m.Artifact(id=found[w[0]].id, digest=w[0], kind=found[w[0]].kind,
                             size=found[w[0]].size, file_count=found[w[0]].file_count,
                             location=found[w[0]].location, key=found[w[0]].key)
            for port, w in wanted.items()}


def _user() -> str | None:
    try:
        import getpass
        return getpass.getuser()
    except (KeyError, OSError):
        return None
