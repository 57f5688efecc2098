"""Pre-registered qualification: the policy a run commits to before anything runs (``submit
--policy FILE``), recorded with the run, sealed into its bundle, and the one ``qualify`` and
``review`` judge against unless a different one is given as a recorded deviation (who, why).

Chooses the policy to judge and says why; judges nothing (``policy``'s) and records nothing
(``review``'s, which seals the deviation with the decision).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.codes import POLICY_DEVIATION_UNRECORDED
from mlpipe.diagnostics import CodedRefusal
from mlpipe.digests import digest_bytes
from mlpipe.errors import StoreError, UsageError
from mlpipe.evidence.qualification.policy import Policy, load_policy, parse_policy


class DeviationRefused(CodedRefusal):
    """A policy other than the committed one, given without a recorded deviation (exit 1: the
    candidate was pre-registered against another bar, not a usage error)."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(POLICY_DEVIATION_UNRECORDED, message, hint=hint)


def commit(path: str) -> dict[str, Any]:
    """What a run records when it commits to the policy file ``path`` before it runs: the
    policy's name, file and digest (sha256 of the file's bytes, as ``Policy.digest``) and its
    whole text, so that it is judged as committed even if the file changes later.

    Raises:
        UsageError: the file cannot be read or is not a valid policy (nothing is run).
    """
    policy = load_policy(path)
    text = Path(path).read_text(encoding="utf-8")   # as load_policy read it and digested it
    if digest_bytes(text.encode("utf-8")) != policy.digest:
        raise UsageError(f"policy {path} changed while it was read", hint="submit again")
    return {"name": policy.name, "file": policy.file, "digest": policy.digest, "text": text}


def committed(predicate: dict[str, Any]) -> dict[str, Any] | None:
    """The commitment the bundle's run recorded (``run.options.policy``), or None."""
    found = ((predicate.get("run") or {}).get("options") or {}).get("policy")
    return found if isinstance(found, dict) else None


def committed_policy(predicate: dict[str, Any]) -> Policy | None:
    """The committed policy, parsed from the text the run recorded, or None.

    Raises:
        StoreError: the recorded text no longer has the recorded digest (altered in the store).
    """
    c = committed(predicate)
    if c is None:
        return None
    text = str(c.get("text") or "")
    if digest_bytes(text.encode("utf-8")) != c.get("digest"):
        raise StoreError(f"the policy run {predicate['run']['id']} committed to no longer has "
                         f"its recorded digest {c.get('digest')}: it was altered in the store",
                         hint="run `mlpipe evidence CANDIDATE --verify`, and restore the store "
                              "from a copy you trust")
    return parse_policy(text, str(c.get("file") or c.get("name")))


@dataclass(frozen=True, slots=True)
class Choice:
    """The policy to judge, and how it relates to the committed one: ``committed`` the run's
    commitment (name, file, digest) or None; ``deviation`` ``{"by", "why", "digest"}`` when
    the policy judged is not the committed one."""

    policy: Policy
    committed: dict[str, Any] | None
    deviation: dict[str, Any] | None = None

    def cited(self) -> dict[str, Any]:
        """What a decision records beside the policy's result."""
        return {"committed": None if self.committed is None else
                {k: self.committed[k] for k in ("name", "file", "digest")},
                "deviation": self.deviation}


def choose(predicate: dict[str, Any], given: Policy | None, *, by: str | None = None,
           why: str | None = None) -> Choice | None:
    """The policy to judge the bundle ``predicate`` against: the committed one by default;
    ``given`` when it is the committed one, when the run committed to none, or as a deviation
    ``by`` someone for the reason ``why``. None when there is neither.

    Raises:
        DeviationRefused: ``given`` differs from the committed policy and no reason is given.
        UsageError: a reason given with no policy to deviate to, or no one who deviates.
        StoreError: the recorded commitment was altered.

    Example:
        >>> choose(bundle["predicate"], None).policy.name
        'promotion-policy'
    """
    c = committed(predicate)
    run = predicate["run"]["id"]
    if why is not None and (given is None or not why.strip()):
        raise UsageError("--deviation gives the reason for judging against another policy "
                         "than the committed one; it needs --policy FILE and a reason",
                         hint="give --policy FILE --deviation 'WHY', or drop --deviation")
    if given is None:
        mine = committed_policy(predicate)
        return None if mine is None else Choice(mine, c)
    if c is None or given.digest == c.get("digest"):
        committed_policy(predicate)   # an altered commitment is refused all the same
        return Choice(given, c)
    if why is None:
        raise DeviationRefused(
            f"run {run} committed to policy {c['name']} ({c['digest']}) before it ran; "
            f"{given.file} ({given.digest}) is another policy",
            hint="judge against the committed policy (omit --policy), or record why you "
                 "deviate from it: --deviation 'WHY' (with --by, shown on every view)")
    if not by:
        raise UsageError("a deviation from the committed policy names who deviates",
                         hint="give --by NAME (or a signing key)")
    committed_policy(predicate)
    return Choice(given, c, {"by": by, "why": why.strip(), "digest": given.digest,
                             "name": given.name, "file": given.file})


def qualify(url: str, ref: str, given: Policy | None, *, by: str | None = None,
            why: str | None = None) -> tuple[Any, Choice]:
    """``mlpipe qualify``: the chosen policy (``choose``) judged against the candidate's newest
    sealed bundle, verified when it says so; records nothing, as ``policy.qualify``.

    Raises:
        UsageError: no policy given and none committed; no such candidate.
        DeviationRefused: another policy than the committed one, without a reason.
        NothingSealed: no bundle of the candidate is sealed.
    """
    from mlpipe.evidence.bundles.seal import load_sealed, sealed_bundle
    from mlpipe.evidence.qualification.policy import judge

    sealed = sealed_bundle(url, ref, first="qualify")
    statement = load_sealed(sealed.digest, sealed.content)
    p = statement["predicate"]
    choice = choose(p, given, by=by, why=why)
    if choice is None:
        raise UsageError(f"run {p['run']['id']} of candidate {p['candidate']['id']} committed "
                         f"to no qualification policy, and none was given",
                         hint="give --policy FILE (docs/review.md); `submit --policy FILE` "
                              "commits a run to one before it runs")
    verification = None
    if choice.policy.verify is not None:
        from mlpipe.evidence.bundles.verify import verify_bundle

        verification = verify_bundle(url, p["candidate"]["id"]).to_dict()
    return judge(choice.policy, statement, sealed.digest, verification), choice


def render_choice(choice: Choice) -> list[str]:
    """How a view says which policy was judged: committed before the run, a deviation from
    the committed one (by whom, why), or not committed at all."""
    c, d = choice.committed, choice.deviation
    if c is None:
        return ["policy not committed before the run (the run recorded none: `submit --policy`)"]
    if d is None:
        return [f"policy committed before the run: {c['name']} ({c['digest']})"]
    return [f"DEVIATION from the policy committed before the run, {c['name']} ({c['digest']}): "
            f"judged against {d['name']} ({d['digest']}) by {d['by']}, because: {d['why']}"]


__all__ = ["Choice", "DeviationRefused", "choose", "commit", "committed", "committed_policy",
           "qualify", "render_choice"]
