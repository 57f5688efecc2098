"""Bringing a store's schema to this mlpipe's Alembic head, once and under a lock.

Imports Alembic only when an upgrade is needed; never touches rows.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from mlpipe.errors import StoreError
from mlpipe.evidence.storage.room import want_of_room

#: The newest migration in ``migrations/versions`` (a test keeps the two in step).
HEAD = "0012_i37_races"
KNOWN = ("0001", "0002", "0003_i17", "0004_i13", "0005_i16", "0006_i14a", "0007_i12a",
         "0008_secret_key", "0009_i24", "0010_i23b_source", "0011_promotions")
MIGRATIONS = Path(__file__).parent / "migrations"
UPGRADE_COMMAND = "mlpipe store upgrade"
_PG_LOCK = 0x6D6C7069  # "mlpi": one advisory lock id for every mlpipe migration


def current_revision(engine: Engine) -> str | None:
    """The revision recorded in ``alembic_version``, or None for an empty store."""
    with engine.connect() as conn:
        if not engine.dialect.has_table(conn, "alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    if engine.dialect.name == "sqlite":
        db = engine.url.database
        if not db or db == ":memory:":
            yield
            return
        with open(f"{db}.migrate-lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    elif engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK})
                conn.commit()
    else:
        yield


def upgrade(engine: Engine) -> None:
    """Run every migration from the store's revision to :data:`HEAD`."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def ensure_schema(engine: Engine, *, auto_upgrade: bool = True) -> None:
    """Make sure the store's schema is at :data:`HEAD`, upgrading it when allowed.

    Raises:
        StoreError: the store is newer than this mlpipe, or older and ``auto_upgrade`` is off.
    """
    try:
        revision = current_revision(engine)
        if revision == HEAD:
            return
        if revision is not None and revision not in KNOWN:
            raise StoreError(f"the evidence store {_shown(engine)} has schema revision "
                             f"{revision!r}, newer than this mlpipe knows (head {HEAD!r})",
                             hint="upgrade mlpipe to the version that wrote this store")
        if not auto_upgrade:
            raise StoreError(f"the evidence store {_shown(engine)} has schema revision "
                             f"{revision!r}; this mlpipe needs {HEAD!r}",
                             hint=f"run `{UPGRADE_COMMAND}` (with the same MLPIPE_STORE_URL)")
        with _migration_lock(engine):
            if current_revision(engine) != HEAD:
                upgrade(engine)
    except SQLAlchemyError as exc:
        why = _why(engine, exc)
        room = want_of_room(engine.url.database if engine.dialect.name == "sqlite" else None,
                            why)
        if room is not None:
            raise StoreError(f"cannot open the evidence store {_shown(engine)}: {why}: "
                             f"{room[0]}", hint=room[1]) from exc
        raise StoreError(f"cannot open the evidence store {_shown(engine)}: {why}",
                         hint="check MLPIPE_STORE_URL and that the database is reachable"
                         ) from exc
    except OSError as exc:
        raise StoreError(f"cannot lock the evidence store {_shown(engine)} for migration: "
                         f"{_why(engine, exc)}",
                         hint="check that the store's folder is writable") from exc


def _shown(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def _why(engine: Engine, exc: BaseException) -> str:
    """An error's own words without the store's password (drivers may quote the URL)."""
    from mlpipe.evidence.storage.config import scrub

    text = str(getattr(exc, "orig", None) or exc).strip()
    return scrub(text, engine.url.render_as_string(hide_password=False))


def auto_upgrade_enabled() -> bool:
    """False when ``MLPIPE_STORE_AUTO_UPGRADE=0``: a team store upgraded by an operator."""
    return os.environ.get("MLPIPE_STORE_AUTO_UPGRADE", "1") not in ("0", "false", "no")
