"""Verifying a sealed bundle: its bytes against its digest and chain, the store against its
predicate, and every file it names against its recorded digest (MP711-MP714).

Reads and hashes only; reports every mismatch and never raises for a missing file.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from mlpipe.codes import (
    ARTIFACT_CHANGED,
    ARTIFACT_MISSING,
    BUNDLE_BYTES_CHANGED,
    EVIDENCE_CHANGED_IN_STORE,
)
from mlpipe.diagnostics import Code
from mlpipe.digests import digest_bytes, sha256_file
from mlpipe.digests.snapshot import snapshot
from mlpipe.errors import StoreError
from mlpipe.evidence import models as m
from mlpipe.evidence.bundle import build
from mlpipe.evidence.compare import differences
from mlpipe.evidence.seal import chain, load_sealed, unsealed


@dataclass(slots=True)
class Verification:
    """What ``--verify`` found: ``ok`` when nothing differs."""

    digest: str
    findings: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    bundles: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {"bundle": self.digest, "ok": self.ok, "bundles_checked": self.bundles,
                "files_hashed": self.files, "bytes_hashed": self.bytes,
                "mismatches": self.findings}


def _mismatch(code: Code, message: str, hint: str) -> dict[str, Any]:
    return {"code": code.code, "name": code.name, "message": message, "hint": hint}


def _check_chain(rows: list[m.BundleRow], out: Verification) -> dict[str, Any] | None:
    """Re-hash every sealed bundle of the candidate; return the newest one's statement."""
    previous = None
    statement = None
    for row in rows:
        content = bytes(row.content)
        out.bundles += 1
        if digest_bytes(content) != row.digest:
            out.findings.append(_mismatch(
                BUNDLE_BYTES_CHANGED, f"sealed bundle {row.digest} now hashes to "
                f"{digest_bytes(content)}: its stored bytes were changed",
                "restore the bundle from a copy you trust (a reviewer's saved JSON)"))
        try:
            statement = load_sealed(row.digest, content)
        except StoreError as err:
            statement = None
            out.findings.append(_mismatch(BUNDLE_BYTES_CHANGED, err.message, err.hint or ""))
            continue
        recorded = (statement.get("predicate") or {}).get("previous_bundle")
        if recorded != previous or row.previous_digest != previous:
            out.findings.append(_mismatch(
                BUNDLE_BYTES_CHANGED, f"sealed bundle {row.digest} names {recorded} as the bundle "
                f"before it, but the chain has {previous}", "a bundle was removed or replaced "
                "in the store; restore it"))
        previous = row.digest
    return statement


def _hash_path(path: str, digest: str, what: str, out: Verification) -> None:
    if not os.path.exists(path):
        out.findings.append(_mismatch(ARTIFACT_MISSING, f"{what} is missing: nothing at {path}",
                                      "restore it from a backup; its digest is " + digest))
        return
    try:
        snap = snapshot(path)
    except OSError as exc:
        out.findings.append(_mismatch(ARTIFACT_MISSING, f"{what} at {path} cannot be read: "
                                      f"{exc.strerror or exc}", "fix its permissions"))
        return
    out.files += snap.file_count
    out.bytes += snap.size
    if snap.digest != digest:
        out.findings.append(_mismatch(ARTIFACT_CHANGED, f"{what} at {path} changed: recorded "
                                      f"{digest}, now {snap.digest}",
                                      "the bundle no longer describes these bytes; restore "
                                      "them or re-run the pipeline for a new candidate"))


def _check_subject(statement: dict[str, Any], out: Verification) -> None:
    p = statement["predicate"]
    model = next((a for a in p["artifacts"] if a["digest"] == p["candidate"]["model"]), None)
    if model is None:
        return
    is_dir = model["file_count"] != 1 or os.path.isdir(model["location"])
    for entry in statement["subject"]:
        rel = entry["name"].split("/", 1)[1] if "/" in entry["name"] else entry["name"]
        path = os.path.join(model["location"], rel) if is_dir else model["location"]
        try:
            now = sha256_file(path)
        except FileNotFoundError:
            out.findings.append(_mismatch(ARTIFACT_MISSING, f"model file {entry['name']} is "
                                          f"missing: nothing at {path}", "restore the model"))
            continue
        except OSError as exc:
            out.findings.append(_mismatch(ARTIFACT_MISSING, f"model file {entry['name']} at "
                                          f"{path} cannot be read: {exc}", "fix permissions"))
            continue
        if now != entry["digest"].get("sha256"):
            out.findings.append(_mismatch(
                ARTIFACT_CHANGED, f"model file {entry['name']} changed: sealed sha256 "
                f"{entry['digest'].get('sha256')}, now {now}",
                "the bundle no longer describes this model; restore it"))


def verify(s: Session, candidate: m.CandidateRow) -> Verification:
    """Verify the candidate's sealed bundles against their bytes, the store and the files.

    Args:
        s: an open session.
        candidate: a candidate with at least one sealed bundle.

    Returns:
        Every mismatch found (``ok`` when none).

    Example:
        >>> verify(s, find_candidate(s, "c-3f9a")).ok
        True
    """
    rows = chain(s, candidate.id)
    out = Verification(rows[-1].digest if rows else "(none)")
    statement = _check_chain(rows, out)
    if statement is None:
        return out
    rebuilt = build(s, candidate, hash_model=False)
    sealed = unsealed(statement)
    sealed["subject"] = []
    for line in differences(sealed, rebuilt):
        out.findings.append(_mismatch(EVIDENCE_CHANGED_IN_STORE,
                                      f"the store no longer matches the sealed "
                                      f"bundle: {line} (sealed -> store now)",
                                      "find who changed the store; the sealed bundle is the "
                                      "record the reviewer saw"))
    _check_subject(statement, out)
    p = statement["predicate"]
    seen: set[tuple[str, str]] = set()
    for snap in p["snapshots"]:
        seen.add((snap["reference"], snap["digest"]))
        _hash_path(snap["reference"], snap["digest"], f"data snapshot {snap['input']!r}", out)
    for art in p["artifacts"]:
        if (art["location"], art["digest"]) in seen:
            continue
        seen.add((art["location"], art["digest"]))
        producers = [f"{st['step']}.{o['port']}" for st in p["steps"] for o in st["outputs"]
                     if o["digest"] == art["digest"]]
        what = (f"artifact {producers[0]}" if producers else f"artifact {art['digest'][:19]}")
        _hash_path(art["location"], art["digest"], what, out)
    return out


def verify_bundle(url: str, ref: str) -> Verification:
    """``mlpipe evidence REF --verify``: verify the candidate's sealed bundles, sealing the first
    one from the store when none is sealed yet.

    Raises:
        UsageError: no candidate, or more than one, matches ``ref``.
        StoreError: the store cannot be opened.
    """
    from mlpipe.evidence.bundle import find_candidate
    from mlpipe.evidence.seal import seal, sealed_or_none
    from mlpipe.evidence.store import Store

    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            found = find_candidate(s, ref)
            if sealed_or_none(s, found) is None:
                seal(s, found)
            return verify(s, found)
    finally:
        store.close()


__all__ = ["Verification", "verify", "verify_bundle"]
