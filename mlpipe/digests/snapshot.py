"""Content snapshots of files and folders: BLAKE3 digests with a stat cache.

A folder's digest covers a sorted manifest of relative path, size and file digest. The stat
cache (path, size, mtime, ctime, inode) lets an unchanged file skip re-reading, and an
unchanged folder (the same listing of those stat fields) skip even the per-file lookups; it is
only a cache: any trouble with it falls back to hashing. Knows nothing of steps or the store.
"""
from __future__ import annotations

import os
import pickle
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import blake3

from mlpipe.digests import FOLDER_HEADER, files_under, manifest_line

ALGO = "blake3"
_MMAP_FROM = 1 << 20          # files this large are hashed from a memory map, multithreaded
_SMALL_READ = 1 << 16         # a file shorter than this is read in one os.read
_RACY_SECONDS = 2.0           # a file modified this recently may change again within its mtime


@dataclass(frozen=True, slots=True)
class ContentDigest:
    """What a path held: ``digest`` (``blake3:<hex>``), total bytes, file count, kind."""

    digest: str
    size: int
    file_count: int
    kind: str  # "file" or "folder"


def hash_file(path: str, size: int) -> str:
    """The BLAKE3 hex digest of one file's bytes.

    A large file is hashed from a memory map on every core; a small one is read with plain
    ``os.read`` calls (no file object), which is what many small files cost.
    """
    if size >= _MMAP_FROM:
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
        hasher.update_mmap(path)
        return hasher.hexdigest()
    fd = os.open(path, _READ_FLAGS)
    try:
        data = os.read(fd, size + 1)
        if len(data) > size:  # it grew since its stat: read to the end
            hasher = blake3.blake3(data)
            while chunk := os.read(fd, 1 << 20):
                hasher.update(chunk)
            return hasher.hexdigest()
    finally:
        os.close(fd)
    return blake3.blake3(data).hexdigest()


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)

# what a remembered file is: (size, mtime_ns, ctime_ns, inode, digest)
Entry = tuple[int, int, int, int, str]
# what a remembered folder is: (listing fingerprint, digest, size, file count)
FolderEntry = tuple[str, str, int, int]


