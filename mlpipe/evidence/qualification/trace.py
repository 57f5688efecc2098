"""Tracing a registered model back to its evidence (``mlpipe trace MODEL``): hash the bytes the
registry hands out, find the candidate that has them, and show its bundle, decision and
promotion, verifying the bundle. The model is the files its bundle sealed: files a registry or
a loader adds beside them (MLflow's ``registered_model_meta``) are listed, not counted.

Talks to no registry itself: the caller passes the function that downloads the model (the
MLflow registry's ``fetch``, or the Azure backend's), so this module knows no backend.
"""
from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from mlpipe.codes import (
    PROMOTION_UNRECORDED,
    REGISTERED_MODEL_REPLACED,
    REGISTERED_MODEL_UNKNOWN,
)
from mlpipe.evidence.qualification.promotion import TAG_PREFIX


@dataclass(slots=True)
class Fetched:
    """A registered model version as downloaded: where from, its tags, the folder of its files."""

    registry: str
    target: str
    name: str
    version: str
    uri: str
    tags: dict[str, str]
    folder: Path


#: Downloads the registered model a reference names into a folder.
Fetch = Callable[[str, Path], Fetched]


@dataclass(slots=True)
class Traced:
    """What a registered model traces back to. ``problems``: (code, message), empty when the
    registry's bytes are a candidate's and the promotion recorded them."""

    fetched: Fetched
    digest: str
    candidate: str | None = None
    bundle: str | None = None
    decision: dict[str, Any] | None = None
    promotion: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: Files of the registered version that the candidate's bundle did not seal (added by the
    #: registry or a loader): listed, not part of the model's bytes.
    extra: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.verification and self.verification["ok"])

    def to_dict(self) -> dict[str, Any]:
        f = self.fetched
        return {"model": {"registry": f.registry, "target": f.target, "name": f.name,
                          "version": f.version, "uri": f.uri, "tags": f.tags,
                          "digest": self.digest},
                "candidate": self.candidate, "bundle": self.bundle, "decision": self.decision,
                "promotion": self.promotion, "verification": self.verification,
                "problems": [{"code": c, "message": msg} for c, msg in self.problems],
                "extra_files": self.extra, "ok": self.ok}


def _sealed_files(s: Any, candidate: str) -> dict[str, str] | None:
    """``{relative path: sha256 hex}`` of the model files the candidate's newest sealed bundle
    names (its in-toto subject), or None when it names none (no bundle, or the files were
    unknown when it was sealed) or cannot be read (verification reports that)."""
    from mlpipe.errors import StoreError
    from mlpipe.evidence.bundles.seal import latest, load_sealed

    row = latest(s, candidate)
    if row is None:
        return None
    try:
        subject = load_sealed(row.digest, row.content)["subject"]
    except StoreError:
        return None
    return {e["name"].split("/", 1)[-1]: e["digest"]["sha256"] for e in subject} or None


def _by_manifest(held: dict[str, Any], sealed: dict[str, str], model: str
                 ) -> tuple[list[str], list[str], list[str]]:
    """Weigh the registered files ``held`` (``output_digests``) against the sealed manifest:
    ``(changed, missing, extra)`` file names. Nothing changed or missing means the sealed files
    are the model ``model`` (their folder digest, or the one file's digest, is it)."""
    files = {f["name"]: f for f in held["files"]}
    if held["file_count"] == 1 and len(sealed) == 1 and held["files"]:
        files = {next(iter(sealed)): held["files"][0]}   # a one-file model, however named
    changed = sorted(n for n, sha in sealed.items() if n in files and files[n]["sha256"] != sha)
    missing = sorted(n for n in sealed if n not in files)
    extra = sorted(n for n in files if n not in sealed)
    if not changed and not missing:
        from mlpipe.digests import listed_folder_digest

        kept = [files[n] for n in sealed]
        one = len(kept) == 1 and model == f"blake3:{kept[0]['blake3']}"
        if not one and listed_folder_digest(kept) != model:
            changed = sorted(sealed)   # the same sha256 per file, yet not the model's manifest
    return changed, missing, extra


def _weigh(s: Any, out: Traced, held: dict[str, Any], claimed: str | None,
           claimed_model: str | None) -> list[str]:
    """When the registered folder is not the claimed model as a whole, weigh it by the
    manifest the claimed candidate's bundle sealed: the sealed files intact, ``out.digest``
    becomes the model's and the other files are ``out.extra``; else the sealed files changed
    or missing (``["weights.txt changed", ...]``)."""
    if claimed_model in (None, out.digest) or not claimed:
        return []
    sealed = _sealed_files(s, claimed)
    if sealed is None:
        return []
    changed, missing, out.extra = _by_manifest(held, sealed, str(claimed_model))
    found = [f"{n} changed" for n in changed] + [f"{n} missing" for n in missing]
    if not found:   # the sealed files are intact: the rest is the registry's or a loader's
        out.digest = str(claimed_model)
    return found


def _traced_to(s: Any, out: Traced, candidate: str) -> None:
    """The candidate the model traces to, with its latest bundle and its latest decision."""
    from mlpipe.evidence.bundles.bundle import decision_entry
    from mlpipe.evidence.bundles.seal import latest
    from mlpipe.evidence.storage import models as m

    out.candidate = candidate
    newest = latest(s, candidate)
    out.bundle = None if newest is None else newest.digest
    last = s.scalars(select(m.Decision).where(m.Decision.candidate_id == candidate)
                     .order_by(m.Decision.decided_at.desc(), m.Decision.id.desc())).first()
    out.decision = None if last is None else decision_entry(last)


