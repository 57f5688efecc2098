"""Promotion's gate and record: whether a candidate may be registered into a model registry
(an accepted decision on its current evidence, meeting the policy it cites), the lineage tags
it carries there, and the promotion recorded in the store and sealed into the next bundle.

Talks to no registry (``mlflowregistry`` and the Azure backend's ``models`` do) and decides
nothing: only a reviewer's recorded decision lets a candidate through.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mlpipe.codes import (
    PROMOTION_OF_REJECTED_CANDIDATE,
    PROMOTION_ON_STALE_DECISION,
    PROMOTION_POLICY_NOT_MET,
    PROMOTION_WITHOUT_DECISION,
)
from mlpipe.diagnostics import CodedRefusal
from mlpipe.digests import digest_of
from mlpipe.errors import StoreError, UsageError
from mlpipe.evidence.bundles.bundle import build, decision_entry, find_candidate
from mlpipe.evidence.bundles.compare import differences
from mlpipe.evidence.bundles.seal import canonical, load_sealed, seal
from mlpipe.evidence.bundles.verify import verify_bundle
from mlpipe.evidence.qualification.claims import Claim, drop
from mlpipe.evidence.qualification.policy import Policy, judge, load_policy
from mlpipe.evidence.signatures.signing import model_signature
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.contention import transact
from mlpipe.evidence.storage.located import model_path
from mlpipe.evidence.storage.store import Store, utcnow

#: Where the lineage tags live in a registry: every key starts with this.
TAG_PREFIX = "mlpipe."
#: Predicate sections a promotion may differ in from the bundle its decision cites: the
#: decisions and promotions recorded since, and what sealing adds.
_AFTER_DECISION = ("review", "promotions", "sealed_at", "previous_bundle")


class PromotionRefused(CodedRefusal):
    """A candidate that may not be promoted (a problem with the candidate's review, not with
    the command line)."""


@dataclass(slots=True)
class Gate:
    """A candidate that passed the gate: the decision and bundle it passed on, and the model."""

    candidate: str
    name: str | None
    model_digest: str
    model_path: str
    cited: str
    decision: dict[str, Any]
    decision_id: int
    decision_digest: str
    policy: Policy
    statement: dict[str, Any]
    tags: dict[str, str] = field(default_factory=dict)


def _decided_view(statement: dict[str, Any]) -> dict[str, Any]:
    predicate = {k: v for k, v in statement["predicate"].items() if k not in _AFTER_DECISION}
    return {**statement, "predicate": predicate}


def promoted_version(versions: Iterable[Any], candidate: str, model: str) -> Any | None:
    """The registered version (MLflow's or Azure ML's) that already holds this candidate's
    model, by the lineage tags promotion wrote: what makes a second promotion the same version.
    The oldest such version when there are several."""
    def number(v: Any) -> int:
        return int(v.version) if str(v.version).isdigit() else 0

    for v in sorted(versions, key=number):
        tags = v.tags or {}
        if tags.get(TAG_PREFIX + "candidate") == candidate and \
                tags.get(TAG_PREFIX + "model") == model:
            return v
    return None


def gate(url: str, ref: str, policy: Policy | None = None) -> Gate:
    """Check that the candidate ``ref`` names may be promoted, and gather what the registry's
    tags say about it.

    A candidate passes when its newest recorded decision accepts it, that decision cites a
    bundle whose evidence (everything but the decisions and promotions recorded since) is still
    what the store and the model's files say, and the decision was judged against a policy that
    the candidate meets: ``policy`` (the decision must cite its digest) or, without it, the
    policy file the decision cites, re-read and re-judged.

    Args:
        url: the store URL.
        ref: a candidate id or an unambiguous prefix of one.
        policy: the policy the promotion requires (default: the one the decision cites).

    Raises:
        UsageError: no such candidate; the model's files are not on this machine.
        PromotionRefused: MP750 no decision, MP751 rejected, MP752 stale, MP753 policy.

    Example:
        >>> gate(url, "c-3f9a").cited
        'sha256:...'
    """

    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            cand = find_candidate(s, ref)
            cid = cand.id
            last, entry = _accepted_decision(s, cid)
            row, decided = _still_current(s, cand, last)
            where = model_path(cand)
            if where is None:
                raise UsageError(f"the model {cand.model.digest} of {cid} is not on this "
                                 f"machine ({cand.model.location}), so its bytes cannot be "
                                 f"registered", hint="fetch the run's outputs first (`mlpipe "
                                                     "sync RUN`), then promote")
            found = Gate(cid, cand.name, cand.model.digest, where, row.digest, entry, last.id,
                         digest_of(entry), _cited_policy(cid, entry, policy), decided)
    finally:
        store.close()
    _judge(url, found)
    found.tags = lineage(found)
    return found


def _accepted_decision(s: Session, cid: str) -> tuple[m.Decision, dict[str, Any]]:
    """The candidate's newest decision and its bundle entry, when it accepts (MP750, MP751)."""

    decisions = list(s.scalars(select(m.Decision).where(m.Decision.candidate_id == cid)
                               .order_by(m.Decision.decided_at, m.Decision.id)))
    if not decisions:
        raise PromotionRefused(
            PROMOTION_WITHOUT_DECISION, f"candidate {cid} has no recorded decision; "
            f"only a candidate a reviewer accepted is promoted",
            hint=f"read `mlpipe evidence {cid}`, then record `mlpipe review {cid} "
                 f"--accept --by NAME --note TEXT --policy FILE`")
    last = decisions[-1]
    entry = decision_entry(last)
    if last.verdict != m.ACCEPTED:
        raise PromotionRefused(
            PROMOTION_OF_REJECTED_CANDIDATE, f"candidate {cid} was rejected by "
            f"{last.reviewer} ({last.decided_at:%Y-%m-%d %H:%M} UTC: {last.note})",
            hint="promote a candidate a reviewer accepted; a rejected one stays "
                 "rejected until a new decision accepts it")
    return last, entry


