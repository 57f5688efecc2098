"""Sealing a bundle: canonical bytes, their sha256 digest, stored once, chained to the one before.

Owns the canonical form and the ``bundles`` table; builds nothing itself (``bundle`` does) and
re-hashes no artifact (``verify`` does).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mlpipe.codes import BUNDLE_CHAIN_MISSING
from mlpipe.digests import canonical_json, digest_bytes
from mlpipe.errors import MlpipeError, StoreError
from mlpipe.evidence.bundles.bundle import build, find_candidate
from mlpipe.evidence.bundles.compare import differences
from mlpipe.evidence.records.fastpath import read_sealed
from mlpipe.evidence.signatures.signing import configured_signer, sign_bundle, sign_model_once
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store, utcnow

SCHEMA_PATH = Path(__file__).with_name("bundle.schema.json")
#: Fields sealing adds to the predicate; everything else is rebuilt from the store.
SEAL_FIELDS = ("sealed_at", "previous_bundle")


def canonical(statement: dict[str, Any]) -> bytes:
    """The exact bytes a bundle is sealed as: JSON with sorted keys, compact separators, UTF-8,
    no NaN, and one closing newline (so ``mlpipe evidence C --format json | sha256sum`` gives
    the bundle digest).

    Example:
        >>> canonical({"b": 1, "a": [1.5, None]})
        b'{"a":[1.5,null],"b":1}\\n'
    """
    return canonical_json(statement).encode("utf-8") + b"\n"


def unsealed(statement: dict[str, Any]) -> dict[str, Any]:
    """``statement`` without the fields sealing adds, for comparing with a rebuilt one."""
    predicate = {k: v for k, v in statement.get("predicate", {}).items() if k not in SEAL_FIELDS}
    return {**statement, "predicate": predicate}


_VALIDATOR = None


def validate(statement: dict[str, Any]) -> None:
    """Check ``statement`` against ``evidence/bundle.schema.json``.

    Raises:
        StoreError: the bundle does not match its schema (a defect of mlpipe or of the store).
    """
    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema

        schema = json.loads(SCHEMA_PATH.read_text())
        _VALIDATOR = jsonschema.Draft202012Validator(schema)
    errors = sorted(_VALIDATOR.iter_errors(statement), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(map(str, first.absolute_path)) or "(top)"
        raise StoreError(f"the evidence bundle does not match its schema at {where}: "
                         f"{first.message}", hint="report this as an mlpipe defect; the bundle "
                                                  "was not sealed")


def load_sealed(digest: str, content: bytes) -> dict[str, Any]:
    """The statement in a sealed bundle's stored bytes, checked against the bundle schema.

    Raises:
        StoreError: the bytes were altered: not JSON, or not a bundle any more.
    """
    hint = "run `mlpipe evidence CANDIDATE --verify`, and restore the bundle from a copy you trust"
    try:
        statement = json.loads(content)
    except ValueError:
        raise StoreError(f"sealed bundle {digest} is no longer valid JSON: it was altered in "
                         f"the store", hint=hint) from None
    try:
        validate(statement)
    except StoreError as err:
        why = err.message.removeprefix("the evidence bundle does not match its schema ")
        raise StoreError(f"sealed bundle {digest} no longer matches the bundle schema "
                         f"({why}): it was altered in the store", hint=hint) from None
    return statement


class NothingSealed(MlpipeError):
    """A command that judges or verifies a bundle (``qualify``, ``--verify``) found none
    sealed: only ``mlpipe evidence``, which shows the bundle it seals, seals the first one
    (MP720; exit 1, a problem with the candidate, not the command line)."""

    exit_code = 1

    def __init__(self, candidate: str, doing: str) -> None:
        self.code = BUNDLE_CHAIN_MISSING.code
        super().__init__(
            f"[{BUNDLE_CHAIN_MISSING.code} {BUNDLE_CHAIN_MISSING.name}] candidate {candidate} "
            f"has no sealed bundle to {doing}: none was ever sealed (nobody has read its "
            f"evidence), or its bundles were removed from the store",
            hint=f"run `mlpipe evidence {candidate}`: it seals the first bundle from the store "
                 f"as it is now and shows it; read it, then {doing} that one (if a reviewer "
                 f"saw its evidence before, restore its bundles from a copy you trust instead)")


@dataclass(slots=True)
class Sealed:
    """A sealed bundle: its digest, exact bytes, and whether this call sealed it."""

    digest: str
    content: bytes
    new: bool
    previous: str | None = None
    changes: list[str] = field(default_factory=list)

    @property
    def statement(self) -> dict[str, Any]:
        return json.loads(self.content)


def chain(s: Session, candidate_id: str) -> list[m.BundleRow]:
    """The candidate's sealed bundles, oldest first."""
    return list(s.scalars(select(m.BundleRow).where(m.BundleRow.candidate_id == candidate_id)
                          .order_by(m.BundleRow.sealed_at, m.BundleRow.digest)))


