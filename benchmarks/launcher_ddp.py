"""The DDP script of ``bench_launcher.py``: logistic regression on synthetic data, gloo on CPU.

The same code runs under ``torchrun`` (``python launcher_ddp.py OUT``, what torchrun starts)
and as the body of an mlpipe step (``launcher_step.train`` calls ``train``). It imports no
mlpipe. Each rank writes its timestamps (``time.time()``) to ``$BENCH_TIMES/rank-<R>.json``:

- ``started``: the process's start (``/proc/self/stat``, to a clock tick);
- ``imported``: this module's first line ran (the interpreter, the launcher's own imports);
- ``joined``: after ``init_process_group`` and the first barrier: the first collective;
- ``trained``: after the last step and a barrier; ``done``: the model written, group gone.
"""
import time

IMPORTED = time.time()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

EXAMPLES = 4096
FEATURES = 32
BATCH = 64


def process_started() -> float:
    """This process's start as a ``time.time()`` value (Linux; else when this module ran)."""
    try:
        with open("/proc/self/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return IMPORTED
    return time.time() - age


def train(out: str, steps: int) -> list[int]:
    """``steps`` optimiser steps of DDP on this rank's part of the examples; rank 0 saves the
    model to ``out``. Returns the example ids this rank trained on."""
    started = process_started()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method="env://")
    dist.barrier()
    joined = time.time()
    rank, world = dist.get_rank(), dist.get_world_size()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(EXAMPLES, FEATURES, generator=generator)
    y = (x @ torch.randn(FEATURES, 1, generator=generator) > 0).float()
    mine = list(range(rank, EXAMPLES, world))
    xs, ys = x[mine], y[mine]
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for step in range(steps):
        at = (step * BATCH) % len(mine)
        opt.zero_grad()
        loss = loss_fn(model(xs[at:at + BATCH]), ys[at:at + BATCH])
        loss.backward()
        opt.step()
    dist.barrier()
    trained = time.time()
    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(out, "model.pt"))
    dist.destroy_process_group()
    times = os.environ.get("BENCH_TIMES")
    if times:
        with open(os.path.join(times, f"rank-{rank}.json"), "w") as fh:
            json.dump({"rank": rank, "started": started, "imported": IMPORTED,
                       "joined": joined, "trained": trained, "done": time.time(),
                       "loss": float(loss)}, fh)
    return mine


if __name__ == "__main__":
    train(sys.argv[1], int(sys.argv[2]))
