"""The content-addressed artifact store: finished outputs, filed under their digest.

An output enters only whole, by one rename, after its step succeeded; a half-written output
can never be found here. Knows snapshots; knows nothing of steps, runs or the evidence store.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from mlpipe.digests.snapshot import ContentDigest, StatCache, snapshot
from mlpipe.evidence.storage.roots import remove_path

#: The lock file in the root: runs hold it shared, ``mlpipe gc`` exclusively.
LOCK_NAME = ".lock"


class StoreBusy(OSError):
    """Another process holds the artifact store's lock the other way."""


class ArtifactStore:
    """Artifacts under ``root/<algo>/<2 hex>/<hex>/<name>``.

    Args:
        root: the store's folder (``evidence/artifacts`` by default).
        cache: stat cache used when verifying stored artifacts.
    """

    def __init__(self, root: str | os.PathLike[str], cache: StatCache | None = None) -> None:
        self.root = Path(root)
        self.cache = cache

    def key(self, location: str | os.PathLike[str]) -> str:
        """The root-relative key of ``location``, a path this store returned."""
        return Path(location).relative_to(self.root).as_posix()

    @contextlib.contextmanager
    def lock(self, *, exclusive: bool = False, wait: bool = True) -> Iterator[None]:
        """Hold the artifact store's lock: shared while a run files and reuses artifacts,
        exclusive while ``mlpipe gc`` removes them, so nothing is removed under a run.

        Raises:
            StoreBusy: ``wait`` is False and the lock is held the other way.
        """
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            try:
                fcntl.flock(fd, mode | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError as exc:
                raise StoreBusy(f"the artifact store {self.root} is in use") from exc
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def entry(self, digest: str) -> Path:
        algo, _, hexdigest = digest.partition(":")
        return self.root / algo / hexdigest[:2] / hexdigest

    def put(self, path: str | os.PathLike[str], snap: ContentDigest, *, alone: bool = False
            ) -> Path:
        """Move the finished output at ``path`` (already hashed as ``snap``) into the store.

        Args:
            alone: ``path``'s folder holds nothing else and is on the store's file system,
                so a new artifact can enter by renaming that folder (one rename).

        Returns:
            Where the artifact now lives. When the store already holds a good copy, that copy
            is kept and ``path`` is removed.
        """
        source = Path(path)
        entry = self.entry(snap.digest)
        if self.verify(entry, snap.digest):
            remove_path(source)
            return self.location(entry)
        entry.parent.mkdir(parents=True, exist_ok=True)
        if alone and not os.path.lexists(entry) and os.listdir(source.parent) == [source.name]:
            try:
                os.rename(source.parent, entry)
                return entry / source.name
            except OSError:  # another process filed it first, or another file system
                pass
        staging = entry.parent / f".{entry.name}.{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            os.rename(source, staging / source.name)
        except OSError:  # the root is on another file system than the step's work folder
            shutil.move(source, staging / source.name)
        if entry.exists():
            # a copy that failed verification: replace it (it was damaged or tampered with)
            doomed = entry.parent / f".{entry.name}.old.{secrets.token_hex(4)}"
            try:
                os.rename(entry, doomed)
                remove_path(doomed)
            except OSError:
                pass
        try:
            os.rename(staging, entry)
        except OSError:  # another process filed the same content first
            remove_path(staging)
        return self.location(entry)

    @staticmethod
    def location(entry: Path) -> Path:
        names = os.listdir(entry)
        if len(names) != 1:
            raise FileNotFoundError(f"artifact folder {entry} holds {len(names)} entries")
        return entry / names[0]

    def verify(self, entry_or_location: str | os.PathLike[str], digest: str) -> bool:
        """Whether the stored artifact still exists and still has content ``digest``."""
        path = Path(entry_or_location)
        try:
            target = self.location(path) if path == self.entry(digest) else path
            return snapshot(target, self.cache).digest == digest
        except OSError:
            return False


