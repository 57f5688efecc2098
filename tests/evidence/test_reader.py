"""The read path of runs, show, diff and candidates (``mlpipe.evidence.records.reader``): plain SQL that
answers what the models answer, on SQLite and PostgreSQL, through an index every time, with
neither SQLAlchemy nor the models imported for a SQLite store."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from evidence.test_store import _record
from mlpipe.errors import StoreError, UsageError
from mlpipe.evidence.records import queries
from mlpipe.evidence.records.reader import Reader
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

ROOT = Path(__file__).resolve().parents[2]

RUN_FIELDS = ("id", "pipeline_name", "pipeline_digest", "target", "params", "status",
              "started_at", "finished_at", "user", "host", "pid", "pid_started",
              "code_revision_id", "options", "message")
STEP_FIELDS = ("id", "run_id", "step", "component_version_id", "environment_id", "compute",
               "topology", "cache_key", "key_material", "cacheable", "status",
               "reused_from_id", "started_at", "finished_at", "log_path", "message", "duration",
               "interpreter")


def _same(record, row, fields) -> None:
    for name in fields:
        assert getattr(record, name) == getattr(row, name), name


def _recorded(store_url) -> tuple[Store, list[str]]:
    store = Store.open(store_url)
    run1, step1, _ = _record(store, snapshot="blake3:zz")
    run2, _, _ = _record(store, snapshot="blake3:yy", reuse_of=step1)
    run3, _, _ = _record(store, pipeline="other", snapshot="blake3:yy", reuse_of=step1)
    return store, [run1, run2, run3]


def test_records_equal_the_models(store_url):
    store, runs = _recorded(store_url)
    with store.session() as s, Reader.open(store_url) as r:
        assert [x.id for x in r.pipeline_runs()] == \
            [x.id for x in queries.pipeline_runs(s)]
        assert [x.id for x in r.pipeline_runs("p", limit=1)] == [runs[1]]
        for run_id in runs:
            row, record = s.get(m.Run, run_id), r.get_run(run_id)
            _same(record, row, RUN_FIELDS)
            assert (record.code_revision.commit, record.code_revision.dirty) == \
                (row.code_revision.commit, row.code_revision.dirty)
            assert [(i.name, i.snapshot.digest, i.snapshot.reference, i.snapshot.mutable,
                     i.snapshot.size, i.snapshot.file_count) for i in record.inputs] == \
                [(i.name, i.snapshot.digest, i.snapshot.reference, i.snapshot.mutable,
                  i.snapshot.size, i.snapshot.file_count)
                 for i in sorted(row.inputs, key=lambda i: i.name)]
            for got, want in zip(r.run_steps(run_id), queries.run_steps(s, run_id),
                                 strict=True):
                _same(got, want, STEP_FIELDS)
                assert (got.component.name, got.component.version, got.component.code_digest,
                        got.component.spec_digest) == \
                    (want.component.name, want.component.version, want.component.code_digest,
                     want.component.spec_digest)
                assert (got.environment.name, got.environment.digest) == \
                    (want.environment.name, want.environment.digest)
                assert [(a.direction, a.port, a.artifact.digest, a.artifact.kind)
                        for a in got.artifacts] == \
                    [(a.direction, a.port, a.artifact.digest, a.artifact.kind)
                     for a in want.artifacts]
                assert [(x.name, x.value, x.scope, x.rank, x.population) for x in got.metrics] \
                    == [(x.name, x.value, x.scope, x.rank, x.population) for x in want.metrics]
                if want.reused_from_id:
                    assert got.reused_from.id == want.reused_from.id
                    assert [x.value for x in got.reused_from.metrics] == \
                        [x.value for x in want.reused_from.metrics]
                before, after = r.previous_step_run(got), queries.previous_step_run(s, want)
                assert (before and before.id) == (after and after.id)
        assert [(c.id, c.pipeline, c.model_digest, c.created_at, c.run_id)
                for c in r.candidate_rows()] == \
            [(c.id, pipeline, digest, c.created_at, c.run_id)
             for c, pipeline, digest in queries.candidate_rows(s)]
        assert r.find_run("r-") is None  # three runs start alike
        assert r.find_run(runs[0][:-1]).id == runs[0]
        assert r.find_run(runs[0]).id == runs[0]
        assert r.find_run("r-nothing") is None
    store.close()


def test_a_missing_store_is_reported_not_made(tmp_path):
    path = tmp_path / "evidence" / "store.sqlite"
    with pytest.raises(StoreError, match=r"no evidence store at .*store\.sqlite: nothing has "
                                         r"been recorded there yet"):
        Reader.open(f"sqlite:///{path}")
    assert not path.exists() and not path.parent.exists()


def test_a_store_at_an_older_revision_is_upgraded_first(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store, runs = _recorded(url)
    with store.engine.begin() as conn:  # back to the revision before the read indexes
        for later in ("DROP TABLE promotion_claims",  # 0012_i37_races's
                      "DROP TABLE promotions",  # 0011_promotions's
                      "DROP TABLE source_texts",  # 0010_i23b_source's
                      "DROP TABLE bundle_signatures", "DROP TABLE model_signatures",  # 0009_i24
                      "DROP TABLE store_keys",  # 0008_secret_key's
                      "DROP TABLE decisions", "DROP TABLE candidate_productions",
                      "DROP INDEX ix_candidates_model"):   # 0007_i12a's
            conn.execute(text(later))
        conn.execute(text("ALTER TABLE step_runs DROP COLUMN interpreter"))  # (0005_i16)
        conn.execute(text("DROP INDEX ix_runs_started"))
        conn.execute(text("DROP INDEX ix_candidates_created"))
        conn.execute(text("ALTER TABLE artifacts DROP COLUMN key"))  # and before keys
        conn.execute(text("UPDATE alembic_version SET version_num = '0003_i17'"))
    store.close()
    with Reader.open(url) as r:
        assert {x.id for x in r.pipeline_runs()} == set(runs)
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"ix_runs_started", "ix_candidates_created"} <= names


def test_a_run_whose_executor_died_is_read_as_interrupted(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store, runs = _recorded(url)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE runs SET status = 'running', host = :host, pid = :pid "
                          "WHERE id = :id"),
                     {"host": __import__("socket").gethostname(), "pid": dead.pid,
                      "id": runs[0]})
    store.close()
    with Reader.open(url) as r:
        assert r.get_run(runs[0]).status == m.INTERRUPTED


def _plans(url: str, run: str) -> list[tuple[str, list[str]]]:
    """Every statement the reader ran for the read commands, with SQLite's plan for it."""
    statements: list[str] = []
    with Reader.open(url) as r:
        r._conn.set_trace_callback(statements.append)
        r.pipeline_runs()
        r.pipeline_runs("p")
        found = r.find_run(run[:-1])
        r.run_inputs(run)
        r.code_revision(found.code_revision_id)
        steps = r.run_steps(run)
        r.step_run(steps[0].id)
        r.previous_step_run(steps[0])
        r.candidates_of_run(run)
        r.candidate_rows()
    plans = []
    with sqlite3.connect(url[len("sqlite:///"):]) as conn:
        for sql in statements:
            if not sql.lstrip().upper().startswith("SELECT") or "alembic_version" in sql:
                continue
            plans.append((sql, [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]))
    return plans


