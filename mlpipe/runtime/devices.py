"""The collective backend and the device a step's process uses: the ones its launch declared,
as far as this machine has them.

``backend()`` is the declared ``torch.distributed`` backend (``MLPIPE_BACKEND``, set by the
step runtime and the local launcher from ``PyTorch(backend=...)``), except that NCCL on a
machine with fewer CUDA devices than processes per node falls back to gloo (a GPU design run
on CPUs here); ``device()`` is ``cuda:<LOCAL_RANK>`` under NCCL and the CPU otherwise, so a
rank never asks for a GPU that does not exist. Both say what they decided in the step record.
Imports torch only when called.
"""
from __future__ import annotations

import os
from typing import Any

from mlpipe.runtime import record

BACKEND_VAR = "MLPIPE_BACKEND"


def _cuda_devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver counts as no GPU
        return 0


def _per_node() -> int:
    for name in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def decide() -> dict[str, Any]:
    """The backend and device for this process, and why: ``{"declared", "backend",
    "device", "cuda_devices", "processes_per_node", "why"}``."""
    declared = os.environ.get(BACKEND_VAR) or None
    gpus = _cuda_devices()
    per_node = _per_node()
    local = record.identity()["local_rank"]
    enough = gpus >= per_node and local < gpus
    why = None
    if declared == "nccl" and not enough:
        backend = "gloo"
        why = (f"NCCL was declared, but this machine has {gpus} CUDA device(s) for "
               f"{per_node} process(es) per node: gloo on the CPU instead")
    elif declared is not None:
        backend = declared
    else:
        backend = "nccl" if gpus and enough else "gloo"
        why = "no backend declared: NCCL where every local rank has a GPU, else gloo"
    if backend == "nccl":
        device = f"cuda:{local}"
    elif declared is None and gpus and local < gpus and record.identity()["world_size"] == 1:
        device = "cuda:0"
    else:
        device = "cpu"
    return {"declared": declared, "backend": backend, "device": device, "cuda_devices": gpus,
            "processes_per_node": per_node, "why": why}


def _noted() -> dict[str, Any]:
    found = decide()
    part = record.current()
    if part is not None and part.data.get("launch") != found:
        part.update(launch=found)
    return found


def backend() -> str:
    """The ``torch.distributed`` backend to initialise: the declared one, or gloo where NCCL
    was declared but this machine lacks a GPU per local rank.

    Example:
        >>> dist.init_process_group(backend(), init_method="env://")
    """
    return _noted()["backend"]


def device() -> Any:
    """The ``torch.device`` this process computes on: ``cuda:<LOCAL_RANK>`` under NCCL, else
    the CPU (and ``cuda:0`` for a single process with no backend declared, where a GPU exists).

    Example:
        >>> model.to(device())
    """
    import torch

    return torch.device(_noted()["device"])


__all__ = ["BACKEND_VAR", "backend", "decide", "device"]
