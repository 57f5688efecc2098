"""Signing keys and signed bundles: `mlpipe keys generate`, which key seals (environment,
mlpipe.toml, a local key generated on first use), and each sealed bundle's DSSE envelope,
verified here by securesystemslib (an implementation independent of mlpipe's own). Real keys
generated per test, real submits, SQLite and PostgreSQL."""
from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_project import BundleProject
from dsse_check import sslib_verify
from mlpipe.errors import UsageError
from mlpipe.evidence.signatures import keys


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


# --- keys -------------------------------------------------------------------------------------

def test_keys_generate_writes_a_p256_pair_private_mode_0600_and_never_overwrites(tmp_path):
    done = _cli("keys", "generate", "keys/ci.pem", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    private, public = tmp_path / "keys" / "ci.pem", tmp_path / "keys" / "ci.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) == 0o644
    key = keys.load_private(private)
    assert key.public_pem == public.read_bytes()
    assert f"key id {key.keyid}" in done.stdout
    shown = _cli("keys", "show", "keys/ci.pub", cwd=tmp_path)
    assert shown.stdout.startswith(f"key id {key.keyid}\n-----BEGIN PUBLIC KEY-----")
    again = _cli("keys", "generate", "keys/ci.pem", cwd=tmp_path)
    assert again.returncode == 2
    assert "keys/ci.pem exists: a key is never overwritten" in again.stderr
    assert keys.load_private(private).keyid == key.keyid


def test_a_key_mlpipe_cannot_sign_with_is_refused_with_one_line(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    def write(name: str, key, password: bytes | None = None) -> Path:
        enc = (serialization.BestAvailableEncryption(password) if password
               else serialization.NoEncryption())
        path = tmp_path / name
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8, enc))
        return path

    with pytest.raises(UsageError, match=r"ed\.pem is not an ECDSA P-256 key"):
        keys.load_private(write("ed.pem", ed25519.Ed25519PrivateKey.generate()))
    with pytest.raises(UsageError, match=r"p384\.pem is not an ECDSA P-256 key"):
        keys.load_private(write("p384.pem", ec.generate_private_key(ec.SECP384R1())))
    with pytest.raises(UsageError, match=r"locked\.pem is encrypted with a password"):
        keys.load_private(write("locked.pem", ec.generate_private_key(ec.SECP256R1()), b"pw"))
    (tmp_path / "junk.pem").write_text("not a key\n")
    with pytest.raises(UsageError, match=r"junk\.pem is not a PEM private key"):
        keys.load_private(tmp_path / "junk.pem")
    with pytest.raises(UsageError, match=r"cannot read the signing key .*absent\.pem"):
        keys.load_private(tmp_path / "absent.pem")


def test_concurrent_first_uses_make_one_local_key(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: keys.first_use_key(tmp_path).keyid, range(8)))
    assert len(set(found)) == 1
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == [
        "local-signing-key.pem", "local-signing-key.pub"]
    assert stat.S_IMODE((tmp_path / keys.LOCAL_KEY).stat().st_mode) == 0o600


# --- signed bundles ---------------------------------------------------------------------------

def test_every_sealed_bundle_is_signed_by_the_configured_key(store_url, tmp_path, monkeypatch):
    proj = BundleProject(tmp_path / "proj", store_url)
    ci = keys.generate(tmp_path / "ci.pem")
    with monkeypatch.context() as env:
        env.setenv("MLPIPE_SIGNING_KEY", str(tmp_path / "ci.pem"))
        cand = proj.submit()
        sealed = proj.evidence(cand, "--format", "json")
        envelope = proj.evidence(cand, "--format", "dsse")
    assert envelope.returncode == 0, envelope.stderr
    assert sslib_verify(envelope.stdout.encode(), ci.public_pem) == sealed.stdout.encode()
    assert json.loads(envelope.stdout)["signatures"][0]["keyid"] == ci.keyid
    # a key that did not sign it does not verify it
    from securesystemslib.exceptions import VerificationError

    with pytest.raises(VerificationError):
        sslib_verify(envelope.stdout.encode(), keys.generate(tmp_path / "other.pem").public_pem)
    # the next bundle (the store changed) is signed too, by whichever key is configured now
    proj.sql("UPDATE runs SET host = 'elsewhere'")
    other = keys.load_private(tmp_path / "other.pem")
    (proj.root / "mlpipe.toml").write_text('[signing]\nkey = "../other.pem"\n')
    assert proj.evidence(cand, "--rebuild").returncode == 0
    resealed = proj.evidence(cand, "--format", "dsse")
    payload = sslib_verify(resealed.stdout.encode(), other.public_pem)
    assert json.loads(payload)["predicate"]["previous_bundle"] == "sha256:" + __import__(
        "hashlib").sha256(sealed.stdout.encode()).hexdigest()


def test_without_configuration_a_local_key_is_generated_on_first_use(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    envelope = proj.evidence(cand, "--format", "dsse")
    assert envelope.returncode == 0, envelope.stderr
    local = keys.load_private(proj.root / "evidence" / keys.LOCAL_KEY)
    sslib_verify(envelope.stdout.encode(), local.public_pem)
    shown = proj.cli("keys", "show").stdout
    assert "(a local identity, generated on first use: untrusted until a trust policy" in shown
    assert f"key id {local.keyid}" in shown


def test_a_bundle_sealed_with_no_key_has_no_envelope_to_show(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    (proj.root / "mlpipe.toml").write_text('[signing]\nkey = "none"\n')
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    done = proj.evidence(cand, "--format", "dsse")
    assert done.returncode == 1 and done.stdout == ""
    assert "[MP730 bundle-unsigned] bundle sha256:" in done.stderr
    assert "sealed without a signing key: there is no envelope to show" in done.stderr
    assert not (proj.root / "evidence" / "keys").exists()


def test_a_configured_key_that_cannot_be_loaded_seals_nothing(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    (proj.root / "mlpipe.toml").write_text('[signing]\nkey = "absent.pem"\n')
    cand = proj.submit()
    done = proj.evidence(cand)
    assert done.returncode == 2 and done.stdout == ""
    assert f"cannot read the signing key {proj.root / 'absent.pem'}" in done.stderr
    (proj.root / "mlpipe.toml").write_text("")
    assert proj.evidence(cand).returncode == 0   # nothing half-sealed was left behind
    envelope = json.loads(proj.evidence(cand, "--format", "dsse").stdout)
    assert json.loads(base64.b64decode(envelope["payload"]))["predicate"]["previous_bundle"] is None