def test_every_read_is_indexed(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store, runs = _recorded(url)
    store.close()
    plans = _plans(url, runs[1])
    assert len(plans) >= 10
    for sql, plan in plans:
        for step in plan:  # a whole-table scan: "SCAN runs", not "SCAN runs USING INDEX ..."
            assert not step.startswith("SCAN ") or "USING" in step, (sql, plan)
        if "FROM runs ORDER BY" in sql or ("FROM candidates c" in sql and "ORDER BY" in sql \
                and "run_id" not in sql):  # the newest first: an index walked, nothing sorted
            assert not any("TEMP B-TREE" in step for step in plan), (sql, plan)


PROBE = """
import json, sys
from mlpipe.cli import main
sys.argv = ["mlpipe", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:  # diff exits 1 when the runs differ (these two do), as diff(1)
    assert not exit.code or (sys.argv[1] == "diff" and exit.code == 1), exit.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"sqlalchemy", "alembic", "jsonschema"}
               | {m for m in sys.modules if m.startswith("mlpipe.evidence.storage.models")})
print(json.dumps(heavy), file=sys.stderr)
"""


def test_the_read_commands_import_no_orm(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store, runs = _recorded(url)
    store.close()
    env = {**os.environ, "MLPIPE_STORE_URL": url}
    for args in (["runs"], ["runs", "--format", "json"], ["show", runs[1]],
                 ["show", runs[1], "--why", "train"], ["show", runs[1], "--format", "json"],
                 ["diff", runs[0], runs[1]], ["diff", runs[0], runs[1], "--format", "json"],
                 ["candidates"], ["candidates", "--format", "json"]):
        done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, (args, done.stderr)
        assert json.loads(done.stderr.strip().splitlines()[-1]) == [], args


def test_the_running_runs_lookup_stays_indexed_when_statistics_say_all_succeeded(tmp_path):
    # a store that was ANALYZEd when a million runs had succeeded: SQLite would rather scan
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store, _ = _recorded(url)
    store.close()
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        conn.execute("ANALYZE")
        conn.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'runs'")
        conn.execute("INSERT INTO sqlite_stat1 VALUES ('runs', 'ix_runs_status', "
                     "'1000000 1000000'), ('runs', NULL, '1000000')")
    statements: list[str] = []
    with Reader.open(url) as r:
        r._conn.set_trace_callback(statements.append)
        assert r._needs_store() is False
    (sql,) = [s for s in statements if "FROM runs" in s]
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        plan = [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    assert plan == ["SEARCH runs USING INDEX ix_runs_status (status=?)"]


def test_a_negative_limit_is_refused_alike_on_every_database(store_url):
    store, _runs = _recorded(store_url)
    store.close()
    with Reader.open(store_url) as r:
        assert r.pipeline_runs(limit=0) == []
        with pytest.raises(UsageError, match=r"^--limit -1 is negative\n  help: give --limit 0 or "
                                             r"more$"):
            r.pipeline_runs(limit=-1)
        with pytest.raises(UsageError, match=r"^--limit -5 is negative"):
            r.candidate_rows(limit=-5)


@pytest.mark.parametrize("column, value, said", [
    ("params", "{not json", "'{not json', which is not JSON (Expecting property name enclosed "
                            "in double quotes: line 1 column 2 (char 1))"),
    ("options", "[1, 2", "'[1, 2', which is not JSON"),
    ("started_at", "yesterday", "'yesterday', which is not a date and time"),
    ("finished_at", "2026-13-45T99:00:00", "'2026-13-45T99:00:00', which is not a date and "
                                           "time"),
])
def test_a_damaged_row_is_one_clear_store_error(tmp_path, column, value, said):
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store, runs = _recorded(url)
    store.close()
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        db.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (value, runs[0]))
    with Reader.open(url) as r, pytest.raises(StoreError) as caught:
        r.get_run(runs[0])
    assert caught.value.render().startswith(f"a row of the evidence store holds {said}")
    assert caught.value.render().endswith(
        "; the store was changed outside mlpipe\n  help: restore the store from a backup; "
        "`mlpipe evidence CANDIDATE --verify` says what else changed")
