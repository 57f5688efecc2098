"""Inside a distributed step: who am I (rank, world), do I write this output, which examples are
mine, and a metric all-reduced before it is logged as global. The coordination facts (ids
consumed, outputs marked written, reductions) go into this rank's part of the step record
(``mlpipe.runtime.record``) for the post-step check.

Reads only the variables the launcher (Azure ML or mlpipe's local one) sets; imports torch only
inside ``all_reduce_metric``.
"""
from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

from mlpipe.errors import DistributedError
from mlpipe.runtime import record as step_record
from mlpipe.runtime.launchenv import int_var, tf_config
from mlpipe.runtime.metrics import log_metric

T = TypeVar("T", bound=Hashable)

#: Set by the launcher: the step's writer policy as JSON (``{"*": "rank0", "model": 1}``).
WRITERS_VAR = "MLPIPE_WRITERS"


def rank() -> int:
    """This process's global rank: ``RANK`` (PyTorch), ``OMPI_COMM_WORLD_RANK`` (MPI) or
    TF_CONFIG's ``task.index``; 0 outside a distributed launch.

    Example:
        >>> rank()
        0
    """
    found = int_var("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
    if found is not None:
        return found
    tf = tf_config()
    return int(tf["task"]["index"]) if tf and tf.get("task", {}).get("type") == "worker" else 0


def world_size() -> int:
    """How many processes the step runs as (``WORLD_SIZE``, ``OMPI_COMM_WORLD_SIZE`` or the
    TF_CONFIG worker count); 1 outside a distributed launch."""
    found = int_var("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    if found is not None:
        return found
    tf = tf_config()
    return len(tf["cluster"].get("worker", [])) or 1 if tf and "cluster" in tf else 1


def local_rank() -> int:
    """This process's rank on its node (``LOCAL_RANK``): the GPU it should use."""
    found = int_var("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
    return 0 if found is None else found


def node_rank() -> int:
    """The index of this process's node (``NODE_RANK``)."""
    found = int_var("NODE_RANK", "OMPI_COMM_WORLD_NODE_RANK")
    return 0 if found is None else found


def _policy(output: str | None) -> Any:
    try:
        table = json.loads(os.environ.get(WRITERS_VAR) or "{}")
    except ValueError:
        table = {}
    if output is not None and output in table:
        return table[output]
    return table.get("*", "rank0")


def is_writer(output: str | None = None) -> bool:
    """Whether this rank writes ``output`` under the step's declared writer policy.

    ``"rank0"`` (the default when nothing is declared): rank 0 only; a rank number: that rank;
    ``"sharded"``: every rank (each into its own part).

    Args:
        output: the output's name; None asks about the default policy.

    Example:
        >>> if is_writer("model"):
        ...     torch.save(model.module.state_dict(), Path(model_dir) / "model.pt")
        ...     mark_written("model")
    """
    policy = _policy(output)
    if policy == "sharded":
        return True
    if policy == "rank0":
        return rank() == 0
    return isinstance(policy, int) and rank() == policy


# --- the coordination record ---------------------------------------------------------------

def _add(key: str, values: Sequence[Any]) -> None:
    part = step_record.current()
    if part is not None:
        part.add_ids(key, values)


def record_consumed(ids: Sequence[Hashable], *, population: Sequence[Hashable] = ()) -> None:
    """Record example ids this rank trained on (and, optionally, all ids of the data set).

    ``shard`` calls it for you; call it yourself when you divide the data another way.
    """
    _add("consumed", ids)
    _add("population", population)


def mark_written(output: str) -> None:
    """Record that this rank wrote ``output`` (for the single-writer check)."""
    _add("marked_written", [output])


def shard(ids: Sequence[T], *, seed: int | None = None, record: bool = True) -> list[T]:
    """This rank's disjoint part of ``ids``: together the ranks' parts cover every id once.

    The split is the same in every epoch (shuffle inside your part per epoch if you like), so
    "no overlap" holds over the whole run. Every rank must pass the same ids.

    Args:
        ids: all example ids, in the same order on every rank.
        seed: permute ``ids`` with this seed before dealing them out (same on every rank).
        record: add the part to this rank's coordination record.

    Returns:
        Every ``world_size()``-th id, starting at ``rank()``.

    Example:
        >>> shard(["a", "b", "c", "d", "e"])   # RANK=1, WORLD_SIZE=2
        ['b', 'd']
    """
    order = list(ids)
    if seed is not None:
        random.Random(seed).shuffle(order)
    part = order[rank()::world_size()]
    if record:
        record_consumed(part, population=order)
    return part


# --- metrics -------------------------------------------------------------------------------

_OPS = ("mean", "sum", "min", "max")


def _wait_until_released(tensor: Any, timeout: float = 2.0) -> None:
    """Wait (bounded) until the process group's worker thread has dropped its tensor reference.

    gloo's ``all_reduce`` returns once the result is ready, but its worker thread may still
    hold the finished work, and with it a reference to ``tensor``, for a moment. A rank that
    exits in that moment (the metric is often the last call of a training script) destroys
    the tensor from that thread during interpreter shutdown, and the process aborts with
    "terminate called without an active exception" after every rank agreed on the value.
    ``_use_count`` is the C++ reference count of the tensor; 1 is ours alone.
    """
    use_count = getattr(tensor, "_use_count", None)
    if use_count is None:
        return
    deadline = time.monotonic() + timeout
    while use_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.0005)


def _population() -> int | None:
    """The examples behind this rank's value when it recorded no ids: what its last
    DataLoader pass read (a whole subset), else what its last DistributedSampler dealt it."""
    from mlpipe.runtime import loaders, ranktrace

    return loaders.last_population() or ranktrace.population()


def all_reduce_metric(name: str, value: float, *, op: str = "mean",
                      population: str | None = None) -> float:
    """Combine one value from every rank and log the result once, as a global metric.

    Every rank must call it (it is a collective). Rank 0 logs the reduced value with
    ``scope="global"``; every rank gets it back.

    Args:
        name: the metric.
        value: this rank's value on its shard.
        op: ``"mean"``, ``"sum"``, ``"min"`` or ``"max"``.
        population: what the global value describes (``"train, 210 examples"``).

    Returns:
        The reduced value.

    Example:
        >>> loss = all_reduce_metric("train_loss", local_loss, op="mean")
    """
    if op not in _OPS:
        raise ValueError(f"all_reduce_metric op {op!r} is not one of {', '.join(_OPS)}")
    size = world_size()
    result = float(value)
    if size > 1:
        try:
            import torch
            import torch.distributed as dist
        except ImportError:
            torch = dist = None
        if torch is None or dist is None or not dist.is_available() \
                or not dist.is_initialized():
            raise DistributedError(
                f"all_reduce_metric({name!r}) runs in a world of {size} processes but no "
                f"torch.distributed process group is initialised",
                hint="call torch.distributed.init_process_group(init_method='env://') first")
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        tensor = torch.tensor([result], dtype=torch.float64, device=device)
        red = {"mean": dist.ReduceOp.SUM, "sum": dist.ReduceOp.SUM,
               "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]
        dist.all_reduce(tensor, op=red)
        result = tensor.item() / size if op == "mean" else tensor.item()
        _wait_until_released(tensor)
    part = step_record.current()
    if part is not None:
        # this rank's own value and part: what a plain mean of unequal parts hides (MP534)
        consumed = part.data.get("consumed") or []
        part.add_reduction({"name": name, "op": op, "world_size": size, "value": result,
                            "rank": rank(), "at": step_record.now(), "local": float(value),
                            "examples": len(consumed) if consumed else _population(),
                            "population": population})
    if rank() == 0:
        log_metric(name, result, scope="global", population=population, reduced_over=size)
    return result
