"""Signatures in the store: a sealed bundle's DSSE envelope, a decision's, a candidate's model
signature; and which key signs here (configuration, read once per process).

Writes and reads the signature rows; judges none of them against a trust policy (``trust``
does) and builds no statement (``seal``, ``review`` and ``modelsig`` do).
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session

from mlpipe.codes import BUNDLE_UNSIGNED
from mlpipe.errors import MlpipeError
from mlpipe.evidence.signatures import dsse, keys
from mlpipe.evidence.signatures.keys import Signer
from mlpipe.evidence.storage import models as m

_CONFIGURED: dict[tuple[str | None, str], Signer | None] = {}


def configured_signer() -> Signer | None:
    """The key that seals here: ``MLPIPE_SIGNING_KEY`` / ``[signing] key``; ``none`` for none;
    without either, this home's local key (generated on first use: a local identity that no
    trust policy names until someone adds it).

    Raises:
        UsageError: the configured key cannot be loaded.
    """
    from mlpipe.evidence.storage.config import locate

    where = locate()
    cache_key = (where.signing_key, str(where.home))
    if cache_key not in _CONFIGURED:
        _CONFIGURED[cache_key] = signer_for(where.signing_key, where.home)
    return _CONFIGURED[cache_key]


def signer_for(spec: str | None, home: Path) -> Signer | None:
    """The key ``spec`` names: a PEM file's path, a Key Vault key id (``https://...``, signing
    in the vault), ``none`` (nothing signs), or None (nothing configured: this home's local
    key, generated on first use).

    Raises:
        UsageError: the key cannot be loaded.
    """
    if spec is None:
        return keys.first_use_key(home)
    if spec.strip().lower() == keys.NO_KEY:
        return None
    if spec.startswith("https://"):
        from mlpipe.evidence.signatures.keyvault import KeyVaultKey

        return KeyVaultKey.open(spec)
    return keys.load_private(Path(spec).expanduser())


def sign_bundle(s: Session, digest: str, content: bytes, signer: Signer, now: datetime) -> None:
    """Store the DSSE envelope of the sealed bundle ``digest`` (payload: its exact bytes)."""
    s.add(m.BundleSignature(bundle_digest=digest, keyid=signer.keyid,
                            envelope=dsse.sign(content, signer), signed_at=now))


def bundle_envelopes(s: Session, digests: list[str]) -> dict[str, bytes]:
    """The stored envelopes of the bundles ``digests`` (those that have one)."""
    from sqlalchemy import select

    if not digests:
        return {}
    rows = s.execute(select(m.BundleSignature.bundle_digest, m.BundleSignature.envelope)
                     .where(m.BundleSignature.bundle_digest.in_(digests)))
    return {d: bytes(e) for d, e in rows}


def stored_envelope(url: str, digest: str) -> bytes:
    """The DSSE envelope of the sealed bundle ``digest`` (``mlpipe evidence C --format dsse``).

    Raises:
        Unsigned: the bundle was sealed without a key (MP730).
    """
    from mlpipe.evidence.storage.store import Store

    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            found = bundle_envelopes(s, [digest]).get(digest)
    finally:
        store.close()
    if found is None:
        raise Unsigned(f"[{BUNDLE_UNSIGNED.code} {BUNDLE_UNSIGNED.name}] bundle {digest} was "
                       f"sealed without a signing key: there is no envelope to show",
                       hint="configure the key that seals (MLPIPE_SIGNING_KEY or [signing] key; "
                            "docs/signing.md), then `mlpipe evidence CANDIDATE --rebuild` seals "
                            "a signed bundle when the store changed")
    return found


class Unsigned(MlpipeError):
    """What was asked for is not signed (exit 1: a fact about the evidence)."""

    exit_code = 1


def submitters(s: Session, candidate_id: str) -> set[str]:
    """The accounts that ran the candidate's run and the later runs that reproduced it (what
    each recording machine reported as its user)."""
    from sqlalchemy import select

    runs = select(m.Production.run_id).where(m.Production.candidate_id == candidate_id)
    own = select(m.CandidateRow.run_id).where(m.CandidateRow.id == candidate_id)
    found = s.scalars(select(m.Run.user).where(m.Run.id.in_(own.union(runs))))
    return {u for u in found if u}


def decisions_of(s: Session, candidate_id: str) -> list[dict]:
    """The candidate's recorded decisions, oldest first, as ``trust.judge_decisions`` reads
    them."""
    from sqlalchemy import select

    rows = s.scalars(select(m.Decision).where(m.Decision.candidate_id == candidate_id)
                     .order_by(m.Decision.decided_at, m.Decision.id))
    return [{"id": d.id, "verdict": d.verdict, "bundle": d.bundle_digest, "by": d.reviewer,
             "candidate": d.candidate_id,
             "envelope": None if d.envelope is None else bytes(d.envelope)} for d in rows]


def sign_model_once(s: Session, candidate: m.CandidateRow, key: Signer, now: datetime) -> None:
    """Sign the candidate's model with OpenSSF Model Signing, once, when ``key`` is a configured
    key file (not the local first-use identity, not a Key Vault key: the library signs with a
    key file) and the model's files are here; the bundle then names the signature."""
    from mlpipe.evidence.storage.located import model_path

    path = getattr(key, "path", None)
    if path is None or getattr(key, "local_identity", False) or model_signature(
            s, candidate.id) is not None:
        return
    here = model_path(candidate)
    if here is None:
        return
    try:
        from mlpipe.evidence.signatures.modelsig import sign_model
    except ImportError:   # the signing extra is not installed: bundles are signed, models not
        return
    from mlpipe.digests import digest_bytes

    signature = sign_model(here, path)
    s.add(m.ModelSignature(candidate_id=candidate.id, keyid=key.keyid,
                           digest=digest_bytes(signature), signature=signature, signed_at=now))
    s.flush()


def model_signature(s: Session, candidate_id: str) -> m.ModelSignature | None:
    """The candidate's model signature (OpenSSF Model Signing's Sigstore bundle, JSON), or None.

    ``.signature`` holds its bytes, ``.digest`` their sha256 (the bundle names it under
    ``predicate.model_signature``), ``.keyid`` the key that signed it; ``mlpipe evidence C
    --export DIR`` writes it as ``DIR/model.sig``.
    """
    return s.get(m.ModelSignature, candidate_id)


__all__ = ["Unsigned", "bundle_envelopes", "configured_signer", "decisions_of", "model_signature",
           "sign_bundle", "sign_model_once", "signer_for", "stored_envelope", "submitters"]
