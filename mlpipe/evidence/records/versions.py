"""Which code each component name and version has been recorded with: what ``mlpipe check``
asks the store to tell a version reused for changed code (MP805).

Reads only; a store that does not exist, or cannot be read, knows nothing (an empty answer),
so ``check`` never fails because of the store.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import quote

_QUERY = "SELECT name, version, code_digest FROM component_versions WHERE name IN ({})"


def _sqlite_path(url: str) -> str | None:
    for prefix in ("sqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(prefix):
            return url[len(prefix):]
    return None


def recorded_code_digests(url: str, names: Iterable[str]) -> dict[tuple[str, str], set[str]]:
    """``{(name, version): {code digests}}`` the store at ``url`` holds for components named
    ``names``; empty when the store is absent or unreadable.

    Example:
        >>> recorded_code_digests("sqlite:////nowhere/store.sqlite", ["train"])
        {}
    """
    wanted = sorted(set(names))
    if not wanted:
        return {}
    rows: list[tuple[str, str, str]] = []
    path = _sqlite_path(url)
    try:
        if path is not None:
            if path == ":memory:" or not os.path.exists(path):
                return {}
            import sqlite3  # only for a store that is there: check's start-up pays nothing

            conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=5)
            try:
                rows = conn.execute(_QUERY.format(",".join("?" * len(wanted))),
                                    wanted).fetchall()
            finally:
                conn.close()
        else:
            from sqlalchemy import bindparam, create_engine, text

            engine = create_engine(url)
            try:
                with engine.connect() as conn:
                    query = text(_QUERY.format(":names")).bindparams(
                        bindparam("names", expanding=True))
                    rows = [tuple(r) for r in conn.execute(query, {"names": wanted})]
            finally:
                engine.dispose()
    except Exception:
        return {}
    found: dict[tuple[str, str], set[str]] = {}
    for name, version, digest in rows:
        found.setdefault((name, version), set()).add(digest)
    return found
