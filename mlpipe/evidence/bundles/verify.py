"""Verifying a sealed bundle: its bytes against its digest and chain, the store against its
predicate, and every file it names against its recorded digest (MP711-MP714); a candidate
without a chain is a finding (MP720), never sealed here; a decision citing a bundle outside the
chain is MP737, and with a trust policy every signature is judged (``trust``, MP730-MP736).

Reads and hashes only; reports every mismatch and never raises for a missing file. What lives
only in remote storage (an Azure ML output) is listed as not re-hashed (MP661) unless the
caller hands in a ``fetch`` that brings its bytes here, which are then re-hashed like the rest;
this module knows no backend.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from mlpipe.codes import (
    ARTIFACT_CHANGED,
    ARTIFACT_MISSING,
    ARTIFACT_NOT_REHASHED,
    BUNDLE_BYTES_CHANGED,
    BUNDLE_CHAIN_MISSING,
    DECISION_CITES_UNKNOWN_BUNDLE,
    DECISION_ON_STALE_BUNDLE,
    EVIDENCE_CHANGED_IN_STORE,
    MODEL_SIGNATURE_INVALID,
    MODEL_SIGNER_UNTRUSTED,
)
from mlpipe.diagnostics import Code
from mlpipe.digests import digest_bytes, is_reference, sha256_file
from mlpipe.digests.snapshot import snapshot
from mlpipe.errors import StoreError
from mlpipe.evidence.bundles.bundle import build, find_candidate
from mlpipe.evidence.bundles.compare import differences
from mlpipe.evidence.bundles.seal import chain, load_sealed, unsealed
from mlpipe.evidence.signatures.modelsig import check, signature_keyid
from mlpipe.evidence.signatures.signing import (
    bundle_envelopes,
    decisions_of,
    model_signature,
    submitters,
)
from mlpipe.evidence.signatures.trust import SEAL, Trust, judge_bundles, judge_decisions
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.located import remote
from mlpipe.evidence.storage.roots import ArtifactRoots, configured, input_key
from mlpipe.evidence.storage.store import Store

#: ``fetch(statement, artifact)``: the local path of a remote artifact's bytes, brought here
#: (None when its storage has nothing there); raises for what stops every download
#: (no credentials, no network).
Fetch = Callable[[dict[str, Any], dict[str, Any]], "str | None"]


@dataclass(slots=True)
class Verification:
    """What ``--verify`` found: ``ok`` when nothing differs; ``complete`` when, besides, every
    artifact and snapshot the bundle names was re-hashed (none ``not_rehashed``)."""

    digest: str
    findings: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    bundles: int = 0
    not_rehashed: list[dict[str, Any]] = field(default_factory=list)
    fetched: int = 0
    trust: dict[str, str] | None = None
    #: the model's files as re-hashed here (relative name -> sha256), for its signature
    model_files: dict[str, str] | None = None

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def complete(self) -> bool:
        return not self.not_rehashed

    def to_dict(self) -> dict[str, Any]:
        return {"bundle": self.digest, "ok": self.ok, "bundles_checked": self.bundles,
                "files_hashed": self.files, "bytes_hashed": self.bytes,
                "mismatches": self.findings, "complete": self.complete,
                "not_rehashed": self.not_rehashed, "fetched": self.fetched,
                "trust": self.trust}


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


def _hash_path(path: str, digest: str, what: str, out: Verification,
               where: str | None = None) -> None:
    """Re-hash ``path`` against ``digest``; ``where`` names it in messages when ``path`` is a
    temporary copy (a download)."""
    where = where or f"at {path}"
    if not os.path.exists(path):
        out.findings.append(_mismatch(ARTIFACT_MISSING, f"{what} is missing: nothing {where}",
                                      "restore it from a backup; its digest is " + digest))
        return
    try:
        snap = snapshot(path)
    except OSError as exc:
        out.findings.append(_mismatch(ARTIFACT_MISSING, f"{what} {where} cannot be read: "
                                      f"{exc.strerror or exc}", "fix its permissions"))
        return
    out.files += snap.file_count
    out.bytes += snap.size
    if snap.digest != digest:
        out.findings.append(_mismatch(ARTIFACT_CHANGED, f"{what} {where} changed: recorded "
                                      f"{digest}, now {snap.digest}",
                                      "the bundle no longer describes these bytes; restore "
                                      "them or re-run the pipeline for a new candidate"))


def _hash_in_place(roots: ArtifactRoots, path: str, digest: str, what: str,
                   out: Verification) -> None:
    """Re-hash an input read in place at ``path``; where that path no longer holds it (another
    home's folder, moved since), its snapshot published by content (``input_key``) in this
    home's root or the shared one stands for it, verified by its digest."""
    if not roots.intact(Path(path), digest):
        found = roots.resolve(input_key(digest), digest)
        if found is not None:
            _hash_path(str(found), digest, what, out,
                       where=f"(published by content as {input_key(digest)})")
            return
    _hash_path(path, digest, what, out)


def _check_keyed(roots: ArtifactRoots, key: str, digest: str, what: str,
                 out: Verification) -> None:
    """An artifact in an artifact root: re-hashed in this home's own root, fetched (verified)
    from the shared root first when the own root lacks it. A damaged own copy is reported,
    not silently replaced."""
    own = roots.path_of(key)
    if not os.path.lexists(own) and roots.resolve(key, digest) is None:
        out.findings.append(_mismatch(ARTIFACT_MISSING, f"{what} is missing: nothing at "
                                      f"{roots.where(key)}",
                                      "restore it from a backup, or configure the shared "
                                      "artifact root that holds it (docs/teams.md); its digest "
                                      "is " + digest))
        return
    _hash_path(str(own), digest, what, out)


def _storage(location: str) -> str:
    """What holds a remote location, for a reader: ``azureml://...`` -> ``Azure ML``."""
    scheme = location.split("://", 1)[0].lower()
    return {"azureml": "Azure ML", "https": "remote storage", "wasbs": "Azure Blob Storage",
            "abfss": "Azure Data Lake"}.get(scheme, f"{scheme}:// storage")


def _not_rehashed(out: Verification, what: str, digest: str, location: str, why: str,
                  hint: str) -> None:
    out.not_rehashed.append({"code": ARTIFACT_NOT_REHASHED.code,
                             "name": ARTIFACT_NOT_REHASHED.name, "artifact": what,
                             "digest": digest, "location": location,
                             "message": f"{what} was not re-hashed: {why}", "hint": hint})


def _check_remote(statement: dict[str, Any], art: dict[str, Any], what: str, out: Verification,
                  fetch: Fetch | None) -> str | None:
    """An artifact that lives only in remote storage: re-hashed from a download when ``fetch``
    is given (its local path returned), else listed as not re-hashed."""
    held = _storage(art["location"])
    if fetch is None:
        _not_rehashed(out, what, art["digest"], art["location"],
                      f"it lives only on {held} ({art['location']}); its digest was recorded "
                      f"by the step that wrote it, and no copy is here",
                      "run `mlpipe evidence CANDIDATE --verify --fetch` to download it and "
                      "re-hash it against its recorded digest")
        return None
    path = fetch(statement, art)
    out.fetched += path is not None
    if path is None:
        out.findings.append(_mismatch(
            ARTIFACT_MISSING, f"{what} is missing: {held} has nothing at {art['location']}",
            "the output was deleted from its datastore; restore it from a backup (its digest "
            "is " + art["digest"] + ")"))
        return None
    _hash_path(path, art["digest"], what, out, where=f"downloaded from {art['location']}")
    return path


def _check_subject(statement: dict[str, Any], out: Verification,
                   fetched: dict[str, str], roots: ArtifactRoots) -> None:
    p = statement["predicate"]
    model = next((a for a in p["artifacts"] if a["digest"] == p["candidate"]["model"]), None)
    if model is None:
        return
    location = fetched.get(model["digest"], model["location"])
    if location == model["location"] and model.get("remote", remote(location)):
        return  # only on remote storage and not downloaded: listed as not re-hashed
    if location == model["location"]:
        key = roots.key_for(location, model["digest"])
        if key is not None:
            if not os.path.lexists(roots.path_of(key)):
                return  # reported missing with the artifacts
            location = str(roots.path_of(key))
    is_dir = model["file_count"] != 1 or os.path.isdir(location)
    for entry in statement["subject"]:
        rel = entry["name"].split("/", 1)[1] if "/" in entry["name"] else entry["name"]
        path = os.path.join(location, rel) if is_dir else location
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
        out.model_files = {**(out.model_files or {}), rel: now}
        if now != entry["digest"].get("sha256"):
            out.findings.append(_mismatch(
                ARTIFACT_CHANGED, f"model file {entry['name']} changed: sealed sha256 "
                f"{entry['digest'].get('sha256')}, now {now}",
                "the bundle no longer describes this model; restore it"))


def _check_decisions(candidate: m.CandidateRow, rows: list[m.BundleRow],
                     decisions: list[dict[str, Any]], statement: dict[str, Any] | None,
                     out: Verification) -> None:
    """Every decision, in the store (``decisions``: ``signing.decisions_of``) or in the newest
    bundle, cites a bundle of the chain: one that does not was made on evidence the chain no
    longer holds (resealed after it)."""
    in_chain = {r.digest for r in rows}
    cited = [(d["verdict"], d["bundle"], "recorded in the store") for d in decisions]
    review = ((statement or {}).get("predicate") or {}).get("review") or {}
    cited += [(d.get("verdict"), d.get("bundle"), "named by the newest bundle")
              for d in review.get("decisions") or [] if isinstance(d, dict)]
    by_bundle: dict[str, list[dict[str, Any]]] = {}
    for d in decisions:
        by_bundle.setdefault(d["bundle"], []).append(d)
    for digest, same in by_bundle.items():
        if len(same) > 1:
            who = ", ".join(f"{d['verdict']} by {d['by']}" for d in same)
            out.findings.append(_mismatch(
                DECISION_ON_STALE_BUNDLE, f"{len(same)} decisions recorded in the store cite "
                f"bundle {digest} ({who}): the first one's seal superseded it, so the others "
                f"decided on stale evidence",
                "the store let reviewers race (recorded before schema 0012_i37_races); "
                "decide again on the newest bundle, which supersedes them"))
    seen = set()
    for verdict, digest, where in cited:
        if digest in in_chain or (verdict, digest) in seen:
            continue
        seen.add((verdict, digest))
        out.findings.append(_mismatch(
            DECISION_CITES_UNKNOWN_BUNDLE, f"the {verdict} decision ({where}) cites bundle "
            f"{digest}, which is not in candidate {candidate.id}'s sealed chain: the chain "
            f"was resealed after the decision", "the decision was made on evidence the chain no "
            "longer holds; restore the bundles from a copy you trust, or decide again"))


def _check_trust(s: Session, candidate: m.CandidateRow, rows: list[m.BundleRow],
                 decisions: list[dict[str, Any]], trust: Trust, out: Verification) -> None:
    out.trust = trust.cited()
    envelopes = bundle_envelopes(s, [r.digest for r in rows])
    out.findings += judge_bundles(trust, [(r.digest, bytes(r.content), envelopes.get(r.digest))
                                          for r in rows])
    out.findings += judge_decisions(trust, decisions, submitters(s, candidate.id))


def verify(s: Session, candidate: m.CandidateRow, *, fetch: Fetch | None = None,
           roots: ArtifactRoots | None = None, trust: Trust | None = None) -> Verification:
    """Verify the candidate's sealed bundles against their bytes, the store and the files.

    Args:
        s: an open session.
        candidate: a candidate with at least one sealed bundle.
        fetch: brings an artifact that lives only in remote storage here (``Fetch``); without
            it such artifacts are listed as not re-hashed.
        roots: where artifacts in a root are re-hashed: this home's own root, fetching what
            it lacks from the shared root (default: the configured roots).
        trust: check every signature of the chain and of the decisions against this trust
            policy (MP730-MP736).

    Returns:
        Every mismatch found (``ok`` when none).

    Example:
        >>> verify(s, find_candidate(s, "c-3f9a")).ok
        True
    """
    rows = chain(s, candidate.id)
    out = Verification(rows[-1].digest if rows else "(none)")
    if not rows:
        _chain_missing(s, candidate, out)
        return out

    statement = _check_chain(rows, out)
    decisions = decisions_of(s, candidate.id)   # read once: cited, and judged under trust
    _check_decisions(candidate, rows, decisions, statement, out)
    if trust is not None:
        _check_trust(s, candidate, rows, decisions, trust, out)
    if statement is None:
        return out
    roots = roots if roots is not None else configured()
    _check_store(s, candidate, statement, roots, out)
    fetched = _check_files(statement, roots, out, fetch)
    _check_subject(statement, out, fetched, roots)
    if trust is not None:
        _check_model_signature(s, candidate, statement, trust, out)
    return out


def _chain_missing(s: Session, candidate: m.CandidateRow, out: Verification) -> None:
    """A candidate with no sealed bundle: MP720, saying whether decisions cited one."""
    cited = _cited(s, candidate.id)
    why = (f"its bundles were removed from the store (decisions cite "
           f"{', '.join(cited[:2])}{' ...' if len(cited) > 2 else ''})" if cited else
           "it was never sealed, or its bundles were removed from the store")
    out.findings.append(_mismatch(
        BUNDLE_CHAIN_MISSING, f"candidate {candidate.id} has no sealed bundle to verify "
        f"against: {why}",
        f"if a reviewer saw its evidence, restore the bundles from a copy you trust (their "
        f"saved --format json output); if it was never shown, `mlpipe evidence "
        f"{candidate.id}` seals its first bundle from the store as it is now"))


def _check_store(s: Session, candidate: m.CandidateRow, statement: dict[str, Any],
                 roots: ArtifactRoots, out: Verification) -> None:
    """The bundle rebuilt from the store as it is now, against the sealed one (MP713)."""
    rebuilt = build(s, candidate, hash_model=False, roots=roots)
    sealed = unsealed(statement)
    sealed["subject"] = []
    later_productions(sealed, rebuilt)
    _before_review(sealed, rebuilt)
    for line in differences(sealed, rebuilt):
        out.findings.append(_mismatch(EVIDENCE_CHANGED_IN_STORE,
                                      f"the store no longer matches the sealed "
                                      f"bundle: {line} (sealed -> store now)",
                                      "find who changed the store; the sealed bundle is the "
                                      "record the reviewer saw"))


def _check_files(statement: dict[str, Any], roots: ArtifactRoots, out: Verification,
                 fetch: Fetch | None) -> dict[str, str]:
    """Every data snapshot and artifact the sealed bundle names, re-hashed where it lives;
    returns the digests of what was fetched from remote storage, by their sealed digest."""
    p = statement["predicate"]
    seen: set[tuple[str, str]] = set()
    for snap in p["snapshots"]:
        seen.add((snap["reference"], snap["digest"]))
        what = f"data snapshot {snap['input']!r}"
        if is_reference(snap["digest"]) or remote(snap["reference"]):
            _not_rehashed(out, what, snap["digest"], snap["reference"],
                          f"{snap['reference']} is a reference to data in a workspace; no "
                          f"content digest of it was recorded", "pass the data by a local "
                          "path to record its content, or pin the data asset version")
            continue
        _hash_in_place(roots, snap["reference"], snap["digest"], what, out)
    fetched: dict[str, str] = {}
    for art in p["artifacts"]:
        if (art["location"], art["digest"]) in seen:
            continue
        seen.add((art["location"], art["digest"]))
        producers = [f"{st['step']}.{o['port']}" for st in p["steps"] for o in st["outputs"]
                     if o["digest"] == art["digest"]]
        what = (f"artifact {producers[0]}" if producers else f"artifact {art['digest'][:19]}")
        if is_reference(art["digest"]):
            _not_rehashed(out, what, art["digest"], art["location"],
                          f"only its location ({art['location']}) was recorded, no content "
                          f"digest to re-hash it against (finding MP660 for a candidate's model "
                          f"or report)", "produce it with an mlpipe function component, whose "
                          "step runtime records its outputs' digests, and sync again")
        elif art.get("remote", remote(art["location"])):
            found = _check_remote(statement, art, what, out, fetch)
            if found is not None:
                fetched[art["digest"]] = found
        elif (key := roots.key_for(art["location"], art["digest"])) is not None:
            _check_keyed(roots, key, art["digest"], what, out)
        else:
            _hash_in_place(roots, art["location"], art["digest"], what, out)
    return fetched


def _check_model_signature(s: Session, candidate: m.CandidateRow, statement: dict[str, Any],
                           trust: Trust, out: Verification) -> None:
    """The model signature the sealed bundle names: stored, by a key that may seal, and its
    signed manifest the model's files as re-hashed here (MP738, MP739)."""

    named = statement["predicate"].get("model_signature")
    if named is None:
        return
    row = model_signature(s, candidate.id)
    what = f"the model signature {named['digest'][:19]}"
    hint = ("the model or its signature was changed after signing: restore the model from a "
            "copy you trust, or re-run the pipeline for a new candidate")
    if row is None:
        out.findings.append(_mismatch(MODEL_SIGNATURE_INVALID, f"{what} the bundle names is no "
                                      f"longer in the store", hint))
        return
    keyid = signature_keyid(bytes(row.signature)) or ""
    ident = trust.identities.get(keyid)
    if ident is None or SEAL not in ident.may:
        who = "a key the trust policy does not name" if ident is None else repr(ident.name)
        out.findings.append(_mismatch(MODEL_SIGNER_UNTRUSTED, f"{what} is signed by {who} "
                                      f"({keyid[:16] or 'no key id'}), which may not seal",
                                      "the model was re-signed by someone else: find who"))
        return
    why = check(bytes(row.signature), ident.public_pem, out.model_files)
    if why is None and digest_bytes(bytes(row.signature)) != named["digest"]:
        why = f"the store holds another signature ({digest_bytes(bytes(row.signature))[:19]})"
    if why is not None:
        out.findings.append(_mismatch(MODEL_SIGNATURE_INVALID, f"{what} by {ident.name!r} "
                                      f"does not hold: {why}", hint))


def _cited(s: Session, candidate_id: str) -> list[str]:
    """The bundle digests the candidate's recorded decisions cite, oldest first."""
    from sqlalchemy import select

    return list(dict.fromkeys(s.scalars(
        select(m.Decision.bundle_digest).where(m.Decision.candidate_id == candidate_id)
        .order_by(m.Decision.decided_at, m.Decision.id))))


def later_productions(sealed: dict[str, Any], rebuilt: dict[str, Any]) -> list[Any]:
    """Drop from ``rebuilt`` the runs that reproduced the candidate after ``sealed`` was sealed
    (its productions are a prefix of the store's), and return them: a later re-run of the same
    bytes adds to the record without falsifying the sealed one. Anything else that differs in
    the list (a production removed, changed or reordered) is left to be reported."""
    before = sealed.get("predicate", {}).get("productions")
    now = rebuilt.get("predicate", {}).get("productions")
    if not isinstance(now, list) or not isinstance(before, (list, type(None))):
        return []
    before = before or []
    # a bundle sealed before productions carried their pipeline and findings lists them
    # without: the same production, read as it was sealed
    kept = [{k: v for k, v in n.items() if k in b}
            if isinstance(n, dict) and isinstance(b, dict) and "findings" not in b else n
            for n, b in zip(now, before)]
    if kept != before:
        return []
    if "productions" in sealed.get("predicate", {}):
        rebuilt["predicate"]["productions"] = kept
    else:   # sealed before productions were recorded
        rebuilt["predicate"].pop("productions")
    return now[len(before):]


def _before_review(sealed: dict[str, Any], rebuilt: dict[str, Any]) -> None:
    """A bundle sealed before decisions were recorded has no ``review``: an empty one (no
    decision since) is no difference."""
    review = rebuilt.get("predicate", {}).get("review")
    if "review" not in sealed.get("predicate", {}) and review == {"status": "unreviewed",
                                                                  "decisions": []}:
        rebuilt["predicate"].pop("review")


def verify_bundle(url: str, ref: str, *, fetch: Fetch | None = None,
                  trust: Trust | None = None) -> Verification:
    """``mlpipe evidence REF --verify [--trust FILE]``: verify the candidate's sealed bundles
    (``fetch``, ``trust``: see ``verify``). Never seals: a candidate without a sealed bundle is
    finding MP720 (``bundle-chain-missing``), since a store whose bundles were removed and whose
    rows were edited would otherwise be sealed as it is and verified against itself; the one
    rule of every command (``seal.sealed_bundle``, docs/review.md): only ``mlpipe evidence``
    seals a first bundle.

    Raises:
        UsageError: no candidate, or more than one, matches ``ref``.
        StoreError: the store cannot be opened.
    """

    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            if store.engine.dialect.name == "postgresql":
                # one snapshot for the chain and the store it is compared with: a decision
                # committed between the two reads is not a store that changed (SQLite's
                # sessions hold the write lock throughout)
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            return verify(s, find_candidate(s, ref), fetch=fetch, trust=trust)
    finally:
        store.close()


__all__ = ["Fetch", "Verification", "verify", "verify_bundle"]
