"""The evidence store on real SQLite and real PostgreSQL: schema, writes, reviewer queries."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy import text

from mlpipe.errors import StoreError
from mlpipe.evidence.records.queries import (
    candidate_story,
    candidates_on_snapshot,
    pipeline_runs,
    runs_reusing,
)
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.migrate import HEAD, MIGRATIONS, current_revision
from mlpipe.evidence.storage.store import Store


def test_schema_head_constant_matches_the_migrations():
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD


def test_migrations_match_the_models(store_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    store = Store.open(store_url)
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), m.Base.metadata) == []
    assert current_revision(store.engine) == HEAD


def _record(store: Store, *, pipeline="p", snapshot="blake3:aa", reuse_of=None):
    pipe = store.pipeline_spec(f"sha256:{pipeline}", pipeline, {"name": pipeline})
    snap = store.snapshot(snapshot, "/data/raw", 10, 2, mutable=True)
    comp = store.component_version("train", "1", "sha256:c", "sha256:code", {})
    env = store.environment("cpu", "4", "sha256:e", False)
    run_id = store.begin_run(pipeline=pipe, target="local", params={"epochs": 3},
                             inputs={"raw": snap}, code=store.code_revision("abc", True),
                             options={})
    step = store.add_step_run(run_id=run_id, step="train", component_version_id=comp.id,
                              environment_id=env.id, compute={}, topology={},
                              cache_key="sha256:k", key_material={"params": {}},
                              status=m.REUSED if reuse_of else m.RUNNING,
                              reused_from_id=reuse_of)
    model = store.artifact(f"blake3:model-{snapshot}", "mlflow_model", 5, 1, "/cas/model")
    store.finish_step_run(step, status=m.REUSED if reuse_of else m.EXECUTED,
                          outputs={"model": model},
                          metrics=[{"name": "acc", "value": 0.9, "scope": "global",
                                    "rank": None, "population": "test"}])
    store.finish_run(run_id, m.SUCCEEDED)
    cand = store.register_candidate(run_id, model, None, "cand")
    return run_id, step, cand


def test_reviewer_queries(store_url):
    store = Store.open(store_url)
    run1, step1, cand1 = _record(store, snapshot="blake3:zz")
    run2, _step2, cand2 = _record(store, snapshot="blake3:yy", reuse_of=step1)
    run3, _, _ = _record(store, pipeline="other", snapshot="blake3:yy", reuse_of=step1)
    with store.session() as s:
        assert [r.id for r in runs_reusing(s, step1)] == [run3, run2]
        assert [c.id for c in candidates_on_snapshot(s, "blake3:zz")] == [cand1]
        assert [r.id for r in pipeline_runs(s, "p")] == [run2, run1]
        story = candidate_story(s, cand2)
    assert story["run"]["id"] == run2
    assert story["inputs"]["raw"]["digest"] == "blake3:yy"
    assert story["code"] == {"commit": "abc", "dirty": True}
    (step,) = story["steps"]
    assert step["reused_from"] == step1 and step["status"] == m.REUSED
    # a reused step's metrics are the executed original's, and say so
    assert step["metrics"] == [{"name": "acc", "value": 0.9, "scope": "global", "rank": None,
                                "population": "test", "from_step_run": step1}]
    with store.session() as s:
        assert candidate_story(s, "c-missing") is None


def test_shared_rows_are_not_duplicated(store_url):
    store = Store.open(store_url)
    a = store.environment("cpu", None, "sha256:e", True)
    b = store.environment("cpu", None, "sha256:e", True)
    assert a.id == b.id and a.version == ""


def test_a_dead_executors_run_is_marked_interrupted_on_open(store_url):
    store = Store.open(store_url)
    run_id, _, _ = _record(store)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    with store.session() as s:
        s.execute(m.Run.__table__.update().where(m.Run.id == run_id).values(
            status=m.RUNNING, pid=int(dead)))
        s.execute(m.StepRun.__table__.update().where(m.StepRun.run_id == run_id).values(
            status=m.RUNNING))
    alive = store.begin_run(pipeline=store.pipeline_spec("sha256:p", "p", {}), target="local",
                            params={}, inputs={}, code=None, options={})
    store.close()
    reopened = Store.open(store_url)
    with reopened.session() as s:
        run = s.get(m.Run, run_id)
        assert run.status == m.INTERRUPTED
        assert "killed or crashed" in run.message
        assert {sr.status for sr in run.steps} == {m.INTERRUPTED}
        assert s.get(m.Run, alive).status == m.RUNNING  # this process is alive


def test_a_newer_schema_is_refused(store_url):
    store = Store.open(store_url)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    store.close()
    with pytest.raises(StoreError, match=r"schema revision '9999', newer than this mlpipe "
                                         rf"knows \(head '{HEAD}'\)"):
        Store.open(store_url)


def test_an_old_schema_names_the_upgrade_command_when_auto_upgrade_is_off(tmp_path):
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    with pytest.raises(StoreError, match=rf"has schema revision None; this mlpipe needs '{HEAD}'"
                                         r"\n  help: run `mlpipe store upgrade`"):
        Store.open(url, auto_upgrade=False)
    Store.open(url, auto_upgrade=True)
    assert Store.open(url, auto_upgrade=False) is not None


def test_sqlite_store_uses_wal_and_a_busy_timeout(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path / 's.sqlite'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 60000


def test_an_unreachable_store_is_one_clear_error():
    with pytest.raises(StoreError, match=r"cannot open the evidence store .*127\.0\.0\.1:1"):
        Store.open("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_a_bad_url_is_one_clear_error():
    with pytest.raises(StoreError, match=r"cannot use the evidence store URL 'nosuch://x'"):
        Store.open("nosuch://x")


def test_store_url_from_env_and_config_file(tmp_path, monkeypatch):
    from mlpipe.evidence.storage.config import locate

    monkeypatch.delenv("MLPIPE_STORE_URL", raising=False)
    monkeypatch.delenv("MLPIPE_HOME", raising=False)
    (tmp_path / "sub").mkdir()
    assert locate(tmp_path / "sub").url == f"sqlite:///{tmp_path / 'sub' / 'evidence' / 'store.sqlite'}"
    (tmp_path / "mlpipe.toml").write_text('[store]\nurl = "postgresql+psycopg://team/db"\n')
    assert locate(tmp_path / "sub").url == "postgresql+psycopg://team/db"
    assert locate(tmp_path / "sub").home == tmp_path / "evidence"
    monkeypatch.setenv("MLPIPE_STORE_URL", "sqlite:////x.sqlite")
    assert locate(tmp_path).url == "sqlite:////x.sqlite"


def test_import_mlpipe_and_help_do_not_import_sqlalchemy():
    code = ("import sys, mlpipe, mlpipe.cli, mlpipe.runtime; "
            "print(sorted(k for k in ('sqlalchemy', 'alembic', 'azure.ai.ml', 'torch') "
            "if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr
    helped = subprocess.run([sys.executable, "-X", "importtime", "-m", "mlpipe.cli", "--help"],
                            capture_output=True, text=True, env={**os.environ})
    assert helped.returncode == 0
    assert "sqlalchemy" not in helped.stderr


def test_a_store_at_revision_0001_upgrades_to_the_head_keeping_its_rows(tmp_path):
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, inspect

    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = create_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.execute(text("INSERT INTO pipeline_specs (digest, name, spec) VALUES "
                          "('sha256:p', 'p', '{}')"))
    engine.dispose()
    store = Store.open(url)
    assert current_revision(store.engine) == HEAD
    with store.session() as s:
        assert s.get(m.PipelineSpecRow, "sha256:p").name == "p"
    columns = {c["name"] for c in inspect(store.engine).get_columns("metrics")}
    assert "reduced_over" in columns
    assert {"bundles", "check_results"} <= set(inspect(store.engine).get_table_names())


def test_commands_that_only_read_do_not_create_a_missing_store(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from mlpipe.cli import main

    missing = tmp_path / "typo" / "store.sqlite"
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{missing}")
    for args in (["runs"], ["show", "r-1"], ["diff", "r-1", "r-2"], ["candidates"],
                 ["evidence", "c-1", "--rebuild"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, args
        assert result.output.startswith(f"error: no evidence store at {missing}: nothing has "
                                        f"been recorded there yet"), result.output
    assert not missing.parent.exists()


def test_a_store_folder_that_cannot_be_made_is_one_clear_error(tmp_path):
    from mlpipe.errors import StoreError
    from mlpipe.evidence.storage.store import Store

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match=r"cannot create the folder of the evidence store "
                                         r".*file/sub/x.sqlite: .*\n  help: point MLPIPE_STORE_URL"):
        Store.open(f"sqlite:///{blocker}/sub/x.sqlite")


def test_a_relative_sqlite_path_in_mlpipe_toml_is_relative_to_the_project(tmp_path, monkeypatch):
    from mlpipe.evidence.storage.config import locate

    monkeypatch.delenv("MLPIPE_STORE_URL", raising=False)
    (tmp_path / "mlpipe.toml").write_text('[store]\nurl = "sqlite:///evidence/s.sqlite"\n')
    (tmp_path / "sub").mkdir()
    assert locate(str(tmp_path / "sub")).url == f"sqlite:///{tmp_path}/evidence/s.sqlite"


def test_a_store_at_revision_0002_gains_step_records_keeping_its_rows(tmp_path):
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, inspect, select

    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = create_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")
        conn.execute(text("INSERT INTO artifacts (digest, kind, size, file_count, location) "
                          "VALUES ('blake3:a', 'uri_file', 1, 1, '/x')"))
    engine.dispose()
    store = Store.open(url)
    with store.session() as s:
        art = s.scalars(select(m.Artifact)).one()
        assert (art.digest, art.files) == ("blake3:a", None)
    assert "record" in {c["name"] for c in inspect(store.engine).get_columns("step_runs")}
