"""Artifact roots: where content-addressed artifacts live, named by a root-relative key.

A key is ``<algo>/<2 hex>/<hex>/<name>`` (``blake3/c1/c1f0.../data``), the same on every
machine; the store holds keys, never one user's absolute path. A run resolves a key against
its OWN root (a local folder: steps read files), and what that root lacks it fetches from the
shared root, when one is configured (a folder everyone can reach, or an Azure Blob Storage
container), verifying the digest before the copy may be used. Knows digests and files; knows
nothing of steps, runs or the store's rows. ``mlpipe gc`` and the executor use only
``ArtifactRoots``: ``key_of``, ``path_of``, ``resolve``, ``publish`` and ``keys``. A pipeline
input read in place is published to the shared root by content too (``input_key``), so that a
home that never saw the folder it was read from verifies it by its digest.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mlpipe.digests.snapshot import StatCache, snapshot

#: A root-relative key: ``<algo>/<2 hex>/<hex>/<name>`` with the hex the digest's.
KEY = re.compile(r"(?P<algo>[a-z0-9]+)/(?P<h2>[0-9a-f]{2})/(?P<hex>[0-9a-f]{16,})"
                 r"/(?P<name>(?!\.\.?$)[^/\\]+)")
_KEY_AT_END = re.compile(r"(?:^|/)(" + KEY.pattern + r")/?$")


def entry_of(digest: str) -> str:
    """The key's folder part for ``digest``: ``blake3:c1f0...`` -> ``blake3/c1/c1f0...``."""
    algo, _, hexdigest = digest.partition(":")
    return f"{algo}/{hexdigest[:2]}/{hexdigest}"


def key_of(digest: str, name: str) -> str:
    """The key of an artifact with content ``digest`` whose file or folder is called ``name``.

    Example:
        >>> key_of("blake3:c1f0aa55aa55aa55aa55", "data")
        'blake3/c1/c1f0aa55aa55aa55aa55/data'
    """
    return f"{entry_of(digest)}/{name}"


#: The name of a pipeline input's snapshot in a root (its key: ``<algo>/<2 hex>/<hex>/input``).
INPUT_NAME = "input"


def input_key(digest: str) -> str:
    """The key an input snapshot with content ``digest`` is published under, whatever folder
    or file name it was read from (the digest does not depend on it)."""
    return key_of(digest, INPUT_NAME)


def key_in(location: str, digest: str) -> str | None:
    """The key an absolute location inside some artifact root stands for (whoever's root it
    was), or None when ``location`` is not an artifact root's entry for ``digest``.

    Example:
        >>> key_in("/home/ana/proj/evidence/artifacts/blake3/c1/c1f0aa55aa55aa55aa55/data",
        ...        "blake3:c1f0aa55aa55aa55aa55")
        'blake3/c1/c1f0aa55aa55aa55aa55/data'
    """
    found = _KEY_AT_END.search(location.replace("\\", "/"))
    if found is None:
        return None
    key = KEY.fullmatch(found.group(1))
    if key is None or f"{key['algo']}:{key['hex']}" != digest or key["hex"][:2] != key["h2"]:
        return None
    return found.group(1)


class SharedRoot(Protocol):
    """A root several machines reach: artifacts are published to it and fetched from it."""

    @property
    def name(self) -> str:
        """How the root is named to users (a folder path or a URL without credentials)."""
        ...

    def has(self, key: str) -> bool: ...

    def fetch(self, key: str, into: Path) -> bool:
        """Copy the artifact at ``key`` to the path ``into`` (absent); False if there is none."""
        ...

    def publish(self, key: str, path: Path) -> None:
        """Store the artifact at ``path`` under ``key`` unless it is there already."""
        ...

    def keys(self) -> Iterator[str]: ...


@dataclass(frozen=True, slots=True)
class FolderRoot:
    """A shared folder (a network file system everyone mounts) as the shared root."""

    path: Path

    @property
    def name(self) -> str:
        return str(self.path)

    def has(self, key: str) -> bool:
        return os.path.lexists(self.path / key)

    def fetch(self, key: str, into: Path) -> bool:
        source = self.path / key
        if not os.path.lexists(source):
            return False
        _copy(source, into)
        return True

    def publish(self, key: str, path: Path) -> None:
        target = self.path / key
        if os.path.lexists(target):
            return
        target.parent.parent.mkdir(parents=True, exist_ok=True)
        staging = target.parent.parent / f".{target.parent.name}.{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            _copy(path, staging / target.name)
            try:
                os.rename(staging, target.parent)
            except OSError:  # another home published the same content first
                pass
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def keys(self) -> Iterator[str]:
        yield from _keys_under(self.path)


