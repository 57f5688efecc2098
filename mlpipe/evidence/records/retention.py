"""What retention (``mlpipe gc``) must keep, asked of the store: the artifacts a candidate
under review or accepted needs to be verified, those of runs still running, and when each
artifact was last used. Read-only, a handful of set-wise queries; deletes nothing and knows
no artifact root (``backends.local.gc`` walks the folders). Asks through the ``Reader``
(plain SQL: sqlite3 for SQLite), so ``gc --dry-run`` starts without the ORM.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from mlpipe.evidence.records.reader import Reader

#: Every content digest a sealed bundle's bytes cite (artifacts, snapshots, files).
_CITED = re.compile(rb"(?:blake3|sha256):[0-9a-f]{64}")


@dataclass(slots=True)
class Retained:
    """The store's answer: ``protected`` digests (never removed) and why, and per digest the
    newest time a step run consumed or produced it, with its recorded size."""

    protected: set[str] = field(default_factory=set)
    candidates: list[str] = field(default_factory=list)      # the protected candidates
    rejected: list[str] = field(default_factory=list)        # candidates left unprotected
    running: list[str] = field(default_factory=list)         # runs still running
    last_used: dict[str, datetime | None] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


def _rows(s: Reader, sql: str, **params) -> list[tuple]:
    return s._rows(sql, params)


def _rejected(s: Reader) -> set[str]:
    """Candidates whose newest recorded decision (``mlpipe review``) rejects them."""
    newest: dict[str, str] = {}
    for cand, verdict in _rows(s, "SELECT candidate_id, verdict FROM decisions "
                                  "ORDER BY decided_at, id"):
        newest[cand] = verdict
    return {cand for cand, verdict in newest.items() if verdict == "rejected"}


def retained(s: Reader) -> Retained:
    """What the store says must be kept, and when each artifact was last used.

    A candidate is protected unless its newest decision rejects it: its model and evaluation,
    every artifact its run's steps consumed or produced (reused steps included: they name the
    same artifacts), those of the runs recorded as producing it again, and every digest its
    sealed bundles cite. Runs still running protect everything their steps recorded.

    Example:
        >>> found = retained(s)
        >>> "blake3:c1f0..." in found.protected
        True
    """
    out = Retained()
    rejected = _rejected(s)
    candidates = _rows(s, "SELECT id, run_id, model_artifact_id, evaluation_artifact_id "
                          "FROM candidates")
    kept = [c for c in candidates if c[0] not in rejected]
    out.candidates = sorted(c[0] for c in kept)
    out.rejected = sorted(rejected & {c[0] for c in candidates})
    runs = {c[1] for c in kept}
    ids = {c[0] for c in kept}
    runs |= {r for cand, r in _rows(s, "SELECT candidate_id, run_id FROM candidate_productions")
             if cand in ids}
    out.running = sorted(r[0] for r in _rows(s, "SELECT id FROM runs WHERE status = 'running'"))
    runs |= set(out.running)
    artifact_ids = {a for c in kept for a in (c[2], c[3]) if a is not None}
    digests = dict(_rows(s, "SELECT id, digest FROM artifacts"))
    out.protected = {digests[a] for a in artifact_ids if a in digests}
    # one pass over the step runs: the newest use of each artifact, and the protected runs'
    for digest, size, run_id, started in _rows(
            s, "SELECT a.digest, a.size, sr.run_id, sr.started_at FROM artifacts a "
               "LEFT JOIN step_artifacts sa ON sa.artifact_id = a.id "
               "LEFT JOIN step_runs sr ON sr.id = sa.step_run_id"):
        out.sizes[digest] = size
        when = _time(started)
        before = out.last_used.get(digest)
        out.last_used[digest] = when if before is None or (when and when > before) else before
        if run_id in runs:
            out.protected.add(digest)
    for cand, content in _rows(s, "SELECT candidate_id, content FROM bundles"):
        if cand in ids:
            out.protected |= {d.decode() for d in _CITED.findall(bytes(content))}
    return out


def _time(value) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


__all__ = ["Retained", "retained"]
