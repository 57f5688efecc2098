"""The rank-level trace: what one rank of a step asked of its devices, its process group, its
samplers, its tracking server and its storage while the body ran, recorded into the rank's part
of the step record (``trace``; docs/step-record.md, "The rank-level trace").

Hooks are attributes replaced on modules the body uses (``torch.distributed``'s collectives,
``Tensor.to``, ``DistributedSampler.__iter__``, ``mlflow.log_*``, ``torch.save``, tarfile and
zipfile extraction, ``urllib.request.urlopen``, ``requests.Session.request``) once those
modules are imported, plus the ``shutil.unpack_archive`` audit event; never ``sys.settrace``.
A CUDA device requested on a machine without one is recorded and resolved to the CPU, so the
small correctness run goes on.
Must not import torch or mlflow itself; imports nothing above the runtime's record.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from mlpipe.runtime.afterimport import AfterImport

#: Set to "0" to switch the trace off (the record then says ``trace`` is unknown: null).
TRACE_ENV = "MLPIPE_TRACE"
COLLECTIVES = ("all_reduce", "broadcast", "barrier", "all_gather", "reduce", "gather",
               "scatter", "reduce_scatter", "all_to_all", "all_gather_object",
               "broadcast_object_list", "gather_object", "scatter_object_list")
_MLFLOW = ("start_run", "log_metric", "log_metrics", "log_param", "log_params",
           "log_artifact", "log_artifacts", "log_dict", "log_text", "set_tags", "set_tag")
#: Distinct entries one rank keeps per kind (a loop over many URLs or paths); past it, counted.
MAX_ENTRIES = 500
#: Indices a sampler's pass keeps one by one; past it, only their count.
MAX_INDICES = 100_000
_MLPIPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TORCH_MARK = os.sep + "torch" + os.sep


def enabled() -> bool:
    return os.environ.get(TRACE_ENV, "1") != "0"


class Trace:
    """One rank's trace, in memory; ``snapshot()`` is what its record part keeps."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.devices: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.collectives: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.samplers: list[dict[str, Any]] = []
        self.waiting: dict[str, Any] | None = None
        self.failed_in: dict[str, Any] | None = None
        self.hang: dict[str, Any] | None = None
        self.lost = 0
        self.current_cuda = 0
        self.longest_wait = 0.0
        self.population: int | None = None
        self.quiet = threading.local()

    def _count(self, table: dict, key: tuple, entry: dict[str, Any]) -> None:
        with self.lock:
            found = table.get(key)
            if found is None:
                if len(table) >= MAX_ENTRIES:
                    self.lost += 1
                    return
                found = table[key] = {**entry, "count": 0}
            found["count"] += 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"enabled": True, "method": "monkeypatch",
                    "devices": [dict(v) for v in self.devices.values()],
                    "collectives": [dict(v) for v in self.collectives.values()],
                    "samplers": [dict(v) for v in self.samplers],
                    "calls": [dict(v) for v in self.calls.values()],
                    "waiting": dict(self.waiting) if self.waiting else None,
                    "failed_in": self.failed_in, "hang": self.hang,
                    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                    "entries_lost": self.lost}


_TRACE: Trace | None = None


def active() -> Trace | None:
    return _TRACE


def site(depth: int = 2) -> str:
    """``file:line`` of the first frame of the user's code above the hook (not mlpipe's, not
    torch's, not the standard library's or an installed package's)."""
    frame = sys._getframe(depth)
    first = None
    while frame is not None:
        name = frame.f_code.co_filename
        if first is None:
            first = frame
        if not (name.startswith(_MLPIPE_DIR) or _library(name)):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return f"{first.f_code.co_filename}:{first.f_lineno}" if first is not None else "?"


_STDLIB = os.path.dirname(os.__file__) + os.sep


def _library(name: str) -> bool:
    return _TORCH_MARK in name or "site-packages" in name or name.startswith((_STDLIB, "<"))


def _from_mlpipe(depth: int) -> bool:
    """Whether the nearest caller outside the libraries is mlpipe's own code (its tracking
    calls MLflow, and MLflow's client speaks HTTP, on the ranks it chose)."""
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        if not _library(name) and not name.endswith("ranktrace.py"):
            return name.startswith(_MLPIPE_DIR)
        frame = frame.f_back
    return False


