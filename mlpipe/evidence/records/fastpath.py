"""The fast path of ``mlpipe evidence``: a candidate's newest sealed bundle read straight from a
SQLite store, without SQLAlchemy, so the command answers in a fraction of a second in a large
store.

Read-only, and answers only what it can be sure of: anything else (another database, a store
at another schema revision, an unknown or ambiguous id, no sealed bundle yet) returns None and
the caller takes the full path through the store.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Any
from urllib.parse import quote

from mlpipe.digests import digest_bytes
from mlpipe.errors import StoreError

#: Must equal ``mlpipe.evidence.storage.migrate.HEAD`` (a test keeps them in step).
SCHEMA_HEAD = "0012_i37_races"


def read_sealed(url: str, ref: str) -> tuple[str, bytes] | None:
    """``(digest, exact bytes)`` of the newest bundle sealed for the candidate ``ref`` names.

    Args:
        url: the store URL; only ``sqlite:///PATH`` is read here.
        ref: a candidate id or an unambiguous prefix of one.

    Example:
        >>> digest, content = read_sealed("sqlite:////proj/evidence/store.sqlite", "c-3f9a")
    """
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    path = url[len("sqlite:///"):]
    if not path or path == ":memory:":
        return None
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        head = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        if head is None or head[0] != SCHEMA_HEAD:
            return None
        if not ref:
            return None
        # a prefix as an indexed range (ids are ASCII), not substr() over every candidate
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM candidates WHERE id >= ? AND id < ? ORDER BY id LIMIT 3",
            (ref, ref[:-1] + chr(ord(ref[-1]) + 1)))]
        if ref in ids:
            ids = [ref]
        if len(ids) != 1:
            return None
        row = conn.execute("SELECT digest, content FROM bundles WHERE candidate_id = ? "
                           "ORDER BY sealed_at DESC, digest DESC LIMIT 1", ids).fetchone()
        return None if row is None else (row[0], bytes(row[1]))
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def sealed_statement(digest: str, content: bytes) -> dict[str, Any]:
    """The statement in a sealed bundle's stored bytes, their integrity checked by the digest
    they were sealed under (sealing checked them against the bundle schema; ``--verify`` and
    ``seal.load_sealed`` check it again).

    Raises:
        StoreError: the bytes no longer hash to ``digest``, or are not a JSON object.
    """
    hint = "run `mlpipe evidence CANDIDATE --verify`, and restore the bundle from a copy you trust"
    if digest_bytes(content) != digest:
        raise StoreError(f"sealed bundle {digest} no longer matches its digest: it was altered "
                         f"in the store", hint=hint)
    try:
        statement = json.loads(content)
    except ValueError:
        statement = None
    if not isinstance(statement, dict):
        raise StoreError(f"sealed bundle {digest} is no longer a JSON object: it was altered in "
                         f"the store", hint=hint)
    return statement
