"""A promotion's claim: recorded in the store before the registry is written and removed with
the promotion's record, so concurrent ``mlpipe promote``s of one candidate to one model name
register it once, and one killed midway is taken over by the next (which finds the version the
dead one registered, by its lineage tags, and records it).

Talks to no registry; decides nothing about whether the candidate may be promoted (``promotion``).
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select

from mlpipe.errors import MlpipeError, StoreError
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.liveness import alive, host, process_token

#: How long a promoter waits for another's claim on the same promotion before giving up.
WAIT_SECONDS = 600.0
#: A claim from another machine (whose process cannot be asked) older than this is abandoned.
ABANDONED_AFTER = timedelta(hours=1)


class PromotionBusy(MlpipeError):
    """Another live process held the promotion's claim for the whole wait (exit 1)."""

    exit_code = 1


@dataclass(slots=True)
class Claim:
    """A held claim: its row, and the process it was taken over from (None: it was free).
    A taken-over claim means a promote stopped midway: the registry may hold its version."""

    id: int
    taken_from: str | None = None


def _holder(row: m.PromotionClaim) -> str:
    return f"process {row.pid} on {row.host} (since {row.claimed_at:%Y-%m-%d %H:%M:%S} UTC)"


def _live(row: m.PromotionClaim, now: datetime) -> bool:
    if row.host == host():
        return alive(row.pid, row.pid_started)
    return now - row.claimed_at < ABANDONED_AFTER


def take(store: Any, candidate: str, registry: str, target: str, name: str, *,
         wait: float = WAIT_SECONDS, poll: float = 0.25) -> Claim:
    """Claim the promotion of ``candidate`` to ``name`` at ``registry``/``target``: at once when
    nobody holds it or its holder is dead (taken over); after the holder finishes otherwise.

    Raises:
        PromotionBusy: a live holder kept it for ``wait`` seconds.
        StoreError: the store failed.

    Example:
        >>> take(store, "c-3f9a0c1b22", "mlflow", "http://mlflow:5000", "defect").taken_from
        None
    """
    from mlpipe.evidence.storage.contention import transact
    from mlpipe.evidence.storage.store import utcnow

    def attempt(s: Any) -> tuple[Claim | None, m.PromotionClaim | None]:
        # the candidate's row first: every writer of the candidate takes it in this order
        s.execute(select(m.CandidateRow.id).where(m.CandidateRow.id == candidate)
                  .with_for_update())
        row = s.scalars(select(m.PromotionClaim).where(
            m.PromotionClaim.candidate_id == candidate, m.PromotionClaim.registry_kind == registry,
            m.PromotionClaim.target == target, m.PromotionClaim.name == name)).first()
        me = {"host": host(), "pid": os.getpid(), "pid_started": process_token(os.getpid()),
              "claimed_at": utcnow()}
        if row is None:
            row = m.PromotionClaim(candidate_id=candidate, registry_kind=registry,
                                   target=target, name=name, **me)
            s.add(row)
            s.flush()
            return Claim(row.id), None
        if _live(row, me["claimed_at"]):
            s.expunge(row)
            return None, row
        was = _holder(row)
        for key, value in me.items():
            setattr(row, key, value)
        return Claim(row.id, was), None

    deadline = time.monotonic() + wait
    while True:
        got, held = transact(store, attempt)
        if got is not None:
            return got
        assert held is not None
        if time.monotonic() >= deadline:
            raise PromotionBusy(
                f"{candidate} is being promoted to {name} at {target} by {_holder(held)}, "
                f"which kept it for the {wait:.0f} s this promote waited",
                hint="run it again when that promote has finished; a killed one is taken over "
                     "by the next promote once its process is gone")
        time.sleep(poll)


@contextlib.contextmanager
def claimed(url: str, candidate: str, registry: str, target: str, name: str, *,
            wait: float = WAIT_SECONDS) -> Iterator[Claim]:
    """:func:`take` the claim for the block, which registers the model and records the
    promotion (``promotion.record(claim=...)`` removes it); given up when the block fails.

    Example:
        >>> with claimed(url, g.candidate, "mlflow", uri, "defect") as claim:
        ...     record(url, g, register(uri, "defect", g.model_path, g.tags), claim=claim)
    """
    from mlpipe.evidence.storage.store import Store

    store = Store.open(url, create=False)
    try:
        claim = take(store, candidate, registry, target, name, wait=wait)
        try:
            yield claim
        except BaseException:
            # a store that fails here keeps the claim: its process ends, so the next promote
            # takes it over; the error the block raised is the one to report
            with contextlib.suppress(StoreError), store.session() as s:
                drop(s, claim)
            raise
    finally:
        store.close()


def drop(s: Any, claim: Claim) -> None:
    """Remove the claim in the session that records the promotion."""
    s.execute(delete(m.PromotionClaim).where(m.PromotionClaim.id == claim.id))


__all__ = ["ABANDONED_AFTER", "WAIT_SECONDS", "Claim", "PromotionBusy", "claimed", "drop", "take"]
