"""Reading the store for the commands that only read (runs, show, diff, candidates): plain
indexed SQL, answered as the plain records of ``read_records`` (the models' attribute names),
so that showing what was recorded imports neither SQLAlchemy's ORM nor the models
(docs/performance.md: a command that reads costs about what starting mlpipe costs, whatever
the size of the store).

A SQLite store is read with the standard library's ``sqlite3``, read-only; any other database
through SQLAlchemy Core and the same SQL. A store this mlpipe must first bring to its schema
revision, or one holding runs of this host left running by an executor that died, is opened
once through ``Store`` (which upgrades it or refuses, and marks those runs interrupted), then
read here. Writes nothing itself. ``tests/evidence/test_reader.py`` holds the records equal to
the models and every query to an index.
"""
from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import quote

from mlpipe.errors import StoreError, UsageError
from mlpipe.evidence.records.fastpath import SCHEMA_HEAD
from mlpipe.evidence.records.read_records import (
    RUNNING,
    Artifact,
    Candidate,
    CodeRevision,
    Component,
    Environment,
    Metric,
    Run,
    RunInput,
    Snapshot,
    StepArtifact,
    StepRun,
)
from mlpipe.evidence.storage.config import missing_store
from mlpipe.evidence.storage.liveness import alive, host

# "user" and "commit" are quoted: keywords of SQL (PostgreSQL's ``user`` is the session's)
_RUN = ("id, pipeline_name, pipeline_digest, target, params, status, started_at, finished_at, "
        '"user", host, pid, pid_started, code_revision_id, options, message')
_STEP = ("sr.id, sr.run_id, sr.step, sr.component_version_id, sr.environment_id, sr.compute, "
         "sr.topology, sr.cache_key, sr.key_material, sr.cacheable, sr.status, "
         "sr.reused_from_id, sr.started_at, sr.finished_at, sr.log_path, sr.message, "
         "cv.id, cv.name, cv.version, cv.spec_digest, cv.code_digest, "
         "env.id, env.name, env.version, env.digest, env.mutable, sr.interpreter")
_STEPS_FROM = ("step_runs sr JOIN component_versions cv ON cv.id = sr.component_version_id "
               "LEFT JOIN environments env ON env.id = sr.environment_id")


