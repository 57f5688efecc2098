"""A store URL's password is never echoed: not in the library's errors, not on the terminal,
whichever way the URL fails (a driver that is absent, a server that is not there, a URL
SQLAlchemy cannot parse, a dialect that does not exist)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlpipe.errors import StoreError
from mlpipe.evidence.storage.config import redact, scrub
from mlpipe.evidence.storage.store import Store

SECRET = "S3CRETPW"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


URLS = [
    pytest.param(f"mysql://u:{SECRET}@127.0.0.1:3306/db", "cannot use the evidence store URL "
                 "'mysql://u:***@127.0.0.1:3306/db'", id="driver-absent"),
    pytest.param(f"postgresql+psycopg://u:{SECRET}@127.0.0.1:{{port}}/db?connect_timeout=2",
                 "cannot open the evidence store postgresql+psycopg://u:***@127.0.0.1:",
                 id="server-absent"),
    pytest.param(f"postgresql+psycopg://u:{SECRET}@db.example:notaport/db",
                 "cannot use the evidence store URL 'postgresql+psycopg://u:***@db.example:"
                 "notaport/db'", id="unparseable"),
    pytest.param(f"nosuchdialect://u:{SECRET}@db.example/db", "cannot use the evidence store "
                 "URL 'nosuchdialect://u:***@db.example/db'", id="unknown-dialect"),
    pytest.param(f"postgresql+psycopg://u:{SECRET[:4]}%40{SECRET[4:]}@127.0.0.1:{{port}}/db"
                 "?connect_timeout=2", "cannot open the evidence store", id="percent-encoded"),
]


@pytest.mark.parametrize(("url", "shown"), URLS)
def test_the_library_error_hides_the_password(url, shown):
    url = url.format(port=_closed_port())
    with pytest.raises(StoreError) as caught:
        Store.open(url).close()
    text = caught.value.render()
    assert shown in text
    assert SECRET not in text and SECRET[4:] not in text.replace("***", "")


@pytest.mark.slow
@pytest.mark.parametrize(("url", "shown"), URLS)
def test_the_terminal_never_shows_the_password(url, shown, tmp_path):
    url = url.format(port=_closed_port())
    env = {**os.environ, "MLPIPE_STORE_URL": url}
    for args in (["runs"], ["store", "upgrade"], ["evidence", "c-1", "--verify"]):
        done = subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, args
        assert done.stderr.startswith("error: "), done.stderr
        assert "Traceback" not in done.stderr
        assert SECRET not in done.stdout + done.stderr, (args, done.stderr)


def test_a_url_from_the_project_file_is_hidden_too(tmp_path):
    (tmp_path / "mlpipe.toml").write_text(f'[store]\nurl = "mysql://u:{SECRET}@h/db"\n')
    env = {k: v for k, v in os.environ.items() if k != "MLPIPE_STORE_URL"}
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "runs"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("error: cannot use the evidence store URL 'mysql://u:***@h/db'")
    assert SECRET not in done.stderr


@given(user=st.text("abcxyz_.-", min_size=1, max_size=8),
       password=st.text(st.characters(blacklist_characters="@/?#*", min_codepoint=33,
                                      max_codepoint=126), min_size=3, max_size=20))
def test_redact_and_scrub_never_leave_the_password(user, password):
    url = f"postgresql://{user}:{password}@db.example:5432/mlpipe"
    assert redact(url) == f"postgresql://{user}:***@db.example:5432/mlpipe"
    said = scrub(f"failed for {url} (password {password!s})", url)
    assert password not in said


def test_a_url_without_a_password_is_unchanged():
    assert redact("sqlite:////tmp/x/store.sqlite") == "sqlite:////tmp/x/store.sqlite"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert scrub("text", "postgresql://u@h/db") == "text"
