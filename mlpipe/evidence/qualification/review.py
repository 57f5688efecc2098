"""Recorded decisions: a reviewer accepts or rejects a candidate on the exact bundle they read
(``mlpipe review``), and the bundle sealed next records the decision.

Only a reviewer's command calls this; orchestration (submit, sync, the executors) never does,
so nothing but a person ever marks a candidate accepted. Judging a policy is ``policy``'s.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mlpipe.codes import (
    ACCEPTANCE_REFUSED,
    CODES,
    DECIDER_IS_SUBMITTER,
    DECISION_ON_STALE_BUNDLE,
    DECISION_SIGNER_UNTRUSTED,
)
from mlpipe.diagnostics import CodedRefusal
from mlpipe.errors import UsageError
from mlpipe.evidence.qualification.policy import Policy, Qualification
from mlpipe.evidence.signatures.keys import Signer
from mlpipe.evidence.signatures.trust import DECIDE, Trust


class ReviewRefused(CodedRefusal):
    """A decision that may not be recorded (a problem with the candidate or its bundle, not
    with the command line); a policy other than the committed one without a reason is
    ``commitment.DeviationRefused`` (MP718)."""


@dataclass(slots=True)
class Recorded:
    """A recorded decision: what it cites, and the bundle sealed with it."""

    candidate: str
    verdict: str
    cited: str
    sealed: str
    by: str = ""
    signer: str | None = None


def _refuse_stale(candidate: str, message: str) -> ReviewRefused:
    return ReviewRefused(DECISION_ON_STALE_BUNDLE, message,
                         hint=f"run `mlpipe evidence {candidate} --rebuild`, read the bundle it "
                              f"seals, then decide on that one")


def record_decision(url: str, ref: str, *, verdict: str, by: str | None, note: str,
                    policy: Policy | None = None, bundle: str | None = None,
                    now: datetime | None = None, key: Signer | None = None,
                    trust: Trust | None = None, deviation: str | None = None) -> Recorded:
    """Record a decision on the candidate ``ref`` names, citing its newest sealed bundle, and
    seal the next bundle with the decision in it. With ``key`` the decision is a signed
    statement (``vsa``) and the reviewer is the key's identity in ``trust``; without, ``by``
    names the reviewer in free text and the decision is shown as unsigned.

    Args:
        url: the store URL.
        ref: a candidate id or an unambiguous prefix of one.
        verdict: ``"accepted"`` or ``"rejected"``.
        by: who decides (a name or an address); with ``key``, omitted or the trust policy's
            name for the key.
        note: why, in the reviewer's words.
        policy: judged against the bundle first; its result is recorded with the decision.
            Default: the one the run committed to; another only with ``deviation`` (why).
        bundle: the digest the reviewer read; refused unless it is the newest sealed bundle.
        now: the decision's time (tests pin it).
        key: the reviewer's key: signs the decision and the bundle sealed with it.
        trust: the trust policy: the candidate's evidence must verify under it, and the key
            must be an identity that may decide and did not submit the candidate's run.

    Raises:
        UsageError: no such candidate, an empty name or note, ``by`` not the key's name.
        ReviewRefused: MP715, the store changed since the newest bundle was sealed (or none is
            sealed, or ``bundle`` is not the newest); MP716, ``accepted`` with an
            error-severity finding in the bundle or a policy the candidate does not meet;
            under ``trust``, the finding that stops the evidence verifying (MP730-MP737), MP735
            a key that may not decide, MP736 a decider who submitted the run.

    Example:
        >>> record_decision(url, "c-3f9a", verdict="accepted", by="dana", note="meets Q-7")
        Recorded(candidate='c-3f9a0c1b22', verdict='accepted', cited='sha256:...', ...)
    """
    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.contention import transact
    from mlpipe.evidence.storage.store import Store

    if verdict not in (m.ACCEPTED, m.REJECTED):
        raise UsageError(f"a verdict is accepted or rejected, not {verdict!r}",
                         hint="give --accept or --reject")
    by = _reviewer(by, key, trust)
    if not by or not note.strip():
        raise UsageError("a decision names who decided (--by) and why (--note); one is empty",
                         hint="give --by NAME --note TEXT")
    store = Store.open(url, create=False)
    try:
        cand_id, cited = _cited_bundle(store, ref, bundle, key, trust)
        choice = _chosen(store, cited, policy, by, deviation)
        policy = None if choice is None else choice.policy
        verification = _verification(url, cand_id, policy, trust)
        return transact(store, lambda s: _decide(
            s, cand_id, cited, verdict=verdict, by=by, note=note.strip(), choice=choice,
            verification=verification, now=now, key=key))
    finally:
        store.close()


def _decide(s: Any, cand_id: str, cited: str, *, verdict: str, by: str, note: str,
            choice: Any, verification: dict[str, Any] | None,
            now: datetime | None, key: Signer | None) -> Recorded:
    """In one transaction: lock the candidate, refuse a stale bundle, record the decision and
    seal the bundle that carries it."""
    from sqlalchemy import select
    from sqlalchemy.exc import IntegrityError

    from mlpipe.evidence.bundles.seal import CONFIGURED, latest, seal
    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.store import utcnow

    # The candidate's row is locked before anything is read (PostgreSQL: FOR UPDATE;
    # SQLite: BEGIN IMMEDIATE holds the write lock), so the stale check, the decision
    # and the seal see one state: a concurrent reviewer waits, then finds its bundle
    # superseded. Locking it only at the seal, after the decision's foreign key took
    # a share lock on it, is what deadlocked.
    cand = s.scalars(select(m.CandidateRow).where(m.CandidateRow.id == cand_id)
                     .with_for_update()).one()
    newest = latest(s, cand_id)
    if newest is None or newest.digest != cited:
        raise _refuse_stale(cand_id, f"bundle {cited} is no longer the newest sealed "
                                     f"bundle of {cand_id}")
    statement = _unchanged_since_sealed(s, cand, cand_id, newest, cited)
    qualification = None if choice is None else _judge(choice, statement, cited, verification)
    if verdict == m.ACCEPTED:
        _may_accept(cand_id, statement, qualification)
    judged = None if qualification is None or choice is None else {
        **qualification.policy.cited(), "passed": qualification.passed,
        "criteria": [c.to_dict() for c in qualification.criteria], **choice.cited()}
    decided_at = now or utcnow()
    envelope = None if key is None else _signed_decision(
        key, cand_id, statement, cited, verdict, note, decided_at, judged)
    s.add(m.Decision(candidate_id=cand_id, bundle_digest=cited,
                     verdict=verdict, reviewer=by, note=note, policy=judged,
                     decided_at=decided_at, envelope=envelope,
                     signer=None if key is None else key.keyid))
    try:
        s.flush()
    except IntegrityError:   # uq_decisions_bundle: one decision per bundle, ever
        raise _refuse_stale(cand_id, f"bundle {cited} already has a decision: a "
                                     f"bundle is decided on once") from None
    sealed = seal(s, cand, now=now, signer=CONFIGURED if key is None else key)
    return Recorded(cand_id, verdict, cited, sealed.digest, by,
                    None if key is None else key.keyid)


def _cited_bundle(store: Any, ref: str, bundle: str | None, key: Signer | None,
                  trust: Trust | None) -> tuple[str, str]:
    """The candidate ``ref`` names and the digest of its newest sealed bundle, which the
    decision cites (and ``bundle``, when given, must be); under ``trust``, ``key`` must be an
    identity that may decide on it."""
    from mlpipe.evidence.bundles.bundle import find_candidate
    from mlpipe.evidence.bundles.seal import latest

    with store.session() as s:
        cand = find_candidate(s, ref)
        if key is not None and trust is not None:
            _may_decide(s, cand, key, trust)
        cand_id, newest = cand.id, latest(s, cand.id)
        if newest is None:
            raise _refuse_stale(cand_id, f"no bundle of candidate {cand_id} has been "
                                         f"sealed, so there is no digest to cite")
        cited = newest.digest
    if bundle is not None and bundle != cited:
        raise _refuse_stale(cand_id, f"the decision cites bundle {bundle}, but the newest "
                                     f"sealed bundle of {cand_id} is {cited}")
    return cand_id, cited


def _chosen(store: Any, cited: str, policy: Policy | None, by: str,
            deviation: str | None) -> Any:
    """The policy the decision is judged against (``commitment.choose``): the one the run
    committed to, unless ``policy`` is given as the committed one or as a deviation."""
    from mlpipe.evidence.bundles.seal import load_sealed
    from mlpipe.evidence.qualification.commitment import choose
    from mlpipe.evidence.storage import models as m

    with store.session() as s:
        row = s.get(m.BundleRow, cited)
        predicate = load_sealed(cited, bytes(row.content))["predicate"]
    return choose(predicate, policy, by=by, why=deviation)


def _judge(choice: Any, statement: dict[str, Any], cited: str,
           verification: dict[str, Any] | None) -> Qualification:
    from mlpipe.evidence.qualification.policy import judge

    return judge(choice.policy, statement, cited, verification)


def _verification(url: str, cand_id: str, policy: Policy | None,
                  trust: Trust | None) -> dict[str, Any] | None:
    """The verification the decision rests on: under ``trust``, one that must pass; for a
    policy that judges it, ``--verify``'s result; else none."""
    if trust is not None:
        return require_trusted(url, cand_id, trust)
    if policy is not None and policy.verify is not None:
        from mlpipe.evidence.bundles.verify import verify_bundle

        return verify_bundle(url, cand_id).to_dict()
    return None