class Reader:
    """An open store, for reading. Use as a context manager, or ``close()`` it.

    Example:
        >>> with Reader.open(locate().url) as r:
        ...     [run.id for run in r.pipeline_runs(limit=2)]
        ['r-9c1d2e3f4a5b', 'r-0b1c2d3e4f5a']
    """

    def __init__(self, connection: Any, dialect: str, closer: Any = None) -> None:
        self._conn = connection
        self.dialect = dialect
        self._closer = closer

    # -- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(cls, url: str) -> Reader:
        """Open the store at ``url`` for reading; a SQLite store that does not exist is an
        error, not a new empty store.

        Raises:
            StoreError: no such store, or it cannot be opened or brought to this schema.
        """
        path = _sqlite_path(url)
        if path is None or path == ":memory:":
            return cls._through_store(url)
        if not os.path.exists(path):
            raise missing_store(path)
        reader = cls._sqlite(path)
        if reader is None or reader._needs_store():
            if reader is not None:
                reader.close()
            cls._through_store(url).close()  # upgrade (or refuse), mark dead runs
            reader = cls._sqlite(path)
            if reader is None:
                raise StoreError(f"cannot read the evidence store {path}",
                                 hint="check that the file is a readable mlpipe store")
        return reader

    @classmethod
    def _sqlite(cls, path: str) -> Reader | None:
        try:
            conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=60)
            conn.execute("PRAGMA busy_timeout=60000")
        except sqlite3.Error:
            return None
        return cls(conn, "sqlite")

    @classmethod
    def _through_store(cls, url: str) -> Reader:
        from mlpipe.evidence.storage.store import Store

        store = Store.open(url, create=False)
        return cls(store.engine.connect(), store.engine.dialect.name, store)

    def _needs_store(self) -> bool:
        """Whether ``Store.open`` must see the store first: another schema revision, or runs
        of this host still recorded as running by a process that is gone."""
        try:
            head = self._conn.execute("SELECT version_num FROM alembic_version").fetchone()
            if head is None or head[0] != SCHEMA_HEAD:
                return True
            # the index named: with statistics that say nearly every run succeeded, SQLite
            # would otherwise scan a million runs for the few still running
            running = self._conn.execute(
                "SELECT pid, pid_started FROM runs INDEXED BY ix_runs_status "
                "WHERE status = ? AND host = ? AND pid IS NOT NULL",
                (RUNNING, host())).fetchall()
        except sqlite3.Error:
            return True
        return any(not alive(pid, token) for pid, token in running)

    def _scrubbed(self, exc: BaseException) -> str:
        from mlpipe.evidence.storage.config import scrub

        engine = getattr(self._closer, "engine", None)
        return scrub(str(exc), None if engine is None
                     else engine.url.render_as_string(hide_password=False))

    def close(self) -> None:
        self._conn.close()
        if self._closer is not None:
            self._closer.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------------------------

    def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple]:
        try:
            if self.dialect == "sqlite":
                return self._conn.execute(sql, params or {}).fetchall()
            from sqlalchemy import text

            return [tuple(r) for r in self._conn.execute(text(sql), params or {})]
        except Exception as exc:  # sqlite3.Error, SQLAlchemyError
            raise StoreError(f"the evidence store failed: {self._scrubbed(exc)}",
                             hint="check that the database is reachable") from exc

    def _json(self, value: Any) -> Any:
        if self.dialect == "sqlite" and isinstance(value, (str, bytes)):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise _damaged(value, f"is not JSON ({exc})") from None
        return value

    @staticmethod
    def _time(value: Any) -> datetime | None:
        if value is None or isinstance(value, datetime):
            return value
        try:
            return datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise _damaged(value, "is not a date and time") from None

    def _rows_in(self, sql: str, values: list[str]) -> Iterator[tuple]:
        """The rows of ``sql`` with its ``{marks}`` bound to ``values``, a chunk at a time (a
        database binds only so many parameters in one statement)."""
        for chunk in _chunks(values):
            marks, params = self._in("s", chunk)
            yield from self._rows(sql.format(marks=marks), params)

    @staticmethod
    def _in(prefix: str, values: list[Any]) -> tuple[str, dict[str, Any]]:
        names = [f"{prefix}{i}" for i in range(len(values))]
        return ", ".join(f":{n}" for n in names), dict(zip(names, values))

    def _prefix(self, column: str, ref: str) -> tuple[str, dict[str, Any]]:
        """``column`` starts with ``ref``, as an indexed range (ids are ASCII) on SQLite."""
        if self.dialect == "sqlite":
            return (f"{column} >= :lo AND {column} < :hi",
                    {"lo": ref, "hi": ref[:-1] + chr(ord(ref[-1]) + 1) if ref else "\uffff"})
        escaped = ref.replace("/", "//").replace("%", "/%").replace("_", "/_")
        return f"{column} LIKE :pattern ESCAPE '/'", {"pattern": escaped + "%"}

    # -- runs ------------------------------------------------------------------------------------

    def _run(self, row: tuple) -> Run:
        (rid, name, digest, target, params, status, started, finished, user, host, pid, token,
         code, options, message) = row
        return Run(rid, name, digest, target, self._json(params) or {}, status,
                   self._time(started), self._time(finished), user, host, pid, token, code,
                   self._json(options) or {}, message, self)

    def pipeline_runs(self, pipeline: str | None = None, *, limit: int | None = 50
                      ) -> list[Run]:
        """The runs of ``pipeline`` (every pipeline when None), newest first.

        Raises:
            UsageError: a negative ``limit`` (SQLite would read it as no limit, PostgreSQL
                refuse it).
        """
        _check_limit(limit)
        where = "WHERE pipeline_name = :pipeline " if pipeline is not None else ""
        sql = f"SELECT {_RUN} FROM runs {where}ORDER BY started_at DESC, id DESC"
        params: dict[str, Any] = {"pipeline": pipeline}
        if limit is not None:
            sql += " LIMIT :limit"
            params["limit"] = limit
        return [self._run(r) for r in self._rows(sql, params)]

    def get_run(self, run_id: str) -> Run | None:
        rows = self._rows(f"SELECT {_RUN} FROM runs WHERE id = :id", {"id": run_id})
        return self._run(rows[0]) if rows else None

    def find_run(self, ref: str) -> Run | None:
        """The run with id ``ref``, or the only run whose id starts with it."""
        run = self.get_run(ref)
        if run is not None or not ref:
            return run
        where, params = self._prefix("id", ref)
        rows = self._rows(f"SELECT {_RUN} FROM runs WHERE {where} ORDER BY id LIMIT 2", params)
        return self._run(rows[0]) if len(rows) == 1 else None

    def run_inputs(self, run_id: str) -> list[RunInput]:
        rows = self._rows(
            "SELECT ri.run_id, ri.name, ri.snapshot_id, s.id, s.digest, s.size, s.file_count, "
            "s.reference, s.mutable FROM run_inputs ri JOIN snapshots s ON s.id = ri.snapshot_id "
            "WHERE ri.run_id = :run ORDER BY ri.name", {"run": run_id})
        return [RunInput(r[0], r[1], r[2], Snapshot(r[3], r[4], r[5], r[6], r[7], bool(r[8])))
                for r in rows]

    def code_revision(self, revision_id: int) -> CodeRevision | None:
        rows = self._rows('SELECT id, "commit", dirty FROM code_revisions WHERE id = :id',
                          {"id": revision_id})
        return CodeRevision(rows[0][0], rows[0][1], bool(rows[0][2])) if rows else None

    # -- step runs -------------------------------------------------------------------------------

    def _step(self, r: tuple) -> StepRun:
        env = None if r[21] is None else Environment(r[21], r[22], r[23], r[24], bool(r[25]))
        return StepRun(r[0], r[1], r[2], r[3], r[4], self._json(r[5]) or {},
                       self._json(r[6]) or {}, r[7], self._json(r[8]), bool(r[9]), r[10], r[11],
                       self._time(r[12]), self._time(r[13]), r[14], r[15],
                       Component(r[16], r[17], r[18], r[19], r[20]), env, self,
                       self._json(r[26]))

    def run_steps(self, run_id: str) -> list[StepRun]:
        """A run's step runs, in the order they started, their artifacts and metrics read."""
        steps = [self._step(r) for r in self._rows(
            f"SELECT {_STEP} FROM {_STEPS_FROM} WHERE sr.run_id = :run "
            f"ORDER BY sr.started_at, sr.step", {"run": run_id})]
        ids = [s.id for s in steps]
        artifacts, metrics = self.step_artifacts(ids), self.step_metrics(ids)
        for s in steps:
            s.__dict__["artifacts"] = artifacts.get(s.id, [])
            s.__dict__["metrics"] = metrics.get(s.id, [])
        return steps

    def step_run(self, step_run_id: str) -> StepRun | None:
        rows = self._rows(f"SELECT {_STEP} FROM {_STEPS_FROM} WHERE sr.id = :id",
                          {"id": step_run_id})
        return self._step(rows[0]) if rows else None

    def step_record(self, step_run_id: str) -> dict[str, Any] | None:
        """The step record a step run keeps (docs/step-record.md, the stored form), or None.

        Example:
            >>> reader.step_record("s-1a2b3c")["diagnosis"]["code"]
            'MP905'
        """
        rows = self._rows("SELECT record FROM step_runs WHERE id = :id", {"id": step_run_id})
        return self._json(rows[0][0]) if rows else None

    def source_text(self, code_digest: str) -> dict[str, Any] | None:
        """The source file kept for ``code_digest`` (``{file, function, line, text}``), or
        None where none was kept (a script component, a store older than 0009)."""
        rows = self._rows("SELECT file, function, line, text FROM source_texts "
                          "WHERE code_digest = :d", {"d": code_digest})
        return None if not rows else dict(zip(("file", "function", "line", "text"), rows[0]))

    def step_artifacts(self, step_run_ids: list[str]) -> dict[str, list[StepArtifact]]:
        found: dict[str, list[StepArtifact]] = {}
        for r in self._rows_in(
                "SELECT sa.step_run_id, sa.direction, sa.port, sa.artifact_id, a.id, a.digest, "
                "a.kind, a.size, a.file_count, a.location FROM step_artifacts sa "
                "JOIN artifacts a ON a.id = sa.artifact_id WHERE sa.step_run_id IN ({marks})",
                step_run_ids):
            found.setdefault(r[0], []).append(
                StepArtifact(r[0], r[1], r[2], r[3], Artifact(*r[4:10])))
        return found

    def step_metrics(self, step_run_ids: list[str]) -> dict[str, list[Metric]]:
        found: dict[str, list[Metric]] = {}
        for r in self._rows_in(
                "SELECT id, step_run_id, name, value, scope, rank, population, reduced_over "
                "FROM metrics WHERE step_run_id IN ({marks}) ORDER BY id", step_run_ids):
            found.setdefault(r[1], []).append(Metric(*r))
        return found

    def previous_step_run(self, step_run: StepRun) -> StepRun | None:
        """The nearest earlier run of the same step of the same pipeline with key material."""
        run = step_run.run
        rows = self._rows(
            f"SELECT {_STEP} FROM {_STEPS_FROM} JOIN runs r ON r.id = sr.run_id "
            f"WHERE sr.step = :step AND sr.started_at < :started "
            f"AND sr.key_material IS NOT NULL AND r.pipeline_name = :pipeline "
            f"ORDER BY sr.started_at DESC LIMIT 1",
            {"step": step_run.step, "started": self._when(step_run.started_at),
             "pipeline": run.pipeline_name if run else None})
        return self._step(rows[0]) if rows else None

    def _when(self, value: datetime) -> Any:
        # as SQLAlchemy writes a DateTime on SQLite, so that comparing the text compares times
        return value.strftime("%Y-%m-%d %H:%M:%S.%f") if self.dialect == "sqlite" else value

    # -- candidates ------------------------------------------------------------------------------

    def candidates_of_run(self, run_id: str) -> list[Candidate]:
        """The candidates ``run_id`` registered, then those it reproduced (the same model and
        evaluation bytes as an earlier run's candidate: ``Candidate.run_id`` is that run)."""
        return (self._candidates("WHERE c.run_id = :run ORDER BY c.created_at, c.id",
                                 {"run": run_id})
                + self._candidates("JOIN candidate_productions p ON p.candidate_id = c.id "
                                   "WHERE p.run_id = :run ORDER BY c.created_at, c.id",
                                   {"run": run_id}))

    def candidate_rows(self, *, limit: int | None = 50) -> list[Candidate]:
        """Candidates, newest first, each with its pipeline, model digest, the evaluation's
        global metrics, its newest bundle's findings by severity and its newest decision; a
        negative ``limit`` is a UsageError (as for :meth:`pipeline_runs`)."""
        _check_limit(limit)
        sql, params = "ORDER BY c.created_at DESC, c.id DESC", {}
        if limit is not None:
            sql, params = sql + " LIMIT :limit", {"limit": limit}
        rows = self._candidates(sql, params)
        by_id = {c.id: c for c in rows}
        for chunk in _chunks(list(by_id)):
            marks, ids = self._in("c", chunk)
            # the evaluation step of the candidate's own run; its metrics are those of the
            # step run that executed it (itself, or the one it reused)
            for cid, name, value, population in self._rows(
                    f"SELECT c.id, m.name, m.value, m.population FROM candidates c "
                    f"JOIN step_artifacts sa ON sa.artifact_id = c.evaluation_artifact_id "
                    f"AND sa.direction = 'output' "
                    f"JOIN step_runs sr ON sr.id = sa.step_run_id AND sr.run_id = c.run_id "
                    f"JOIN metrics m ON m.step_run_id = COALESCE(sr.reused_from_id, sr.id) "
                    f"WHERE c.id IN ({marks}) AND m.scope = 'global' ORDER BY m.id", ids):
                by_id[cid].metrics.append((name, value, population))
            for cid, verdict, by, when, digest in self._rows(
                    f"SELECT candidate_id, verdict, reviewer, decided_at, bundle_digest "
                    f"FROM decisions WHERE candidate_id IN ({marks}) ORDER BY decided_at, id",
                    ids):
                by_id[cid].review = (verdict, by, self._time(when), digest)
            for cid, count in self._rows(
                    f"SELECT candidate_id, COUNT(*) FROM candidate_productions "
                    f"WHERE candidate_id IN ({marks}) GROUP BY candidate_id", ids):
                by_id[cid].productions = count
            for cid, content in self._rows(
                    f"SELECT b.candidate_id, b.content FROM bundles b WHERE b.candidate_id IN "
                    f"({marks}) AND b.sealed_at = (SELECT MAX(b2.sealed_at) FROM bundles b2 "
                    f"WHERE b2.candidate_id = b.candidate_id)", ids):
                counted = _severities(bytes(content))
                if counted is not None:
                    by_id[cid].findings, by_id[cid].findings_by_source = counted
            for cid, keyid in self._rows(
                    f"SELECT b.candidate_id, g.keyid FROM bundles b JOIN bundle_signatures g "
                    f"ON g.bundle_digest = b.digest WHERE b.candidate_id IN ({marks}) AND "
                    f"b.sealed_at = (SELECT MAX(b2.sealed_at) FROM bundles b2 "
                    f"WHERE b2.candidate_id = b.candidate_id)", ids):
                by_id[cid].signer = keyid
        return rows

    def _candidates(self, tail: str, params: dict[str, Any]) -> list[Candidate]:
        rows = self._rows(
            "SELECT c.id, c.run_id, COALESCE(c.name, r.pipeline_name), c.model_artifact_id, "
            "c.evaluation_artifact_id, c.created_at, r.pipeline_name, a.digest FROM candidates c "
            "JOIN runs r ON r.id = c.run_id JOIN artifacts a ON a.id = c.model_artifact_id "
            + tail, params)
        return [Candidate(r[0], r[1], r[2], r[3], r[4], self._time(r[5]), r[6], r[7])
                for r in rows]