# --- collectives ---------------------------------------------------------------------------

def _collective(op: str, original: Any) -> Any:
    def traced(*args: Any, **kwargs: Any) -> Any:
        trace = _TRACE
        if trace is None:
            return original(*args, **kwargs)
        where = site()
        trace._count(trace.collectives, (op, where), {"op": op, "site": where})
        started = time.monotonic()
        trace.waiting = {"op": op, "site": where, "since": started}
        try:
            return original(*args, **kwargs)
        except BaseException as exc:
            trace.failed_in = {"op": op, "site": where,
                               "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            raise
        finally:
            trace.waiting = None
            trace.longest_wait = max(trace.longest_wait, time.monotonic() - started)
            if trace.hang is not None and trace.hang.get("site") == where:
                trace.hang = None   # the wait ended: slow, not hung

    traced.__wrapped__ = original  # type: ignore[attr-defined]
    return traced


def _ddp_init(original: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        trace = _TRACE
        if trace is None:
            return original(self, *args, **kwargs)
        where = site()
        op = "DistributedDataParallel"
        # counted, not watched: its own collectives are gloo's, and it may import for seconds
        trace._count(trace.collectives, (op, where), {"op": op, "site": where})
        return original(self, *args, **kwargs)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    return __init__


# --- devices -------------------------------------------------------------------------------

def _cuda_request(device: Any) -> str | None:
    """``cuda:N`` (or ``cuda``) when ``device`` names a CUDA device, else None (an index alone,
    ``.to(local_rank)``, names a CUDA device)."""
    if isinstance(device, int) and not isinstance(device, bool):
        return f"cuda:{device}"
    if isinstance(device, str):
        return device if device.startswith("cuda") else None
    kind = getattr(device, "type", None)
    if kind == "cuda" and type(device).__name__ == "device":
        index = getattr(device, "index", None)
        return "cuda" if index is None else f"cuda:{index}"
    return None


def _resolved(trace: Trace, requested: str, available: bool) -> str:
    if not available:
        return "cpu"
    return requested if ":" in requested else f"cuda:{trace.current_cuda}"


def _note_device(trace: Trace, requested: str, via: str, available: bool) -> str:
    resolved = _resolved(trace, requested, available)
    named = requested if ":" in requested else f"cuda:{trace.current_cuda}"
    where = site(3)
    trace._count(trace.devices, (named, via, where),
                 {"requested": requested, "device": named, "via": via, "site": where,
                  "resolved": resolved})
    return resolved


def _patch_devices(torch: Any) -> None:
    available = bool(torch.cuda.is_available())
    tensor_to, module_to = torch.Tensor.to, torch.nn.Module.to
    tensor_cuda, module_cuda = torch.Tensor.cuda, torch.nn.Module.cuda
    set_device = torch.cuda.set_device

    def _to(original: Any, via: str) -> Any:
        def to(self: Any, *args: Any, **kwargs: Any) -> Any:
            trace = _TRACE
            if trace is not None:
                if args and _cuda_request(args[0]):
                    resolved = _note_device(trace, _cuda_request(args[0]) or "", via, available)
                    if not available:
                        args = ("cpu", *args[1:])
                elif _cuda_request(kwargs.get("device")):
                    resolved = _note_device(trace, _cuda_request(kwargs["device"]) or "", via,
                                            available)
                    if not available:
                        kwargs["device"] = resolved
            return original(self, *args, **kwargs)
        to.__wrapped__ = original  # type: ignore[attr-defined]
        return to

    def _cuda(original: Any, via: str) -> Any:
        def cuda(self: Any, device: Any = None, *args: Any, **kwargs: Any) -> Any:
            trace = _TRACE
            if trace is None:
                return original(self, device, *args, **kwargs)
            wanted = "cuda" if device is None else (
                f"cuda:{device}" if isinstance(device, int) else _cuda_request(device) or "cuda")
            _note_device(trace, wanted, via, available)
            if not available:
                return self
            return original(self, device, *args, **kwargs)
        cuda.__wrapped__ = original  # type: ignore[attr-defined]
        return cuda

    def traced_set_device(device: Any) -> None:
        trace = _TRACE
        if trace is None:
            return set_device(device)
        wanted = f"cuda:{device}" if isinstance(device, int) else _cuda_request(device) or "cuda"
        if ":" in wanted:
            trace.current_cuda = int(wanted.split(":", 1)[1])
        _note_device(trace, wanted, "torch.cuda.set_device", available)
        if available:
            set_device(device)
        return None

    traced_set_device.__wrapped__ = set_device  # type: ignore[attr-defined]
    torch.Tensor.to = _to(tensor_to, "Tensor.to")
    torch.nn.Module.to = _to(module_to, "Module.to")
    torch.Tensor.cuda = _cuda(tensor_cuda, "Tensor.cuda")
    torch.nn.Module.cuda = _cuda(module_cuda, "Module.cuda")
    torch.cuda.set_device = traced_set_device


# --- samplers ------------------------------------------------------------------------------

def _sampler_iter(original: Any) -> Any:
    def __iter__(self: Any) -> Any:
        found = original(self)
        trace = _TRACE
        if trace is None:
            return found
        indices = list(found)
        try:
            _note_sampler(trace, self, indices)
        except Exception:  # never let the watching break the step
            pass
        return iter(indices)

    __iter__.__wrapped__ = original  # type: ignore[attr-defined]
    return __iter__


def _note_sampler(trace: Trace, sampler: Any, indices: list[Any]) -> None:
    size = len(sampler.dataset)
    epoch = int(getattr(sampler, "epoch", 0) or 0)
    trace.population = len(indices)
    with trace.lock:
        for entry in trace.samplers:
            if entry["_id"] == id(sampler):
                entry["passes"] += 1
                return
        if len(trace.samplers) >= MAX_ENTRIES:
            trace.lost += 1
            return
        kept = [int(i) for i in indices] if len(indices) <= MAX_INDICES else None
        trace.samplers.append({
            "_id": id(sampler), "sampler": type(sampler).__name__, "dataset_size": size,
            "num_replicas": int(sampler.num_replicas), "rank": int(sampler.rank),
            "drop_last": bool(sampler.drop_last), "shuffle": bool(sampler.shuffle),
            "epoch": epoch, "count": len(indices), "indices": kept, "passes": 1,
            "site": site(3)})


# --- tracking and storage ------------------------------------------------------------------

def _target(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    if kind == "download":   # urlopen(url | Request), Session.request(method, url)
        url = args[1] if len(args) > 1 and isinstance(args[0], str) and \
            isinstance(args[1], str) else (args[0] if args else kwargs.get("url", ""))
        return str(getattr(url, "full_url", url))[:500]
    if kind == "checkpoint":
        where = args[1] if len(args) > 1 else kwargs.get("f")
        return os.path.abspath(os.fspath(where)) if isinstance(where, (str, os.PathLike)) \
            else "<stream>"
    first = args[0] if args else next(iter(kwargs.values()), "")
    text = first if isinstance(first, str) else type(first).__name__
    return os.path.abspath(text) if kind == "extract" and os.path.exists(text) else text[:200]


def note_call(kind: str, call: str, target: str, depth: int = 3) -> None:
    """Record one tracking or storage call of this rank (``kind``: tracking, download,
    extract, checkpoint)."""
    trace = _TRACE
    if trace is None or getattr(trace.quiet, "on", False):
        return
    if _from_mlpipe(depth):
        return   # mlpipe's own tracking, which already keeps to one rank
    where = site(depth)
    trace._count(trace.calls, (kind, call, target, where),
                 {"kind": kind, "call": call, "target": target, "site": where})


def _storage(kind: str, call: str, original: Any, method: bool = False) -> Any:
    def traced(*args: Any, **kwargs: Any) -> Any:
        trace = _TRACE
        if trace is None or getattr(trace.quiet, "on", False):
            return original(*args, **kwargs)
        try:
            target = _target(kind, args[1:] if method else args, kwargs)
            if method and kind == "extract":
                target = os.path.abspath(str(getattr(args[0], "name", None)
                                             or getattr(args[0], "filename", None) or "?"))
            note_call(kind, call, target)
        except Exception:
            pass
        trace.quiet.on = True   # what this call does inside (an HTTP request) is this call
        try:
            return original(*args, **kwargs)
        finally:
            trace.quiet.on = False

    traced.__wrapped__ = original  # type: ignore[attr-defined]
    return traced


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _TRACE is None or event != "shutil.unpack_archive":
        return
    try:
        note_call("extract", "shutil.unpack_archive", os.path.abspath(str(args[0])), depth=2)
    except Exception:
        pass


# --- installing the hooks ------------------------------------------------------------------

_PATCHED: set[str] = set()


def _patch(name: str, module: Any) -> None:
    if name in _PATCHED:
        return
    _PATCHED.add(name)
    if name == "torch.distributed":
        for op in COLLECTIVES:
            original = getattr(module, op, None)
            if original is not None:
                setattr(module, op, _collective(op, original))
    elif name == "torch.nn.parallel.distributed":
        cls = module.DistributedDataParallel
        cls.__init__ = _ddp_init(cls.__init__)
    elif name == "torch.utils.data.distributed":
        cls = module.DistributedSampler
        cls.__iter__ = _sampler_iter(cls.__iter__)
    elif name == "torch":
        module.save = _storage("checkpoint", "torch.save", module.save)
        _patch_devices(module)
    elif name == "mlflow":
        for call in _MLFLOW:
            original = getattr(module, call, None)
            if original is not None:
                setattr(module, call, _storage("tracking", f"mlflow.{call}", original))
    elif name == "urllib.request":
        module.urlopen = _storage("download", "urllib.request.urlopen", module.urlopen)
    elif name == "requests.sessions":
        cls = module.Session
        cls.request = _storage("download", "requests", cls.request, True)
    elif name == "tarfile":
        cls = module.TarFile
        for call in ("extractall", "extract"):
            setattr(cls, call, _storage("extract", f"tarfile.{call}", getattr(cls, call), True))
    elif name == "zipfile":
        cls = module.ZipFile
        for call in ("extractall", "extract"):
            setattr(cls, call, _storage("extract", f"zipfile.{call}", getattr(cls, call), True))


#: The modules whose attributes the trace replaces, the order they must be patched in.
MODULES = ("torch", "torch.distributed", "torch.nn.parallel.distributed",
           "torch.utils.data.distributed", "mlflow", "tarfile", "zipfile", "urllib.request",
           "requests.sessions")


#: Patches a traced module as soon as it has been executed, when the body imports it only
#: after the trace began.
_FINDER = AfterImport(lambda name: name in MODULES and name not in _PATCHED, _patch)
_AUDIT = False


def install() -> None:
    """Put the hooks in place (inert until ``start``): on the traced modules already imported,
    and on the others as they are imported, so that names the component's module binds at its
    import (``from torch.distributed import all_reduce``) are the traced ones."""
    global _AUDIT
    if not enabled():
        return
    for name in MODULES:
        module = sys.modules.get(name)
        if module is not None:
            try:
                _patch(name, module)
            except Exception:
                pass
    if any(name not in _PATCHED for name in MODULES) and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    if not _AUDIT:
        sys.addaudithook(_audit)   # permanent; inert while no trace is active
        _AUDIT = True


def start() -> Trace | None:
    """Begin tracing this rank (a new step: what was traced is forgotten); None when off."""
    global _TRACE
    if not enabled():
        return None
    install()
    _TRACE = Trace()
    return _TRACE


def stop() -> dict[str, Any]:
    """Stop tracing; ``{"trace": ...}`` for the rank's record (null: switched off)."""
    global _TRACE
    trace, _TRACE = _TRACE, None
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    return {"trace": public(trace.snapshot()) if trace is not None else None}


def public(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A snapshot as the record keeps it: the samplers' object ids left out, the wait under
    way in seconds so far."""
    waiting = snapshot["waiting"]
    if waiting is not None:
        waiting = {"op": waiting["op"], "site": waiting["site"],
                   "waited_s": round(time.monotonic() - waiting["since"], 3)}
    return {**snapshot, "waiting": waiting,
            "samplers": [{k: v for k, v in s.items() if k != "_id"}
                         for s in snapshot["samplers"]]}


def population() -> int | None:
    """How many examples this rank's last DistributedSampler pass dealt it (what a metric it
    reduces next was computed over), when the trace saw one."""
    trace = _TRACE
    return trace.population if trace is not None else None


__all__ = ["COLLECTIVES", "MODULES", "TRACE_ENV", "Trace", "active", "enabled", "install",
           "note_call",
           "population", "public", "site", "start", "stop"]
