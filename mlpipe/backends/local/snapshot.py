"""Content snapshots of files and folders: BLAKE3 digests with a stat cache.

A folder's digest covers a sorted manifest of relative path, size and file digest. The stat
cache (path, size, mtime, ctime, inode) lets an unchanged file skip re-reading; it is only a
cache: any trouble with it falls back to hashing. Knows nothing of steps or the store.
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import blake3

ALGO = "blake3"
_MMAP_FROM = 1 << 20          # files this large are hashed from a memory map, multithreaded
_RACY_SECONDS = 2.0           # a file modified this recently may change again within its mtime
_FOLDER_HEADER = b"mlpipe-folder-v1\n"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a path held: ``digest`` (``blake3:<hex>``), total bytes, file count, kind."""

    digest: str
    size: int
    file_count: int
    kind: str  # "file" or "folder"


def hash_file(path: str, size: int) -> str:
    """The BLAKE3 hex digest of one file's bytes."""
    if size >= _MMAP_FROM:
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
        hasher.update_mmap(path)
        return hasher.hexdigest()
    with open(path, "rb") as fh:
        return blake3.blake3(fh.read()).hexdigest()


class StatCache:
    """Remembered digests keyed by (path, size, mtime, ctime, inode), in a SQLite file.

    Safe to share between threads. ``flush()`` writes what was learned.

    Args:
        path: the cache file; None keeps the cache in memory only.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[int, int, int, int, str]] = {}
        self._db: sqlite3.Connection | None = None
        if path is not None:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(path), timeout=60, check_same_thread=False,
                                           isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS stat (path TEXT PRIMARY KEY, "
                                 "size INTEGER, mtime INTEGER, ctime INTEGER, ino INTEGER, "
                                 "digest TEXT)")
            except sqlite3.Error:
                self._db = None

    def tree(self, root: str) -> dict[str, tuple[int, int, int, int, str]]:
        """Every remembered entry at or under ``root``."""
        found: dict[str, tuple[int, int, int, int, str]] = {}
        with self._lock:
            if self._db is not None:
                try:
                    rows = self._db.execute(
                        "SELECT path, size, mtime, ctime, ino, digest FROM stat "
                        "WHERE path = ? OR (path >= ? AND path < ?)",
                        (root, root + os.sep, root + chr(ord(os.sep) + 1))).fetchall()
                    found = {r[0]: tuple(r[1:]) for r in rows}
                except sqlite3.Error:
                    pass
            prefix = root + os.sep
            found.update({p: v for p, v in self._pending.items()
                          if p == root or p.startswith(prefix)})
        return found

    def remember(self, entries: dict[str, tuple[int, int, int, int, str]]) -> None:
        with self._lock:
            self._pending.update(entries)

    def flush(self) -> None:
        with self._lock:
            if self._db is None or not self._pending:
                return
            try:
                with self._db:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany(
                        "INSERT OR REPLACE INTO stat VALUES (?, ?, ?, ?, ?, ?)",
                        [(p, *v) for p, v in self._pending.items()])
            except sqlite3.Error:
                return
            self._pending.clear()

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None


def _walk(root: str) -> list[tuple[str, str, os.stat_result]]:
    """(relative posix path, absolute path, stat) of every file under ``root``."""
    out: list[tuple[str, str, os.stat_result]] = []
    stack = [("", root)]
    while stack:
        rel, folder = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                child_rel = f"{rel}{entry.name}"
                if entry.is_dir():
                    stack.append((child_rel + "/", entry.path))
                elif entry.is_file():
                    out.append((child_rel, entry.path, entry.stat()))
    out.sort(key=lambda t: t[0])
    return out


def snapshot(path: str | os.PathLike[str], cache: StatCache | None = None) -> Snapshot:
    """Hash a file or a folder (recursively), reusing cached digests of unchanged files.

    Raises:
        FileNotFoundError: ``path`` does not exist.

    Example:
        >>> snapshot("data/split.csv").digest
        'blake3:5f1c...'
    """
    root = os.path.abspath(os.fspath(path))
    st = os.stat(root)
    known = cache.tree(root) if cache is not None else {}
    fresh: dict[str, tuple[int, int, int, int, str]] = {}
    settled = time.time() - _RACY_SECONDS

    def digest_of(abspath: str, s: os.stat_result) -> str:
        hit = known.get(abspath)
        if hit is not None and hit[:4] == (s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino):
            return hit[4]
        digest = hash_file(abspath, s.st_size)
        if s.st_mtime < settled and s.st_ctime < settled:
            fresh[abspath] = (s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino, digest)
        return digest

    if not os.path.isdir(root):
        result = Snapshot(f"{ALGO}:{digest_of(root, st)}", st.st_size, 1, "file")
    else:
        manifest = blake3.blake3(_FOLDER_HEADER)
        size = 0
        files = _walk(root)
        for rel, abspath, s in files:
            manifest.update(f"{rel}\0{s.st_size}\0{digest_of(abspath, s)}\n".encode())
            size += s.st_size
        result = Snapshot(f"{ALGO}:{manifest.hexdigest()}", size, len(files), "folder")
    if cache is not None and fresh:
        cache.remember(fresh)
    return result
