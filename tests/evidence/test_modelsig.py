"""Signed models and exports: a configured key signs the candidate's model folder with OpenSSF
Model Signing (model-signing, key-based), the bundle names the signature, `--export DIR` writes
it beside the bundle's and decisions' envelopes, model-signing's own verify checks it in a
process that never imports mlpipe, and a swapped model is caught (MP738, MP739). Real keys
generated per test, real submits, SQLite and PostgreSQL."""
from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_project import BundleProject
from dsse_check import sslib_verify
from mlpipe.evidence.signatures import keys

pytestmark = pytest.mark.slow

VERIFY = """
import sys
from model_signing import verifying
verifying.Config().use_elliptic_key_verifier(public_key=sys.argv[1]).verify(sys.argv[2], sys.argv[3])
assert "mlpipe" not in sys.modules
print("verified")
"""


def _model_signing_verify(public: Path, model: str, signature: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", VERIFY, str(public), model, str(signature)],
                          capture_output=True, text=True, timeout=120)


def _project(tmp_path: Path, store_url: str | None = None) -> BundleProject:
    proj = BundleProject(tmp_path / "proj", store_url)
    for name in ("ci", "dana", "mallory"):
        keys.generate(proj.root / f"{name}.pem")
    (proj.root / "mlpipe.toml").write_text('[signing]\nkey = "ci.pem"\n')
    (proj.root / "trust.yml").write_text(
        "identities:\n  ci: {public_key: ci.pub, may: [seal]}\n"
        "  dana: {public_key: dana.pub, may: [decide]}\n")
    return proj


def _sql(proj: BundleProject, statement: str, **params) -> None:
    import sqlalchemy as sa

    url = proj.store_url or f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(statement), params)
    engine.dispose()


def test_the_model_signature_is_exported_and_verified_by_model_signing_alone(store_url,
                                                                             tmp_path):
    proj = _project(tmp_path, store_url)
    cand = proj.submit()
    bundle = proj.bundle(cand)
    named = bundle["predicate"]["model_signature"]
    ci = keys.load_private(proj.root / "ci.pem")
    assert named["keyid"] == ci.keyid and named["format"].startswith("OpenSSF Model Signing")
    assert proj.cli("review", cand, "--accept", "--key", "dana.pem", "--trust", "trust.yml",
                    "--note", "ok").returncode == 0
    done = proj.cli("evidence", cand, "--export", "out")
    assert done.returncode == 0, done.stderr
    out = proj.root / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "bundle.dsse.json", "bundle.json", "decision-1.vsa.dsse.json", "export.json",
        "model.sig"]
    summary = json.loads((out / "export.json").read_text())
    assert summary["model"]["signature"] == named["digest"]
    assert "sha256:" + hashlib.sha256((out / "model.sig").read_bytes()).hexdigest() == \
        named["digest"]
    # the three signatures, each checked with its own standard library
    verified = _model_signing_verify(proj.root / "ci.pub", summary["model"]["here"],
                                     out / "model.sig")
    assert verified.returncode == 0 and verified.stdout == "verified\n", verified.stderr
    assert sslib_verify((out / "bundle.dsse.json").read_bytes(),
                        (proj.root / "dana.pub").read_bytes()) == (out / "bundle.json").read_bytes()
    vsa = json.loads(sslib_verify((out / "decision-1.vsa.dsse.json").read_bytes(),
                                  (proj.root / "dana.pub").read_bytes()))
    assert vsa["predicate"]["verificationResult"] == "PASSED"
    # an export never overwrites
    again = proj.cli("evidence", cand, "--export", "out")
    assert again.returncode == 2 and "out exists and is not an empty folder" in again.stderr


def test_a_swapped_model_is_caught_by_its_signature(tmp_path):
    proj = _project(tmp_path)
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    assert proj.cli("evidence", cand, "--export", "out").returncode == 0
    here = Path(json.loads((proj.root / "out" / "export.json").read_text())["model"]["here"])
    weights = next(p for p in sorted(here.rglob("*")) if p.is_file())
    original = weights.read_bytes()
    weights.chmod(0o644)
    weights.write_bytes(original + b"backdoor")
    # 1. its manifest updated: re-signed with the forger's key, stored as the model signature
    from mlpipe.evidence.signatures.modelsig import sign_model

    forged = sign_model(here, proj.root / "mallory.pem")
    _sql(proj, "UPDATE model_signatures SET signature = :sig", sig=forged)
    done = proj.evidence(cand, "--verify", "--trust", "trust.yml")
    assert done.returncode == 1
    assert "error[MP739] model-signer-untrusted: the model signature sha256:" in done.stdout
    assert "is signed by a key the trust policy does not name" in done.stdout
    # 2. the manifest edited to the new bytes without re-signing
    signature = json.loads((proj.root / "out" / "model.sig").read_bytes())
    payload = json.loads(base64.b64decode(signature["dsseEnvelope"]["payload"]))
    for r in payload["predicate"]["resources"]:
        if weights.name in r["name"]:
            r["digest"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    signature["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    _sql(proj, "UPDATE model_signatures SET signature = :sig",
         sig=json.dumps(signature).encode())
    done = proj.evidence(cand, "--verify", "--trust", "trust.yml")
    assert done.returncode == 1
    assert "error[MP738] model-signature-invalid" in done.stdout
    assert "its signature does not verify: the manifest was changed after signing" in done.stdout
    # 3. the signature as sealed, the model swapped: the manifest is not the files
    _sql(proj, "UPDATE model_signatures SET signature = :sig",
         sig=(proj.root / "out" / "model.sig").read_bytes())
    done = proj.evidence(cand, "--verify", "--trust", "trust.yml")
    assert "the model's files no longer match its signed manifest" in done.stdout
    weights.write_bytes(original)
    done = proj.evidence(cand, "--verify", "--trust", "trust.yml")
    assert done.returncode == 0, done.stdout


def test_the_local_first_use_key_signs_bundles_but_no_model(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    assert "model_signature" not in proj.bundle(cand)["predicate"]
    assert proj.evidence(cand, "--format", "dsse").returncode == 0
