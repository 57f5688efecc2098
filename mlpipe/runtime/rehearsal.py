"""Inside a rehearsed rank (``mlpipe rehearse``): what its training did, as a differential
rehearsal compares it: optimiser steps, the examples each step's training forwards were fed
(its batch), the loss each ``backward`` started from, the learning rates, which models were
called, and a digest of the trained parameters at the end.

Run as ``python -m mlpipe.runtime.rehearsal REQUEST.json``: the probe is installed, then the
step runs exactly as ``python -m mlpipe.runtime.step`` runs it; at exit each rank writes
``$MLPIPE_REHEARSAL_DIR/rank-<R>.json``. Only the rehearsal starts it; an ordinary run never
pays for it. Imports torch only where the step can (a step without torch records ``null``).
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlpipe.digests import digest_chunks
from mlpipe.runtime.record import identity, write_json

#: The folder each rehearsed rank writes its facts into (set by the rehearsal's runner).
DIR_ENV = "MLPIPE_REHEARSAL_DIR"
#: Most loss values one rank keeps (a longer run keeps every k-th, evenly).
MAX_LOSSES = 20_000


class _Probe:
    """One process's facts, filled by the hooks below."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.local = threading.local()
        self.steps = 0
        self.pending = 0          # examples fed to training forwards since the last step
        self.batches: list[int] = []
        self.losses: list[float] = []
        self.lr: list[float] | None = None
        self.models: set[str] = set()
        self.optimizers: dict[int, Any] = {}
        self.installed = False
        self.why_not: str | None = None

    def fed(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        size = _leading(args, kwargs)
        if size:
            with self.lock:
                self.pending += size
                self.models.add(type(module).__name__)

    def stepped(self, optimizer: Any) -> None:
        with self.lock:
            self.steps += 1
            self.batches.append(self.pending)
            self.pending = 0
            self.optimizers.setdefault(id(optimizer), optimizer)
            if self.lr is None:
                self.lr = [float(g.get("lr", 0.0)) for g in optimizer.param_groups]

    def lost(self, value: float) -> None:
        with self.lock:
            self.losses.append(value)

    def facts(self) -> dict[str, Any]:
        who = identity()
        if not self.installed:
            return {"rank": who["rank"], "world_size": who["world_size"], "observed": False,
                    "why_not": self.why_not}
        fed = [b for b in self.batches if b]
        mode = Counter(fed).most_common(1)[0][0] if fed else None
        losses = self.losses
        if len(losses) > MAX_LOSSES:
            every = len(losses) / MAX_LOSSES
            losses = [losses[int(i * every)] for i in range(MAX_LOSSES)]
        return {"rank": who["rank"], "world_size": who["world_size"], "observed": True,
                "steps": self.steps, "examples": sum(self.batches) + self.pending,
                "batch": mode, "batch_min": min(fed) if fed else None,
                "batch_max": max(fed) if fed else None, "losses": losses,
                "loss_count": len(self.losses), "lr": self.lr,
                "models": sorted(self.models), "parameters": self.parameters()}

    def parameters(self) -> dict[str, Any] | None:
        """A digest of every parameter the optimisers trained, as they are at the end."""
        if not self.optimizers:
            return None
        count, square = 0, 0.0

        def tensors() -> Iterator[bytes]:
            nonlocal count, square
            for optimizer in self.optimizers.values():
                for group in optimizer.param_groups:
                    for p in group["params"]:
                        t = p.detach().cpu().contiguous()
                        try:
                            yield t.numpy().tobytes()
                        except (TypeError, RuntimeError):  # bfloat16 and kin: no numpy dtype
                            yield t.float().numpy().tobytes()
                        count += t.numel()
                        square += float(t.double().pow(2).sum())

        digest = digest_chunks(tensors())
        return {"digest": digest, "count": count, "norm": square ** 0.5}


def _leading(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The batch of a forward: the leading size of its first tensor argument."""
    for value in (*args, *kwargs.values()):
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
    return 0


PROBE = _Probe()


def install() -> None:
    """Hook torch (when the step can import it): every top-level training forward, every
    optimiser step and every scalar ``backward``. Nothing here changes what the step
    computes."""
    try:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError as exc:
        PROBE.why_not = f"torch cannot be imported here ({exc})"
        return
    module_call = torch.nn.Module.__call__
    backward = torch.Tensor.backward

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        depth = getattr(PROBE.local, "depth", 0)
        if depth == 0 and self.training and torch.is_grad_enabled():
            PROBE.fed(self, args, kwargs)
        PROBE.local.depth = depth + 1
        try:
            return module_call(self, *args, **kwargs)
        finally:
            PROBE.local.depth = depth

    def _backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.numel() == 1:
            PROBE.lost(float(self.detach()))
        return backward(self, *args, **kwargs)

    torch.nn.Module.__call__ = __call__  # type: ignore[method-assign]
    torch.Tensor.backward = _backward  # type: ignore[method-assign]
    register_optimizer_step_post_hook(lambda optimizer, args, kwargs: PROBE.stepped(optimizer))
    PROBE.installed = True


def save() -> None:
    """Write this rank's facts (at exit: the step's record is written by then)."""
    where = os.environ.get(DIR_ENV)
    if not where:
        return
    facts = PROBE.facts()
    try:
        write_json(Path(where) / f"rank-{facts['rank']}.json", facts)
    except (OSError, TypeError, ValueError) as exc:
        print(f"mlpipe: the rehearsal's facts could not be written: {exc}", file=sys.stderr)


def read(where: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every rank's facts in folder ``where``, in rank order (a rank that wrote none is absent).
    """
    found = []
    for path in sorted(Path(where).glob("rank-*.json")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda f: f.get("rank", 0))


def main(argv: list[str] | None = None) -> int:
    from mlpipe.runtime import step

    install()
    atexit.register(save)
    return step.main(argv)


if __name__ == "__main__":
    from mlpipe.runtime.step import end_process

    end_process(main())