def _unchanged_since_sealed(s: Any, cand: Any, cand_id: str, newest: Any,
                            cited: str) -> dict[str, Any]:
    """The statement of the sealed bundle ``cited``, refused (MP715) when the store or the
    model's files no longer build the same bundle."""
    from mlpipe.evidence.bundles.bundle import build
    from mlpipe.evidence.bundles.compare import differences
    from mlpipe.evidence.bundles.seal import canonical, load_sealed, unsealed

    statement = load_sealed(newest.digest, bytes(newest.content))
    try:
        now_built = build(s, cand)
    except UsageError as exc:   # the model's bytes changed or left the artifact root
        raise _refuse_stale(cand_id, f"the model's files changed since bundle {cited} "
                                     f"was sealed: {exc.message}") from None
    if canonical(unsealed(statement)) != canonical(now_built):
        changed = differences(unsealed(statement), now_built)
        raise _refuse_stale(cand_id, f"the store or the model's files changed since "
                                     f"bundle {cited} was sealed ({len(changed)} difference"
                                     f"{'' if len(changed) == 1 else 's'}, first: "
                                     f"{changed[0] if changed else 'the model files'})")
    return statement


def _signed_decision(key: Signer, cand_id: str, statement: dict[str, Any], cited: str,
                     verdict: str, note: str, decided_at: datetime,
                     judged: dict[str, Any] | None) -> bytes:
    """The decision as a signed statement (``vsa``) in a DSSE envelope."""
    from mlpipe.evidence.bundles.seal import canonical
    from mlpipe.evidence.signatures import dsse
    from mlpipe.evidence.signatures.vsa import decision_statement

    vsa = decision_statement(
        candidate=cand_id, model=statement["predicate"]["candidate"]["model"],
        bundle=cited, verdict=verdict, note=note, decided_at=decided_at,
        verifier=f"mlpipe:key/{key.keyid}",
        policy=None if judged is None else {
            k: judged[k] for k in ("name", "file", "digest", "passed")})
    return dsse.sign(canonical(vsa), key)


