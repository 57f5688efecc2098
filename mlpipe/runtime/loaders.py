"""Watching how a step body feeds PyTorch: each ``DataLoader`` it iterates, its data set's
size and its sampler (a ``DistributedSampler`` deals each rank its own part; a plain one gives
every rank the whole data set), and whether a process group was formed by then. The
coordination check tells plain DDP from independent copies with it, for code that never calls
mlpipe's helpers (docs/step-record.md, ``data_loaders``).

Never imports torch: ``DataLoader.__iter__`` is wrapped once the body's own code has imported
``torch.utils.data`` (now, or later through an import hook), and only attributes are read;
iterating a sampler here could move a random generator the training relies on.
"""
from __future__ import annotations

import sys
import threading
from typing import Any

from mlpipe.runtime.afterimport import AfterImport

_MODULE = "torch.utils.data.dataloader"
#: Loaders one process keeps in its record (the first ones iterated).
MAX_LOADERS = 100

_LOCK = threading.Lock()
_SEEN: dict[int, dict[str, Any]] = {}
_ACTIVE = False
_PATCHED = False
_LAST: list[dict[str, Any]] = []


def last_population() -> int | None:
    """How many examples one pass of the loader this rank iterated last reads, where its
    sampler reads the whole (sub)set; None for a sampler that deals out parts, or none seen."""
    entry = _LAST[0] if _LAST else None
    if entry is None or not entry.get("whole"):
        return None
    size = entry.get("subset_size")
    return size if isinstance(size, int) else entry.get("dataset_size")


def _size(obj: Any) -> int | None:
    try:
        n = len(obj)
    except Exception:  # an IterableDataset, or a len() that raises
        return None
    return n if isinstance(n, int) else None


def _digest(indices: Any) -> str | None:
    """Which examples a ``Subset`` holds (ranks that each took their own part differ here)."""
    from mlpipe.digests import digest_bytes

    try:
        text = ",".join(str(int(i)) for i in indices)
    except Exception:
        # the user's own index object, read inside their DataLoader.__iter__: one that cannot
        # say which examples it holds is recorded as unknown (None), and the training loop
        # that iterates it must never fail because mlpipe looked
        return None
    return digest_bytes(text.encode("utf-8"))


def _describe(loader: Any) -> dict[str, Any]:
    """One loader as the record keeps it: data set, size, sampler, its replicas and rank, and
    whether one pass of it reads the whole data set (null: this sampler cannot say)."""
    dataset = getattr(loader, "dataset", None)
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and type(batch_sampler).__name__ != "BatchSampler":
        sampler = batch_sampler   # a custom batch sampler decides the indices itself
    size = _size(dataset)
    kind = type(sampler).__name__ if sampler is not None else None
    replicas = getattr(sampler, "num_replicas", None)
    sampler_rank = getattr(sampler, "rank", None)
    replicas = replicas if isinstance(replicas, int) else None
    whole: bool | None = None
    if replicas is not None:
        whole = replicas == 1
    elif kind == "SequentialSampler":
        whole = size is not None
    elif kind == "RandomSampler":
        whole = (size is not None and not getattr(sampler, "replacement", False)
                 and _size(sampler) == size)
    subset = getattr(dataset, "indices", None)
    return {"dataset": type(dataset).__name__ if dataset is not None else None,
            "dataset_size": size, "subset_size": _size(subset) if subset is not None else None,
            "subset_digest": _digest(subset) if subset is not None else None,
            "sampler": kind, "num_replicas": replicas,
            "sampler_rank": sampler_rank if isinstance(sampler_rank, int) else None,
            # a DistributedSampler's padded total (> dataset_size: examples dealt twice)
            "total_size": _int(getattr(sampler, "total_size", None)),
            "drop_last": _bool(getattr(sampler, "drop_last", None)) if replicas else None,
            "whole": whole, "passes": 0, "process_group": _process_group()}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _process_group() -> dict[str, Any] | None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        return {"backend": str(dist.get_backend()), "world_size": int(dist.get_world_size()),
                "rank": int(dist.get_rank())}
    except Exception:
        # asked from inside the user's DataLoader.__iter__: a process group that cannot say
        # (torch raises RuntimeError/ValueError while one is being set up or torn down, and a
        # third-party backend may raise anything) is recorded as unknown (None) and asked
        # again on the next pass (_note), never failing the training step
        return None


def _note(loader: Any) -> None:
    if not _ACTIVE:
        return
    with _LOCK:
        entry = _SEEN.get(id(loader))
        if entry is None:
            if len(_SEEN) >= MAX_LOADERS:
                return
            entry = _SEEN[id(loader)] = _describe(loader)
        entry["passes"] += 1
        _LAST[:] = [entry]
        if entry["process_group"] is None:
            entry["process_group"] = _process_group()


def _patch(module: Any) -> None:
    global _PATCHED
    cls = getattr(module, "DataLoader", None)
    if _PATCHED or cls is None:
        return
    original = cls.__iter__

    def __iter__(self: Any) -> Any:
        try:
            _note(self)
        except Exception:  # never let the watching break the step
            pass
        return original(self)

    __iter__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__iter__ = __iter__
    _PATCHED = True


#: Patches ``torch.utils.data.dataloader`` as soon as it has been executed, when the body
#: imports torch only after the watching began.
_FINDER = AfterImport(lambda name: name == _MODULE, lambda _name, module: _patch(module))


def start() -> None:
    """Begin watching this process's data loaders (a new step: what was seen is forgotten)."""
    global _ACTIVE
    with _LOCK:
        _SEEN.clear()
        _LAST.clear()
        _ACTIVE = True
    module = sys.modules.get(_MODULE)
    if module is not None:
        _patch(module)
    elif not _PATCHED and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def stop() -> dict[str, Any]:
    """Stop watching; ``{"data_loaders": [...] or None}`` for the rank's record (None: the body
    iterated no PyTorch DataLoader, or torch was never imported)."""
    global _ACTIVE
    with _LOCK:
        _ACTIVE = False
        found = list(_SEEN.values())
    if _FINDER in sys.meta_path and _PATCHED:
        sys.meta_path.remove(_FINDER)
    if not found:
        return {"data_loaders": None}
    return {"data_loaders": found}


__all__ = ["MAX_LOADERS", "last_population", "start", "stop"]