def latest(s: Session, candidate_id: str) -> m.BundleRow | None:
    """The candidate's newest sealed bundle, or None."""
    return s.scalars(select(m.BundleRow).where(m.BundleRow.candidate_id == candidate_id)
                     .order_by(m.BundleRow.sealed_at.desc(), m.BundleRow.digest.desc())
                     .limit(1)).first()


#: ``seal(signer=CONFIGURED)``: the key configuration names (``signing.configured_signer``).
CONFIGURED: Any = object()


def seal(s: Session, candidate: m.CandidateRow, *, now: datetime | None = None,
         signer: Any = CONFIGURED) -> Sealed:
    """Build the candidate's bundle and seal it, unless the newest sealed one says the same.

    A bundle whose content differs from the newest sealed one is sealed anew, recording that
    one's digest as ``previous_bundle``; ``changes`` lists what differs.

    Args:
        s: an open session (the caller commits).
        candidate: the candidate row.
        now: the sealing time (tests pin it).
        signer: the key that signs the new bundle's DSSE envelope (``keys.Signer``; None: left
            unsigned); by default the configured one.

    Returns:
        The sealed bundle.

    Example:
        >>> sealed = seal(s, find_candidate(s, "c-3f9a"))
        >>> sealed.digest.startswith("sha256:")
        True
    """

    # One bundle per state of the store, however many seal at once: the candidate's row is
    # locked (PostgreSQL: FOR UPDATE; SQLite: every session holds the write lock, BEGIN
    # IMMEDIATE), so a second sealer waits, then finds the first one's bundle and keeps it.
    s.execute(select(m.CandidateRow.id).where(m.CandidateRow.id == candidate.id)
              .with_for_update())
    before = latest(s, candidate.id)

    key = configured_signer() if signer is CONFIGURED else signer
    if signer is CONFIGURED and key is not None:
        sign_model_once(s, candidate, key, now or utcnow())
    statement = build(s, candidate)
    changes: list[str] = []
    if before is not None:
        # A bundle altered in the store is refused, not silently sealed over.
        old = unsealed(load_sealed(before.digest, bytes(before.content)))
        if old is not None and canonical(old) == canonical(statement):
            return Sealed(before.digest, before.content, False, before.previous_digest)
        changes = differences(old or {}, statement)
    statement["predicate"]["previous_bundle"] = None if before is None else before.digest
    statement["predicate"]["sealed_at"] = (now or utcnow()).isoformat()
    validate(statement)
    content = canonical(statement)
    digest = digest_bytes(content)
    sealed_at = now or utcnow()
    s.add(m.BundleRow(digest=digest, candidate_id=candidate.id,
                      previous_digest=None if before is None else before.digest,
                      sealed_at=sealed_at, content=content))
    s.flush()
    if key is not None:
        sign_bundle(s, digest, content, key, sealed_at)
        s.flush()
    return Sealed(digest, content, True, None if before is None else before.digest, changes)


def sealed_bundle(url: str, ref: str, *, rebuild: bool = False,
                  first: str | None = None) -> Sealed:
    """The bundle ``mlpipe evidence REF`` shows.

    Without ``rebuild``, the newest sealed bundle is read straight from a SQLite store when it
    can be (``fastpath``). Otherwise the bundle is built from the store and sealed anew when it
    differs from the newest sealed one (``changes`` says what) or when none is sealed yet.

    One rule for every command: only ``mlpipe evidence`` (which shows what it seals) seals a
    candidate's first bundle; a command that judges or verifies one passes ``first`` (what it
    was to do, ``"qualify"``) and is refused when none is sealed.

    Args:
        url: the store URL (``mlpipe.evidence.locate().url``).
        ref: a candidate id or an unambiguous prefix of one.
        rebuild: build from the store even when a sealed bundle could be read directly.
        first: seal nothing; raise NothingSealed, saying the caller could not ``first``.

    Raises:
        UsageError: no candidate, or more than one, matches ``ref``.
        StoreError: the store cannot be opened, or a sealed bundle was altered in it.
        NothingSealed: ``first`` was given and no bundle of the candidate is sealed.

    Example:
        >>> sealed_bundle(locate().url, "c-3f9a").digest[:7]
        'sha256:'
    """

    if not rebuild:
        found = read_sealed(url, ref)
        if found is not None:
            return Sealed(found[0], found[1], False)
    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            candidate = find_candidate(s, ref)
            if first is not None and not rebuild:
                kept = sealed_or_none(s, candidate)
                if kept is None:
                    raise NothingSealed(candidate.id, first)
                return kept
            return seal(s, candidate)
    finally:
        store.close()


def sealed_or_none(s: Session, candidate: m.CandidateRow) -> Sealed | None:
    """The newest sealed bundle as it is stored, without building anything."""
    row = latest(s, candidate.id)
    if row is None:
        return None
    return Sealed(row.digest, bytes(row.content), False, row.previous_digest)


__all__ = [
    "CONFIGURED",
    "SCHEMA_PATH",
    "NothingSealed",
    "Sealed",
    "canonical",
    "chain",
    "latest",
    "seal",
    "sealed_bundle",
    "sealed_or_none",
    "unsealed",
    "validate",
]
