"""A reviewer's decision as a SLSA verification summary attestation (VSA v1) in an in-toto
Statement v1: which candidate's model, the bundle digest read, the policy and its digest, the
verdict; and reading one back.

Builds and reads statements only; signing is ``dsse``'s, storing ``review``'s.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

STATEMENT = "https://in-toto.io/Statement/v1"
VSA = "https://slsa.dev/verification_summary/v1"


def _digest_set(digest: str) -> dict[str, str]:
    """``sha256:ab12`` -> ``{"sha256": "ab12"}`` (an in-toto DigestSet)."""
    algorithm, _, value = digest.partition(":")
    return {algorithm: value}


def decision_statement(*, candidate: str, model: str, bundle: str, verdict: str, note: str,
                       decided_at: datetime, verifier: str,
                       policy: dict[str, Any] | None) -> dict[str, Any]:
    """The VSA of a decision: its subject the candidate's model, its input attestation the
    bundle read, ``verificationResult`` PASSED for accepted and FAILED for rejected.

    Args:
        candidate: the candidate id.
        model: the model's content digest (``blake3:...``).
        bundle: the digest of the bundle the reviewer read.
        verdict: ``accepted`` or ``rejected``.
        note: the reviewer's reason.
        decided_at: when.
        verifier: who decides: the signing key's id (``mlpipe:key/<id>``).
        policy: the policy judged with the decision (``Policy.cited()`` and ``passed``), if any.

    Example:
        >>> decision_statement(candidate="c-1", model="blake3:ab", bundle="sha256:cd",
        ...                    verdict="accepted", note="ok", decided_at=now,
        ...                    verifier="mlpipe:key/3f9a", policy=None)["predicateType"]
        'https://slsa.dev/verification_summary/v1'
    """
    cited = {"uri": "mlpipe:no-policy"} if policy is None else {
        "uri": f"file:{policy['file']}", "digest": _digest_set(policy["digest"])}
    return {
        "_type": STATEMENT,
        "subject": [{"name": f"mlpipe:candidate/{candidate}", "digest": _digest_set(model)}],
        "predicateType": VSA,
        "predicate": {
            "verifier": {"id": verifier},
            "timeVerified": decided_at.isoformat(),
            "resourceUri": f"mlpipe:candidate/{candidate}",
            "policy": cited,
            "inputAttestations": [{"uri": f"mlpipe:bundle/{bundle}",
                                   "digest": _digest_set(bundle)}],
            "verificationResult": "PASSED" if verdict == "accepted" else "FAILED",
            "verifiedLevels": [],
            "mlpipe": {"candidate": candidate, "bundle": bundle, "verdict": verdict,
                       "note": note, "policy": policy},
        },
    }


def read_decision(statement: dict[str, Any]) -> tuple[str, str, str]:
    """(candidate, bundle digest, verdict) a decision's statement says; empty strings for what
    it does not say (a statement that is not a decision's)."""
    predicate = statement.get("predicate") if isinstance(statement, dict) else None
    said = predicate.get("mlpipe") if isinstance(predicate, dict) else None
    if not isinstance(said, dict) or statement.get("predicateType") != VSA:
        return ("", "", "")
    return (str(said.get("candidate", "")), str(said.get("bundle", "")),
            str(said.get("verdict", "")))


__all__ = ["STATEMENT", "VSA", "decision_statement", "read_decision"]
