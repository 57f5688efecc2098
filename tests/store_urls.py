"""The store fixture: one test body, run against real SQLite and real PostgreSQL.

PostgreSQL needs ``MLPIPE_TEST_POSTGRES_URL`` (an admin URL such as
``postgresql+psycopg://mlpipe@127.0.0.1:54329/postgres``; ``.ci/run`` starts a throw-away
server and sets it). Without it the PostgreSQL half is skipped and the SQLite half runs.
"""
from __future__ import annotations

import os
import secrets

import pytest

PG_ENV = "MLPIPE_TEST_POSTGRES_URL"
BACKENDS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.slow)]


def _pg_database(admin_url: str):
    import sqlalchemy as sa

    name = f"mlpipe_test_{secrets.token_hex(4)}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(admin_url).set(database=name)
    return admin, name, url.render_as_string(hide_password=False)


def store_url_for(backend: str, tmp_path):
    """A fresh, empty store URL of ``backend`` and a cleanup function."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'evidence' / 'store.sqlite'}", lambda: None
    admin_url = os.environ.get(PG_ENV)
    if not admin_url:
        pytest.skip(f"no PostgreSQL server: set {PG_ENV} (make test does when PostgreSQL is "
                    f"installed) to run this half")
    admin, name, url = _pg_database(admin_url)

    def drop() -> None:
        import sqlalchemy as sa
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return url, drop


@pytest.fixture(params=BACKENDS)
def store_url(request, tmp_path):
    """A fresh evidence store URL: SQLite file, then a new PostgreSQL database."""
    url, cleanup = store_url_for(request.param, tmp_path)
    yield url
    cleanup()
