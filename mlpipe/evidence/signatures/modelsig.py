"""A candidate's model signed with OpenSSF Model Signing (``model-signing``, key-based: a
Sigstore bundle whose DSSE envelope signs a manifest of every file's sha256), and checking such
a signature against the files here.

Signing uses the library itself, so its own ``verify`` checks what mlpipe stored (the tests do
exactly that, without mlpipe); checking here reads the same format with ``dsse`` and
``cryptography``, so ``--verify`` does not import the library (about a second) to check one
envelope. Stores nothing (``signing`` does).
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
from pathlib import Path

from mlpipe.evidence.signatures import dsse
from mlpipe.evidence.signatures.keys import load_public, valid

#: How the bundle names the signature's format.
FORMAT = "OpenSSF Model Signing v1.0: Sigstore bundle v0.3, key-based (model-signing)"
PREDICATE = "https://model_signing/signature/v1.0"


def sign_model(path: str | os.PathLike[str], private_key: str | os.PathLike[str]) -> bytes:
    """The model signature of the file or folder at ``path``, by the PEM key ``private_key``.

    Raises:
        ImportError: model-signing is not installed (``pip install 'mlpipe-aml[signing]'``).
    """
    from model_signing import signing

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model.sig"
        signing.Config().use_elliptic_key_signer(private_key=str(private_key)).sign(
            str(path), str(out))
        return out.read_bytes()


def signature_keyid(signature: bytes) -> str | None:
    """The key id a model signature names (``verificationMaterial.publicKey.hint``)."""
    try:
        hint = json.loads(signature)["verificationMaterial"]["publicKey"]["hint"]
    except (ValueError, KeyError, TypeError):
        return None
    return hint if isinstance(hint, str) else None


def check(signature: bytes, public_pem: bytes, files: dict[str, str] | None) -> str | None:
    """Why the model signature does not hold for the model whose files (relative name ->
    sha256 hex, as hashed here; None: not here, the manifest is not compared) are ``files``,
    signed by ``public_pem``; None when it holds."""
    try:
        envelope = json.loads(signature)["dsseEnvelope"]
        payload = base64.b64decode(envelope["payload"], validate=True)
        sigs = [base64.b64decode(x["sig"], validate=True) for x in envelope["signatures"]]
        kind = envelope["payloadType"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        return "it is not a Sigstore bundle with a DSSE envelope"
    message = dsse.pae(kind, payload)
    key = load_public(public_pem)
    if not any(valid(key, sig, message) for sig in sigs):
        return "its signature does not verify: the manifest was changed after signing"
    try:
        statement = json.loads(payload)
        signed = {r["name"]: r["digest"] for r in statement["predicate"]["resources"]
                  if r.get("algorithm") == "sha256"}
    except (ValueError, KeyError, TypeError):
        return "its signed manifest is not a model-signing manifest"
    if statement.get("predicateType") != PREDICATE:
        return f"its signed statement is a {statement.get('predicateType')!r}, not a manifest"
    if files is None:
        return None
    if len(files) == 1 and len(signed) == 1:   # one file: names differ (the file's, a label)
        signed = dict(zip(files, signed.values(), strict=True))
    changed = sorted(n for n in set(signed) | set(files) if signed.get(n) != files.get(n))
    if changed:
        name = changed[0]
        return (f"the model's files no longer match its signed manifest: {name} "
                f"({'signed ' + signed[name][:12] if name in signed else 'not signed'}, "
                f"{'now ' + files[name][:12] if name in files else 'not here'})")
    return None


__all__ = ["FORMAT", "PREDICATE", "check", "sign_model", "signature_keyid"]
