"""Contention, told from failure: a deadlock, a serialisation failure or a busy SQLite store
means another writer held the same rows; the work is run again, and named as contention (not
as an unreachable database) when it still collides. Decides nothing about what the work does.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeVar

from sqlalchemy.exc import DBAPIError

from mlpipe.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

T = TypeVar("T")
#: PostgreSQL's SQLSTATEs for "run the transaction again": serialization_failure,
#: deadlock_detected, lock_not_available.
RETRY_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
#: How often a contended transaction is tried, in all.
TRIES = 6


def is_contention(exc: BaseException) -> bool:
    """Whether the database aborted ``exc``'s transaction because a concurrent one held what it
    needed (PostgreSQL 40001/40P01/55P03, SQLite "database is locked"/"busy")."""
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in RETRY_SQLSTATES:
        return True
    text = str(orig).lower()
    return "database is locked" in text or "database is busy" in text


def contended(store_url: str, why: str) -> StoreError:
    """The error for work that collided with concurrent writers (each time it was tried)."""
    return StoreError(f"the evidence store {store_url!r} is contended, not unreachable: "
                      f"concurrent writers held the same rows ({why})",
                      hint="another mlpipe command was writing the same candidate; run this "
                           "one again when it has finished")


class Sessions(Protocol):
    """What ``transact`` runs work in: ``store.Store`` (named here by its one method, so that
    the store may import this module)."""

    def session(self) -> AbstractContextManager[Session]:
        """A session whose work is committed on exit."""
        ...


def transact(store: Sessions, work: Callable[[Session], T], *, tries: int = TRIES) -> T:
    """``work`` run in one session and committed; run again (after a short, growing, jittered
    pause) when the database aborted it for contention.

    Raises:
        StoreError: the store failed; or every try collided (``Store`` names it contention).

    Example:
        >>> transact(store, lambda s: s.get(m.CandidateRow, "c-3f9a0c1b22").id)
        'c-3f9a0c1b22'
    """
    for attempt in range(1, tries + 1):
        try:
            with store.session() as session:
                return work(session)
        except StoreError as err:   # the store's error keeps the database's as its cause
            cause = err.__cause__
            if cause is None or not is_contention(cause) or attempt == tries:
                raise
            time.sleep(random.uniform(0.02, 0.05) * 2 ** attempt)
    raise AssertionError("unreachable")


__all__ = ["RETRY_SQLSTATES", "TRIES", "Sessions", "contended", "is_contention", "transact"]