def trace(url: str, ref: str, fetch: Fetch) -> Traced:
    """Download the registered model ``ref`` names, hash it as mlpipe hashes artifacts, and
    find the candidate whose model has these bytes.

    ``problems`` holds MP754 when the registry's bytes are not the model the version's
    promotion registered (its ``mlpipe.model`` tag, or the recorded promotion), MP755 when no
    candidate in the store has them.

    Raises:
        UsageError: the reference names no registered model, or the registry cannot be reached.
        StoreError: the store cannot be opened.

    Example:
        >>> trace(url, "models:/defect@champion", fetch).candidate
        'c-3f9a0c1b22'
    """
    from mlpipe.digests import output_digests
    from mlpipe.evidence.bundles.bundle import promotion_entry
    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.store import Store

    with tempfile.TemporaryDirectory(prefix="mlpipe-trace-") as tmp:
        fetched = fetch(ref, Path(tmp))
        held = output_digests(str(fetched.folder), sys.maxsize)   # every file, read once
    digest = held["digest"]
    out = Traced(fetched, digest)
    claimed_model = fetched.tags.get(TAG_PREFIX + "model")
    claimed = fetched.tags.get(TAG_PREFIX + "candidate")
    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            row = s.scalars(select(m.Promotion).where(
                m.Promotion.registry_kind == fetched.registry, m.Promotion.target == fetched.target,
                m.Promotion.name == fetched.name, m.Promotion.version == fetched.version)).first()
            if row is not None:
                out.promotion = promotion_entry(row)
                claimed_model, claimed = row.model_digest, row.candidate_id
            changed = _weigh(s, out, held, claimed, claimed_model)
            digest = out.digest
            cand = s.scalars(select(m.CandidateRow).join(
                m.Artifact, m.Artifact.id == m.CandidateRow.model_artifact_id)
                .where(m.Artifact.digest == digest)
                .order_by(m.CandidateRow.created_at, m.CandidateRow.id)).first()
            if claimed_model is not None and claimed_model != digest:
                out.problems.append((REGISTERED_MODEL_REPLACED.code, (
                    f"{fetched.uri} holds model bytes {digest}, but it was promoted from "
                    f"{claimed or 'a candidate'} with model {claimed_model}: the registered "
                    f"files were replaced or changed after the promotion"
                    + (f"; of the files its bundle sealed: {', '.join(changed)}"
                       if changed else ""))))
            if cand is None:
                out.problems.append((REGISTERED_MODEL_UNKNOWN.code, (
                    f"no candidate in the evidence store has the model bytes {digest} of "
                    f"{fetched.uri}")))
                traced = claimed if claimed and s.get(m.CandidateRow, claimed) else None
            else:
                traced = cand.id
            if traced is not None:
                _traced_to(s, out, traced)
                if out.promotion is None:   # never another version's promotion in its place
                    out.problems.append((PROMOTION_UNRECORDED.code, (
                        f"the evidence store records no promotion of {fetched.uri}"
                        + (f", though it carries candidate {claimed}'s lineage tags: a "
                           f"`mlpipe promote` stopped after registering it and before "
                           f"recording it" if claimed else
                           ": it was registered outside `mlpipe promote`"))))
    finally:
        store.close()
    if out.candidate is not None:
        from mlpipe.evidence.bundles.verify import verify_bundle

        out.verification = verify_bundle(url, out.candidate).to_dict()
    return out


def render(t: Traced) -> str:
    """The text ``mlpipe trace`` prints."""
    f = t.fetched
    lines = [f"model      {f.uri} ({f.registry}, {f.target})",
             f"  bytes    {t.digest}"]
    if t.extra:
        lines.append(f"  extra    {', '.join(t.extra)} (not sealed with the model: added by "
                     f"the registry or a loader, not part of its bytes)")
    if t.candidate is not None:
        lines.append(f"candidate  {t.candidate}")
        lines.append(f"bundle     {t.bundle or 'none sealed'}")
    if t.decision is not None:
        d = t.decision
        policy = d.get("policy") or {}
        lines.append(f"decision   {d['verdict']} by {d['by']} at {d['decided_at']} citing "
                     f"{d['bundle']}" + (f" (policy {policy['name']} {policy['digest']})"
                                         if policy else ""))
    if t.promotion is not None:
        p = t.promotion
        lines.append(f"promotion  {p['uri']}" + (f"@{p['alias']}" if p["alias"] else "")
                     + f" at {p['target']}, {p['promoted_at']}"
                     + (f" by {p['by']}" if p["by"] else ""))
    if t.verification is not None:
        v = t.verification
        lines.append("verify     " + ("ok: the bundle and the files it names are unchanged"
                                      if v["ok"] else
                                      f"FAILED: {len(v.get('mismatches') or [])} mismatch(es)"
                                      ", see `mlpipe evidence "
                                      f"{t.candidate} --verify`"))
    for code, message in t.problems:
        lines.append(f"error[{code}] {message}")
    lines.append("traced: the registered bytes are the candidate's model" if t.ok else
                 "NOT TRACED: " + ("see the errors above" if t.problems else
                                   "the candidate's bundle does not verify"))
    return "\n".join(lines)


__all__ = ["Fetch", "Fetched", "Traced", "render", "trace"]
