"""A real MLflow tracking server for the tests: ``mlflow server`` with a SQLite backend store,
started once per test session on a free loopback port, stopped at the end.

The dev extra installs mlflow (the server); without it the tests that need one skip, saying so.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

START_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_pytest() -> None:
    """In the server's process: end when the test session's process ends, even if killed."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _mlflow_cli() -> str | None:
    here = Path(sys.executable).with_name("mlflow")
    return str(here) if here.exists() else shutil.which("mlflow")


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """The tracking URI (``http://127.0.0.1:PORT``) of a running ``mlflow server``."""
    cli = _mlflow_cli()
    if cli is None:
        pytest.skip("mlflow is not installed: pip install -e '.[dev]' (make test does) to run "
                    "the tests against a real MLflow tracking server")
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = open(root / "server.log", "wb")
    proc = subprocess.Popen(
        [cli, "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.sqlite'}",
         "--default-artifact-root", str(root / "artifacts"), "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=_die_with_pytest,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
             # the tracking API only: no background job runner (seven more processes)
             "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {proc.returncode}:\n"
                                   + (root / "server.log").read_text(errors="replace")[-3000:])
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not answer on {uri} within "
                                   f"{START_TIMEOUT_S} s")
            time.sleep(0.25)
        yield uri
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