def _still_current(s: Session, cand: m.CandidateRow, last: m.Decision
                   ) -> tuple[m.BundleRow, dict[str, Any]]:
    """The sealed bundle the accepted decision cites, and its statement, when the store and the
    model's files still say what it says (MP752)."""

    cid = cand.id
    row = s.get(m.BundleRow, last.bundle_digest)
    if row is None:
        raise StoreError(f"the bundle {last.bundle_digest} that {cid}'s decision "
                         f"cites is no longer in the store",
                         hint=f"run `mlpipe evidence {cid} --verify`")
    decided = load_sealed(row.digest, bytes(row.content))
    stale_hint = (f"run `mlpipe evidence {cid} --rebuild`, read the bundle it seals, "
                  f"and record a new decision on it (`mlpipe review {cid}`)")
    try:
        now = build(s, cand)
    except UsageError as exc:   # the model's bytes changed or left the artifact root
        raise PromotionRefused(
            PROMOTION_ON_STALE_DECISION, f"the accepted decision cites bundle "
            f"{row.digest}, but the model's files changed since: {exc.message}",
            hint=stale_hint) from None
    if canonical(_decided_view(decided)) != canonical(_decided_view(now)):
        changed = differences(_decided_view(decided), _decided_view(now))
        raise PromotionRefused(
            PROMOTION_ON_STALE_DECISION, f"the accepted decision cites bundle "
            f"{row.digest}, but the store or the model's files changed since "
            f"({len(changed)} difference{'' if len(changed) == 1 else 's'}, first: "
            f"{changed[0] if changed else 'the model files'})", hint=stale_hint)
    return row, decided


def signature_bytes(url: str, candidate: str) -> bytes | None:
    """The candidate's stored model signature (OpenSSF Model Signing), or None: unsigned."""

    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            found = model_signature(s, candidate)
            return None if found is None else bytes(found.signature)
    finally:
        store.close()


def _cited_policy(cid: str, entry: dict[str, Any], given: Policy | None) -> Policy:
    cited = entry.get("policy")
    if cited is None:
        raise PromotionRefused(
            PROMOTION_POLICY_NOT_MET, f"the accepted decision on {cid} cites no policy, so "
            f"nothing says which criteria it met", hint=f"record the decision with a policy: "
            f"`mlpipe review {cid} --accept --policy FILE --by NAME --note TEXT`")
    if given is None:
        try:
            given = load_policy(cited["file"])
        except UsageError as exc:
            raise PromotionRefused(
                PROMOTION_POLICY_NOT_MET, f"the accepted decision cites policy "
                f"{cited['name']} ({cited['file']}), which cannot be read here: {exc.message}",
                hint="give the policy file with --policy") from None
    if given.digest != cited["digest"]:
        raise PromotionRefused(
            PROMOTION_POLICY_NOT_MET, f"the accepted decision was judged against policy "
            f"{cited['name']} {cited['digest']}, not {given.name} {given.digest} "
            f"({given.file})", hint=f"record a decision against this policy "
                                    f"(`mlpipe review {cid} --accept --policy {given.file}`), "
                                    f"or promote under the policy the decision cites")
    if not cited.get("passed"):
        raise PromotionRefused(
            PROMOTION_POLICY_NOT_MET, f"the accepted decision records that {cid} did not meet "
            f"policy {cited['name']}", hint=f"see `mlpipe qualify {cid} --policy "
                                            f"{cited['file']}`")
    return given