class StatCache:
    """Remembered digests keyed by (path, size, mtime, ctime, inode), in a SQLite file, and
    remembered folder digests keyed by the fingerprint of their whole stat listing.

    Safe to share between threads. ``flush()`` writes what was learned.

    Args:
        path: the cache file; None keeps the cache in memory only.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, Entry] = {}
        self._pending_folders: dict[str, FolderEntry] = {}
        self._db: sqlite3.Connection | None = None
        if path is not None:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(path), timeout=60, check_same_thread=False,
                                           isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")  # only a cache: no fsync
                self._db.execute("CREATE TABLE IF NOT EXISTS stat (path TEXT PRIMARY KEY, "
                                 "size INTEGER, mtime INTEGER, ctime INTEGER, ino INTEGER, "
                                 "digest TEXT)")
                self._db.execute("CREATE TABLE IF NOT EXISTS folder (path TEXT PRIMARY KEY, "
                                 "listing TEXT, digest TEXT, size INTEGER, "
                                 "file_count INTEGER)")
            except sqlite3.Error:
                self._db = None

    def tree(self, root: str) -> dict[str, Entry]:
        """Every remembered file entry at or under ``root``."""
        found: dict[str, Entry] = {}
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

    def knows(self, root: str) -> bool:
        """Whether any file at or under ``root`` is remembered (one indexed lookup)."""
        prefix = root + os.sep
        with self._lock:
            if any(p == root or p.startswith(prefix) for p in self._pending):
                return True
            if self._db is None:
                return False
            try:
                return self._db.execute(
                    "SELECT 1 FROM stat WHERE path = ? OR (path >= ? AND path < ?) LIMIT 1",
                    (root, prefix, root + chr(ord(os.sep) + 1))).fetchone() is not None
            except sqlite3.Error:
                return False

    def folder(self, root: str) -> FolderEntry | None:
        """The remembered digest of folder ``root`` with the listing it was taken from."""
        with self._lock:
            hit = self._pending_folders.get(root)
            if hit is not None or self._db is None:
                return hit
            try:
                row = self._db.execute("SELECT listing, digest, size, file_count FROM folder "
                                       "WHERE path = ?", (root,)).fetchone()
            except sqlite3.Error:
                return None
        return None if row is None else tuple(row)

    def remember(self, entries: dict[str, Entry],
                 folders: dict[str, FolderEntry] | None = None) -> None:
        with self._lock:
            self._pending.update(entries)
            self._pending_folders.update(folders or {})

    def flush(self) -> None:
        with self._lock:
            if self._db is None or not (self._pending or self._pending_folders):
                return
            try:
                with self._db:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany(
                        "INSERT OR REPLACE INTO stat VALUES (?, ?, ?, ?, ?, ?)",
                        [(p, *v) for p, v in self._pending.items()])
                    self._db.executemany(
                        "INSERT OR REPLACE INTO folder VALUES (?, ?, ?, ?, ?)",
                        [(p, *v) for p, v in self._pending_folders.items()])
            except sqlite3.Error:
                return
            self._pending.clear()
            self._pending_folders.clear()

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None


# a file as the walk saw it: (relative posix path, size, mtime_ns, ctime_ns, inode)
Row = tuple[str, int, int, int, int]


def _walk(root: str) -> tuple[list[Row], list[str]]:
    """Every file under ``root``: its row and, in the same order, its absolute path, in the
    order the file system lists them (not sorted)."""
    rows: list[Row] = []
    paths: list[str] = []
    for rel, entry in files_under(root):
        st = entry.stat()
        rows.append((rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
        paths.append(entry.path)
    return rows, paths


def snapshot(path: str | os.PathLike[str], cache: StatCache | None = None) -> ContentDigest:
    """Hash a file or a folder (recursively), reusing cached digests of unchanged files.

    Raises:
        FileNotFoundError: ``path`` does not exist.

    Example:
        >>> snapshot("data/split.csv").digest
        'blake3:5f1c...'
    """
    root = os.path.abspath(os.fspath(path))
    st = os.stat(root)
    settled = time.time_ns() - int(_RACY_SECONDS * 1e9)
    if not os.path.isdir(root):
        known = cache.tree(root) if cache is not None else {}
        fresh: dict[str, Entry] = {}
        row = ("", st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        digest = _digest_of(root, row, known, fresh, settled)
        if cache is not None and fresh:
            cache.remember(fresh)
        return ContentDigest(f"{ALGO}:{digest}", st.st_size, 1, "file")
    if cache is None:
        return _hash_folder(sorted(_names(root)))[0]
    hit = cache.folder(root)
    if hit is None and not cache.knows(root):  # nothing of it remembered: read every file
        result, rows, fresh, whole = _read_folder(_names(root), settled)
        if whole:
            cache.remember(fresh, {root: (_listing(rows), result.digest, result.size,
                                          len(rows))})
        else:
            cache.remember(fresh)
        return result
    rows, paths = _walk(root)
    listing = _listing(rows)
    if hit is not None and hit[0] == listing:  # the same stat listing: nothing changed
        return ContentDigest(hit[1], hit[2], hit[3], "folder")
    known = cache.tree(root)
    fresh = {}
    manifest = blake3.blake3(FOLDER_HEADER)
    size = 0
    for row, abspath in sorted(zip(rows, paths)):
        digest = _digest_of(abspath, row, known, fresh, settled)
        manifest.update(manifest_line(row[0], row[1], digest).encode())
        size += row[1]
    result = ContentDigest(f"{ALGO}:{manifest.hexdigest()}", size, len(rows), "folder")
    whole = all(r[2] < settled and r[3] < settled for r in rows)
    cache.remember(fresh, {root: (listing, result.digest, result.size, len(rows))}
                   if whole else None)
    return result


def _listing(rows: list[Row]) -> str:
    """The fingerprint of a folder's stat listing (rows in the order the file system lists
    them): equal to a remembered one, nothing in the folder changed."""
    return blake3.blake3(pickle.dumps(rows, protocol=5)).hexdigest()


def _names(root: str) -> list[tuple[str, str]]:
    """Every file under ``root`` as (relative posix path, absolute path), in the order the file
    system lists them (as ``_walk``); no stat."""
    return [(rel, entry.path) for rel, entry in files_under(root)]




def _hash_folder(files: list[tuple[str, str]]) -> tuple[ContentDigest, list[Row], list[str]]:
    """The snapshot of a folder holding ``files`` (sorted (relative path, absolute path)
    pairs), every file read whole, with each file's digest. One tight loop: this is most of
    what many small files cost."""
    b3, read, close, open_, fstat = blake3.blake3, os.read, os.close, os.open, os.fstat
    lines: list[str] = []
    digests: list[str] = []
    total = 0
    for rel, path in files:
        fd = open_(path, _READ_FLAGS)
        try:
            data = read(fd, _SMALL_READ)
            size = len(data)
            if size < _SMALL_READ:
                digest = b3(data).hexdigest()
            else:  # a larger file
                size = fstat(fd).st_size
                if size >= _MMAP_FROM:
                    digest = hash_file(path, size)
                else:
                    hasher = b3(data)
                    size = len(data)
                    while chunk := read(fd, 1 << 20):
                        hasher.update(chunk)
                        size += len(chunk)
                    digest = hasher.hexdigest()
        finally:
            close(fd)
        lines.append(manifest_line(rel, size, digest))
        digests.append(digest)
        total += size
    manifest = blake3.blake3(FOLDER_HEADER)
    manifest.update("".join(lines).encode())
    return ContentDigest(f"{ALGO}:{manifest.hexdigest()}", total, len(files), "folder"), [], digests


def _read_folder(listed: list[tuple[str, str]], settled_ns: int
                 ) -> tuple[ContentDigest, list[Row], dict[str, Entry], bool]:
    """A folder nothing remembers, read in one loop in the order the file system lists it:
    its snapshot, its stat rows in that order (the open file's stat), the entries the stat
    cache may remember, and whether every file is settled (older than the racy window).

    The manifest is the one ``_hash_folder`` writes: its lines sorted afterwards, which sorts
    them by relative path (a path never holds NUL, the field separator)."""
    b3, read, close, open_, fstat = blake3.blake3, os.read, os.close, os.open, os.fstat
    lines: list[str] = []
    rows: list[Row] = []
    fresh: dict[str, Entry] = {}
    total = 0
    whole = True
    for rel, path in listed:
        fd = open_(path, _READ_FLAGS)
        try:
            st = fstat(fd)
            size, mtime, ctime, ino = st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino
            if size < _SMALL_READ:
                data = read(fd, size + 1)
                if len(data) > size:  # it grew since its stat: read to the end
                    hasher = b3(data)
                    while chunk := read(fd, 1 << 20):
                        hasher.update(chunk)
                    digest = hasher.hexdigest()
                else:
                    digest = b3(data).hexdigest()
            else:
                digest = hash_file(path, size)
        finally:
            close(fd)
        rows.append((rel, size, mtime, ctime, ino))
        if mtime < settled_ns and ctime < settled_ns:
            fresh[path] = (size, mtime, ctime, ino, digest)
        else:
            whole = False
        # the manifest records the stat size, as the cache does
        lines.append(manifest_line(rel, size, digest))
        total += size
    lines.sort()
    manifest = blake3.blake3(FOLDER_HEADER)
    manifest.update("".join(lines).encode())
    return (ContentDigest(f"{ALGO}:{manifest.hexdigest()}", total, len(rows), "folder"), rows,
            fresh, whole)


def _digest_of(abspath: str, row: Row, known: dict[str, Entry], fresh: dict[str, Entry],
               settled_ns: int) -> str:
    hit = known.get(abspath)
    if hit is not None and hit[:4] == row[1:]:
        return hit[4]
    digest = hash_file(abspath, row[1])
    if row[2] < settled_ns and row[3] < settled_ns:
        fresh[abspath] = (*row[1:], digest)
    return digest