def _severities(content: bytes) -> tuple[dict[str, int], dict[str, int]] | None:
    """The findings of a sealed bundle's bytes by severity and by where they came from
    (``findings.every_finding``: compile-time, run-time and evidence findings, those of every
    production too), read from the decoded statement, never by searching its text. None
    when the bytes are not a bundle (``--verify`` says why)."""
    from mlpipe.evidence.records.findings import every_finding, severities

    try:
        predicate = json.loads(content)["predicate"]
        found = every_finding(predicate)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    by_source: dict[str, int] = {}
    for f in found:
        by_source[f["source"]] = by_source.get(f["source"], 0) + 1
    return severities(found), by_source


def _chunks(values: list[str], size: int = 500) -> Iterator[list[str]]:
    for i in range(0, len(values), size):
        yield values[i:i + size]


def _sqlite_path(url: str) -> str | None:
    """The file of a plain ``sqlite:///PATH`` URL; None for anything else."""
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    return url[len("sqlite:///"):] or None


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise UsageError(f"--limit {limit} is negative", hint="give --limit 0 or more")


def _damaged(value: Any, what: str) -> StoreError:
    shown = repr(value if len(str(value)) <= 40 else f"{str(value)[:37]}...")
    return StoreError(f"a row of the evidence store holds {shown}, which {what}; the store "
                      f"was changed outside mlpipe", hint="restore the store from a backup; "
                      "`mlpipe evidence CANDIDATE --verify` says what else changed")


__all__ = ["Reader"]