def _judge(url: str, g: Gate) -> None:
    verification = None
    if g.policy.verify is not None:
        verification = verify_bundle(url, g.candidate).to_dict()
    q = judge(g.policy, g.statement, g.cited, verification)
    if not q.passed:
        failed = [c for c in q.criteria if not c.passed]
        raise PromotionRefused(
            PROMOTION_POLICY_NOT_MET, f"candidate {g.candidate} does not meet policy "
            f"{g.policy.name} now ({len(failed)} criteri{'on' if len(failed) == 1 else 'a'} "
            f"unmet, first {failed[0].code}: {failed[0].message})",
            hint=f"see `mlpipe qualify {g.candidate} --policy {g.policy.file}`")


def lineage(g: Gate) -> dict[str, str]:
    """The registry tags of a promotion: candidate, model digest, the bundle the decision cites,
    the decision (digest, decider), the policy, the run (and its Azure ML job), each data
    snapshot's digest and the code revision. Every value is a string.

    Example:
        >>> lineage(g)["mlpipe.candidate"]
        'c-3f9a0c1b22'
    """
    p = g.statement["predicate"]
    tags = {"candidate": g.candidate, "model": g.model_digest, "bundle": g.cited,
            "decision": g.decision_digest, "decided_by": str(g.decision["by"]),
            "decided_at": str(g.decision["decided_at"]),
            "policy": g.policy.digest, "policy_name": g.policy.name,
            "run": p["run"]["id"], "target": str(p["run"]["target"]),
            "pipeline": p["pipeline"]["name"], "pipeline_digest": p["pipeline"]["digest"]}
    job = (p["run"].get("options") or {}).get("job_name")
    if job:
        tags["azure_job"] = str(job)
    for snap in p["snapshots"]:
        tags[f"data.{snap['input']}"] = str(snap["digest"])
    code = p.get("code")
    if code:
        tags["code_revision"] = (str(code.get("commit") or "unknown")
                                 + ("+dirty" if code.get("dirty") else ""))
    evaluation = p["candidate"].get("evaluation")
    if evaluation:
        tags["evaluation"] = str(evaluation)
    signed = p.get("model_signature")
    if signed:   # where the signature itself is: attached by the registry (model_signature)
        tags["model_signature_digest"] = str(signed["digest"])
        tags["model_signature_keyid"] = str(signed["keyid"])
    return {TAG_PREFIX + k: v for k, v in tags.items()}


@dataclass(slots=True)
class Registered:
    """What a registry answered: the version the candidate's model is, and whether this call
    registered it (False: an earlier promotion had, and it was reused)."""

    registry: str
    target: str
    name: str
    version: str
    uri: str
    alias: str | None
    new: bool
    extra_tags: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Promoted:
    """A recorded promotion and the bundle sealed with it."""

    candidate: str
    registered: Registered
    sealed: str


def record(url: str, g: Gate, reg: Registered, *, by: str | None = None,
           now: datetime | None = None, claim: Claim | None = None) -> Promoted:
    """Record the promotion (once per registry version) and seal the candidate's next bundle
    with it, removing ``claim`` (``claims.claimed``) in the same transaction.

    Raises:
        StoreError: the registry version is recorded as another candidate's promotion.
    """

    def work(s: Session) -> Promoted:
        # the candidate's row first (as review and seal lock it), then the promotion's row
        cand = s.scalars(select(m.CandidateRow).where(m.CandidateRow.id == g.candidate)
                         .with_for_update()).one()
        row = s.scalars(select(m.Promotion).where(
            m.Promotion.registry_kind == reg.registry, m.Promotion.target == reg.target,
            m.Promotion.name == reg.name, m.Promotion.version == reg.version)).first()
        if row is not None and row.candidate_id != g.candidate:
            raise StoreError(f"{reg.uri} at {reg.target} is recorded as the promotion of "
                             f"{row.candidate_id}, not {g.candidate}",
                             hint=f"run `mlpipe trace {reg.uri}` to see which model the "
                                  f"registry holds")
        if row is None:
            s.add(m.Promotion(candidate_id=g.candidate, decision_id=g.decision_id,
                              bundle_digest=g.cited, model_digest=g.model_digest,
                              registry_kind=reg.registry, target=reg.target, name=reg.name,
                              version=reg.version, alias=reg.alias, uri=reg.uri,
                              tags={**g.tags, **reg.extra_tags}, promoted_by=by,
                              promoted_at=now or utcnow()))
        elif reg.alias and row.alias != reg.alias:
            row.alias = reg.alias
        if claim is not None:
            drop(s, claim)
        s.flush()
        sealed = seal(s, cand, now=now)
        return Promoted(g.candidate, reg, sealed.digest)

    store = Store.open(url, create=False)
    try:
        return transact(store, work)
    finally:
        store.close()


__all__ = ["TAG_PREFIX", "Gate", "Promoted", "PromotionRefused", "Registered", "gate",
           "lineage", "record", "signature_bytes"]