class ArtifactRoots:
    """This run's own artifact root (a local folder) and the shared root, if any.

    Args:
        own: the folder this home files artifacts in and reads them from.
        shared: a root every home reaches (see ``shared_root``), or None.
        cache: stat cache for verifying what is stored.

    Example:
        >>> roots = ArtifactRoots(Path("evidence/artifacts"))
        >>> roots.resolve("blake3/c1/c1f0aa55aa55aa55aa55/data", "blake3:c1f0aa55aa55aa55aa55")
        PosixPath('evidence/artifacts/blake3/c1/c1f0aa55aa55aa55aa55/data')
    """

    def __init__(self, own: str | os.PathLike[str], shared: SharedRoot | None = None,
                 cache: StatCache | None = None) -> None:
        self.own = Path(own)
        self.shared = shared
        self.cache = cache
        #: why the shared root stopped answering (then it is not asked again by this object)
        self.unreachable: str | None = None

    def path_of(self, key: str) -> Path:
        """Where ``key`` lives (or would live) in the own root."""
        if KEY.fullmatch(key) is None:
            raise ValueError(f"{key!r} is not an artifact key")
        return self.own / key

    def intact(self, path: Path, digest: str) -> bool:
        """Whether ``path`` exists and still has content ``digest``."""
        try:
            return os.path.lexists(path) and snapshot(path, self.cache).digest == digest
        except (OSError, ValueError):
            return False

    def resolve(self, key: str, digest: str) -> Path | None:
        """The own root's intact copy of ``key``, fetched from the shared root (and verified)
        when the own root lacks it or holds a damaged copy; None when neither has it intact.
        Never raises for what a root lacks or cannot give, nor for a malformed key (a store
        row edited by hand): nothing is found for it."""
        if KEY.fullmatch(key) is None:
            return None
        path = self.path_of(key)
        if self.intact(path, digest):
            return path
        if self.shared is None or self.unreachable is not None:
            return None
        staging = path.parent.parent / f".{path.parent.name}.fetch.{secrets.token_hex(4)}"
        try:
            staging.mkdir(parents=True)
            try:
                if not self.shared.fetch(key, staging / path.name):
                    return None
            except OSError as exc:
                self.unreachable = str(exc)
                return None
            if not self.intact(staging / path.name, digest):
                return None  # a damaged shared copy is never used
            if os.path.lexists(path.parent):
                remove_path(path.parent)
            try:
                os.rename(staging, path.parent)
            except OSError:  # another run fetched it at the same moment
                pass
            return path if self.intact(path, digest) else None
        except OSError:
            return None
        finally:
            remove_path(staging)

    def key_for(self, location: str, digest: str) -> str | None:
        """The key an artifact's recorded location stands for: the location itself when it is
        a key, an artifact root's entry for ``digest`` (an absolute path recorded before
        keys existed, in whoever's root), else None (a pipeline input's own path)."""
        if KEY.fullmatch(location):
            return location
        return key_in(location, digest)

    def local(self, location: str, digest: str) -> str | None:
        """Where to read an artifact recorded at ``location`` here: its key resolved against
        the own root (fetched when it lacks it; None when no root has it intact), or
        ``location`` itself when it is not in a root (a pipeline input)."""
        key = self.key_for(location, digest)
        if key is None:
            return location
        found = self.resolve(key, digest)
        return None if found is None else str(found)

    def where(self, key: str) -> str:
        """Where ``key`` was looked for, for a message."""
        shared = f" or the shared root {self.shared.name}" if self.shared is not None else ""
        return f"{key} in the artifact root {self.own}{shared}"

    def publish(self, key: str, path: str | os.PathLike[str] | None = None) -> str | None:
        """Copy the own root's ``key`` (or ``path``: an input snapshot read in place) to the
        shared root, unless it holds it already; the reason when that failed (the artifact
        stays usable here; other homes re-run the step instead)."""
        if self.shared is None:
            return None
        try:
            self.shared.publish(key, Path(path) if path is not None else self.path_of(key))
        except Exception as exc:  # any storage failure is the same news here
            return (f"could not publish {key} to the shared artifact root "
                    f"{self.shared.name}: {exc}")
        return None

    def keys(self) -> Iterator[str]:
        """Every key the own root holds."""
        yield from _keys_under(self.own)


def configured(start: str | os.PathLike[str] | None = None,
               cache: StatCache | None = None) -> ArtifactRoots:
    """The artifact roots the configuration names for the project at ``start`` (default:
    cwd): ``mlpipe.evidence.storage.config.locate``."""
    from mlpipe.evidence.storage.config import locate

    found = locate(start)
    return ArtifactRoots(found.artifacts, shared_root(found.shared_artifacts), cache)


def shared_root(spec: str | None, *, anchor: Path | None = None) -> SharedRoot | None:
    """The shared root ``spec`` names: a folder path (relative to ``anchor``), or an Azure Blob
    Storage container URL (``https://<account>.blob.core.windows.net/<container>[/prefix]``,
    or ``azure-blob://<container>[/prefix]`` with the account from
    ``AZURE_STORAGE_CONNECTION_STRING``); None for no shared root."""
    if not spec:
        return None
    if "://" in spec:
        from mlpipe.evidence.storage.blobroot import BlobRoot

        return BlobRoot.from_url(spec)
    path = Path(spec).expanduser()
    return FolderRoot((anchor / path) if anchor is not None and not path.is_absolute() else path)


def _keys_under(root: Path) -> Iterator[str]:
    if not root.is_dir():
        return
    for algo in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for h2 in sorted(p for p in algo.iterdir() if p.is_dir() and len(p.name) == 2):
            for entry in sorted(p for p in h2.iterdir() if not p.name.startswith(".")):
                names = os.listdir(entry) if entry.is_dir() else []
                if len(names) == 1:
                    key = f"{algo.name}/{h2.name}/{entry.name}/{names[0]}"
                    if KEY.fullmatch(key):
                        yield key


def _copy(source: Path, target: Path) -> None:
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


def remove_path(path: Path) -> None:
    """Remove a file, a link or a folder tree; gone already is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


__all__ = ["KEY", "ArtifactRoots", "FolderRoot", "SharedRoot", "configured", "entry_of",
           "key_in", "key_of", "shared_root"]
