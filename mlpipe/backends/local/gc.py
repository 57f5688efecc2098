"""Retention: ``mlpipe gc`` frees the artifact store's space and the scratch folders, keeping
what the store says a protected candidate or a running run needs (``evidence.retention``).

Removes files only, never a store row: the evidence of every run stays, and a step whose
outputs were removed is simply re-run (reuse re-verifies outputs before it trusts them).
Holds the artifact store's lock exclusively while it removes, so no run is filing or reusing.
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mlpipe.backends.local.cas import ArtifactStore, StoreBusy
from mlpipe.errors import UsageError
from mlpipe.evidence.records.reader import Reader
from mlpipe.evidence.records.retention import Retained, retained
from mlpipe.evidence.storage.config import StoreConfig
from mlpipe.evidence.storage.roots import remove_path


@dataclass(slots=True)
class Removal:
    """One thing gc removes (or would): an artifact by digest, or a scratch folder."""

    path: str
    size: int
    digest: str | None = None
    last_used: datetime | None = None


@dataclass(slots=True)
class GcReport:
    """What ``collect`` found and, unless a dry run, removed."""

    dry_run: bool
    older_than_days: float | None
    artifacts: list[Removal] = field(default_factory=list)
    scratch: list[Removal] = field(default_factory=list)
    kept_protected: int = 0
    kept_recent: int = 0
    candidates: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)

    @property
    def freed(self) -> int:
        return sum(r.size for r in self.artifacts) + sum(r.size for r in self.scratch)

    def to_dict(self) -> dict:
        return {"format": "mlpipe.gc/1", "dry_run": self.dry_run,
                "older_than_days": self.older_than_days, "freed_bytes": self.freed,
                "artifacts": [{"digest": r.digest, "path": r.path, "size": r.size,
                               "last_used": r.last_used.isoformat() if r.last_used else None}
                              for r in self.artifacts],
                "scratch": [{"path": r.path, "size": r.size} for r in self.scratch],
                "kept_protected": self.kept_protected, "kept_recent": self.kept_recent,
                "protected_candidates": self.candidates, "rejected_candidates": self.rejected,
                "running_runs": self.running}


def collect(location: StoreConfig, *, older_than_days: float | None = None,
            dry_run: bool = False) -> GcReport:
    """Remove (``dry_run``: only list) what no protected candidate or running run needs.

    Args:
        location: the store and its folders (``mlpipe.evidence.locate()``).
        older_than_days: keep artifacts a step run consumed or produced (or, unknown to the
            store, that were filed) within this many days; None: only protection keeps one.
        dry_run: report, remove nothing.

    Returns:
        The report: each artifact and scratch folder removed, with sizes, and what was kept.

    Raises:
        UsageError: a negative ``older_than_days``, or (removing) a run holds the store.

    Example:
        >>> report = collect(locate(), older_than_days=30, dry_run=True)
        >>> report.freed
        18204731
    """
    if older_than_days is not None and not older_than_days >= 0:
        raise UsageError(f"--older-than {older_than_days:g} is not a number of days of 0 or "
                         f"more", hint="give --older-than 30 to keep what was used in 30 days")
    cas = ArtifactStore(location.artifacts)
    if dry_run:
        return _collect(location, cas, older_than_days, dry_run=True)
    try:
        with cas.lock(exclusive=True, wait=False):
            return _collect(location, cas, older_than_days, dry_run=False)
    except StoreBusy:
        raise UsageError(f"a run is using the artifact store {location.artifacts}; nothing "
                         f"was removed",
                         hint="run `mlpipe gc` again when no run is running (`mlpipe gc "
                              "--dry-run` shows what it would free meanwhile)") from None


def _collect(location: StoreConfig, cas: ArtifactStore, days: float | None, *,
             dry_run: bool) -> GcReport:
    with Reader.open(location.url) as s:
        kept = retained(s)
    report = GcReport(dry_run, days, candidates=kept.candidates, rejected=kept.rejected,
                      running=kept.running)
    now = datetime.now(UTC).replace(tzinfo=None)
    cutoff = None if days is None else now - timedelta(days=days)
    for digest, entry, leftover in _entries(cas.root):
        if leftover:  # a crash's staging folder: nothing names it
            report.scratch.append(Removal(entry, _size(entry)))
            continue
        if digest in kept.protected:
            report.kept_protected += 1
            continue
        used = _last_used(kept, digest, entry)
        if cutoff is not None and (used is None or used > cutoff):
            report.kept_recent += 1
            continue
        size = kept.sizes.get(digest)
        report.artifacts.append(Removal(entry, _size(entry) if size is None else size, digest,
                                        used))
    report.scratch += [Removal(p, _size(p)) for p in _idle_work(location.work, kept.running)]
    if not dry_run:
        for item in report.artifacts + report.scratch:
            _remove(item.path)
    return report


def _last_used(kept: Retained, digest: str, entry: str) -> datetime | None:
    """When a step run last used the artifact; for one the store does not name, when it was
    filed (the folder's time); None when neither is known."""
    used = kept.last_used.get(digest)
    if used is not None:
        return used
    try:
        return datetime.fromtimestamp(os.stat(entry).st_mtime, UTC).replace(tzinfo=None)
    except OSError:
        return None


def _entries(root: Path) -> Iterator[tuple[str, str, bool]]:
    """``(digest, entry folder, leftover)`` for each entry of the artifact root
    (``<algo>/<2 hex>/<hex>``); ``leftover`` (digest ``""``) for a staging folder a crash
    left. Paths stay strings: 10,000 ``Path`` objects would cost more than the walk."""
    try:
        algos = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)
                 and not e.name.startswith(".")]
    except OSError:
        return
    for algo in algos:
        with os.scandir(algo.path) as shards:
            prefixes = [e for e in shards if e.is_dir(follow_symlinks=False)]
        for prefix in prefixes:
            with os.scandir(prefix.path) as it:
                for entry in it:
                    if entry.name.startswith("."):
                        yield "", entry.path, True
                    elif entry.name.startswith(prefix.name):
                        yield f"{algo.name}:{entry.name}", entry.path, False


def _idle_work(work: Path, running: list[str]) -> list[str]:
    """Scratch folders of runs that are not running (a killed executor's leftovers)."""
    try:
        names = [e.name for e in os.scandir(work) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return [str(work / n) for n in sorted(names) if n not in set(running)]


def _size(path: str) -> int:
    total = 0
    try:
        if not os.path.isdir(path) or os.path.islink(path):
            return os.lstat(path).st_size
        for folder, _, files in os.walk(path):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except OSError:
                    pass
    except OSError:
        pass
    return total


def _remove(entry: str) -> None:
    """Take the entry out of its name first (one rename), so nothing ever sees half of it."""
    path = Path(entry)
    doomed = path.with_name(f".gc.{path.name}.{secrets.token_hex(4)}")
    try:
        os.rename(path, doomed)
    except FileNotFoundError:
        return
    except OSError:
        doomed = path
    remove_path(doomed)


def human(size: int) -> str:
    """``1536`` -> ``'1.5 kB'``."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


__all__ = ["GcReport", "Removal", "collect", "human"]
