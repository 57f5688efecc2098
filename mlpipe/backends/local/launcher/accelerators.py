"""The GPUs this machine shows a local launch, and whether a launch fits them.

A CUDA rank uses the GPU of its local rank (``cuda:LOCAL_RANK``), and NCCL wants one GPU per
rank: a launch that starts more CUDA ranks than there are visible GPUs would let rank N find
out (``CUDA error: invalid device ordinal``, "Duplicate GPU detected"). It is refused before any
rank starts, or, when the user asked (``--local-scale STEP=fit``), scaled to fit. With no GPU at
all the step runs on CPUs (a GPU design rehearsed here with gloo), which is not refused.
Reads the environment and ``/proc``; never imports torch.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlpipe.compute import CATALOGUE
from mlpipe.distribution import Distribution, Mpi, PyTorch
from mlpipe.spec import Compute

#: How many GPUs mlpipe assumes this machine has, where detection cannot tell (a container
#: without /proc/driver/nvidia, say), or to rehearse a GPU machine's limits.
GPUS_VAR = "MLPIPE_LOCAL_GPUS"
_DEVICE_ID = re.compile(r"^(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+)$")


@dataclass(frozen=True, slots=True)
class Gpus:
    """The GPUs a launch may use: how many, the ids ``CUDA_VISIBLE_DEVICES`` names them by
    (in order), and how that was found (for messages)."""

    count: int
    ids: tuple[str, ...]
    source: str


def _physical() -> tuple[int, str] | None:
    """GPUs the NVIDIA driver shows, or None when there is no driver to ask."""
    proc = Path("/proc/driver/nvidia/gpus")
    try:
        entries = [p for p in proc.iterdir() if p.is_dir()]
        return len(entries), str(proc)
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10,
                                 check=False).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        return sum(1 for line in out.splitlines() if line.startswith("GPU ")), "nvidia-smi -L"
    return None


def visible_gpus(env: Mapping[str, str] | None = None) -> Gpus:
    """The GPUs a process started with ``env`` (``os.environ`` when None) can use.

    ``MLPIPE_LOCAL_GPUS`` wins; else the driver's count, narrowed by ``CUDA_VISIBLE_DEVICES``
    as CUDA reads it (ids up to the first that is not one; ``-1`` or empty hides them all).

    Example:
        >>> visible_gpus({"MLPIPE_LOCAL_GPUS": "2"}).count
        2
    """
    env = os.environ if env is None else env
    stated = env.get(GPUS_VAR, "").strip()
    if stated.isdigit():
        n = int(stated)
        return Gpus(n, tuple(str(i) for i in range(n)), f"{GPUS_VAR}={stated}")
    physical = _physical()
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        ids: list[str] = []
        for item in listed.split(","):
            item = item.strip()
            if not _DEVICE_ID.match(item):
                break
            ids.append(item)
        if physical is not None:
            ids = ids[:physical[0]]
        return Gpus(len(ids), tuple(ids), f"CUDA_VISIBLE_DEVICES={listed}")
    if physical is None:
        return Gpus(0, (), "no NVIDIA driver found")
    return Gpus(physical[0], tuple(str(i) for i in range(physical[0])), physical[1])


def uses_cuda(distribution: Distribution | None, compute: Compute | None) -> bool:
    """Whether each rank of the step takes a GPU of its own: PyTorch with NCCL (declared, or
    undeclared on a GPU size, where the code picks NCCL when CUDA is there), or MPI on a GPU
    size (Horovod, DeepSpeed)."""
    if isinstance(distribution, PyTorch):
        if distribution.backend == "nccl":
            return True
        if distribution.backend is not None:
            return False
    elif not isinstance(distribution, Mpi):
        return False
    size, _, _ = CATALOGUE.resolve(compute)
    return size is not None and size.has_gpu


def fitted(instances: int, per_node: int, gpus: int) -> tuple[int, int]:
    """The largest launch, at most as declared, whose CUDA ranks each get a GPU of their own
    among ``gpus`` (processes per node first, then nodes).

    Example:
        >>> fitted(2, 4, 1), fitted(2, 4, 4), fitted(2, 4, 8)
        ((1, 1), (1, 4), (2, 4))
    """
    per = max(1, min(per_node, gpus))
    return max(1, min(instances, gpus // per)), per


def refusal(step: str, instances: int, per_node: int, gpus: Gpus) -> str | None:
    """Why a CUDA launch of ``instances`` x ``per_node`` ranks cannot run on ``gpus``, or None
    when it fits (or when there is no GPU and the ranks run on CPUs)."""
    world = instances * per_node
    if gpus.count == 0 or world <= gpus.count:
        return None
    first = gpus.count if per_node > gpus.count else None
    if first is not None:
        what = (f"rank {first} would ask for cuda:{first}, which does not exist here "
                f"(invalid device ordinal)")
    else:
        what = (f"the {instances} emulated nodes would share {gpus.count} GPU(s), and NCCL "
                f"refuses two ranks on one GPU")
    return (f"step {step!r} cannot be launched here: it starts {world} CUDA rank(s) "
            f"({instances} node(s) x {per_node} per node) but this machine shows {gpus.count} "
            f"GPU(s) ({gpus.source}): {what}")


def refusal_hint(step: str, instances: int, per_node: int, gpus: Gpus) -> str:
    i, p = fitted(instances, per_node, gpus.count)
    return (f"launch it smaller here: --local-scale {step}={i}x{p} (or {step}=fit, which "
            f"fits it to this machine's GPUs); the declared {instances}x{per_node} is what "
            f"Azure ML runs")


def node_devices(instances: int, per_node: int, gpus: Gpus) -> dict[int, str]:
    """``CUDA_VISIBLE_DEVICES`` for each emulated node of a multi-node CUDA launch, so that
    ``cuda:LOCAL_RANK`` on node N is a GPU of its own: node -> ids."""
    if instances < 2 or instances * per_node > gpus.count:
        return {}
    return {n: ",".join(gpus.ids[n * per_node:(n + 1) * per_node]) for n in range(instances)}