def require_trusted(url: str, ref: str, trust: Trust) -> dict[str, Any]:
    """``--verify --trust``'s result for the candidate ``ref``, when it verifies.

    Raises:
        ReviewRefused: it does not; the code is the first finding's (MP711-MP737).
    """
    from mlpipe.evidence.bundles.verify import verify_bundle

    verification = verify_bundle(url, ref, trust=trust).to_dict()
    found = verification["mismatches"]
    if found:
        raise ReviewRefused(CODES[found[0]["code"]],
                            f"candidate {ref}'s evidence does not verify under the trust policy "
                            f"{trust.file} ({len(found)} finding{'' if len(found) == 1 else 's'}"
                            f", first: {found[0]['message']})",
                            hint=f"see `mlpipe evidence {ref} --verify --trust {trust.file}`; a "
                                 f"candidate is judged on evidence that verifies")
    return verification


def _reviewer(by: str | None, key: Signer | None, trust: Trust | None) -> str:
    """Who decides: the trust policy's name for the key (``by``, when given, must agree), the
    key's id without a policy, or ``by`` for an unsigned decision."""
    by = (by or "").strip()
    if key is None:
        return by
    ident = trust.identities.get(key.keyid) if trust is not None else None
    name = ident.name if ident is not None else f"key {key.keyid[:16]}"
    if by and ident is not None and by != ident.name:
        raise UsageError(f"--by {by!r}, but the trust policy names the key {key.keyid[:16]} "
                         f"{ident.name!r}: a signed decision's reviewer is its key's identity",
                         hint="leave out --by when you sign with --key")
    return name if ident is not None or not by else f"{by} ({name})"


