"""Why a store's write failed for want of room: no space left on the SQLite file's filesystem,
or the file at this process's file-size limit (``ulimit -f``), or the database server saying
its disk is full. Asks the operating system what it can see; never guesses beyond it.
"""
from __future__ import annotations

import os
import resource

#: What SQLite (and PostgreSQL) say when a write found no room, in their own words.
_SIGNS = ("disk i/o error", "database or disk is full", "no space left", "file too large",
          "could not extend file", "could not write")
#: Free space under which a failed SQLite write is put down to the filesystem being full
#: (a transaction's journal needs room too; SQLite's pages are 4 KiB).
LOW_SPACE = 8 << 20


def _files(database: str) -> list[str]:
    return [p for p in (database, database + "-journal", database + "-wal")
            if os.path.exists(p)]


def want_of_room(database: str | None, error: str) -> tuple[str, str] | None:
    """``(cause, hint)`` when ``error`` (the database's words) is a failed write and the
    system shows why; None when it is another failure or no cause can be seen.

    Args:
        database: the SQLite file (None: a database server, whose own words are all there is).
        error: the error's text.

    Example:
        >>> want_of_room("/full/store.sqlite", "disk I/O error")   # doctest: +SKIP
        ('no space is left on the filesystem of /full (12288 bytes free)', 'free space ...')
    """
    said = error.lower()
    if not any(sign in said for sign in _SIGNS):
        return None
    if database is None:
        if "no space left" in said or "could not extend file" in said:
            return ("the database server reports that its disk is full",
                    "free space on the database server's data volume (its administrator)")
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        for path in _files(database):
            size = os.path.getsize(path)
            if size + 4096 > limit:
                return (f"{os.path.basename(path)} is {size} bytes and this process may write "
                        f"files of at most {limit} bytes (its file-size limit, ulimit -f)",
                        "raise the file-size limit (ulimit -f unlimited) for mlpipe, or move "
                        "the store (MLPIPE_STORE_URL)")
    folder = os.path.dirname(os.path.abspath(database))
    try:
        fs = os.statvfs(folder)
    except OSError:
        return None
    free = fs.f_bavail * fs.f_frsize
    if free < LOW_SPACE:
        return (f"no space is left on the filesystem of {folder} ({free} bytes free)",
                "free space on that filesystem (mlpipe gc removes unprotected artifacts), or "
                "move the store (MLPIPE_STORE_URL)")
    return None


__all__ = ["LOW_SPACE", "want_of_room"]