def _may_decide(s: Any, cand: Any, key: Signer, trust: Trust) -> None:
    """Refuse a key the policy does not let decide, and a decider who submitted the run."""
    ident = trust.identities.get(key.keyid)
    if ident is None or DECIDE not in ident.may:
        who = ("no identity of the trust policy " + trust.file if ident is None else
               f"{ident.name!r}, who may {' and '.join(sorted(ident.may))} but not decide")
        raise ReviewRefused(DECISION_SIGNER_UNTRUSTED,
                            f"the key {key.keyid[:16]} that would sign this decision is "
                            f"{who}",
                            hint="sign with your reviewer key (may: [decide]), or ask whoever "
                                 "keeps the trust policy to add it")
    from mlpipe.evidence.signatures.signing import submitters

    both = sorted(submitters(s, cand.id) & set(ident.accounts))
    if trust.decider_is_not_submitter and both:
        raise ReviewRefused(DECIDER_IS_SUBMITTER,
                            f"{ident.name!r} submitted the run of candidate {cand.id} (as "
                            f"{both[0]!r}): the decider is not the submitter",
                            hint="another reviewer decides on this candidate (separation of "
                                 "duties, the trust policy's decider_is_not_submitter)")


def _may_accept(candidate: str, statement: dict[str, Any],
                qualification: Qualification | None) -> None:
    from mlpipe.evidence.records.findings import every_finding

    errors = [f for f in every_finding(statement["predicate"]) if f["severity"] == "error"]
    if errors:
        raise ReviewRefused(ACCEPTANCE_REFUSED,
                            f"candidate {candidate} cannot be accepted: its bundle has "
                            f"{len(errors)} error-severity finding"
                            f"{'' if len(errors) == 1 else 's'}, first {errors[0]['code']} "
                            f"{errors[0]['name']} ({errors[0]['source']}, run "
                            f"{errors[0]['run']})",
                            hint=f"fix the cause and produce a new candidate, or record "
                                 f"`mlpipe review {candidate} --reject` with the reason")
    if qualification is not None and not qualification.passed:
        failed = [c for c in qualification.criteria if not c.passed]
        raise ReviewRefused(ACCEPTANCE_REFUSED,
                            f"candidate {candidate} cannot be accepted: it does not meet "
                            f"policy {qualification.policy.name} ({len(failed)} criteri"
                            f"{'on' if len(failed) == 1 else 'a'} unmet, first "
                            f"{failed[0].code}: {failed[0].message})",
                            hint=f"see `mlpipe qualify {candidate} --policy "
                                 f"{qualification.policy.file}`; produce a candidate that "
                                 f"meets it, or record --reject")


__all__ = ["Recorded", "ReviewRefused", "record_decision", "require_trusted"]
