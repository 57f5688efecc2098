"""Benchmark: what the rank-level trace costs a 2-rank step (issue 40).

``trace_step.train`` (DDP through a DataLoader and a DistributedSampler, gloo on CPU, each
batch moved to the device, a per-epoch all_reduce, rank 0's checkpoint) runs as a 2-rank step
through the local launcher and the step runtime (``python -m mlpipe.runtime.step``), traced
(the default) and untraced (``MLPIPE_TRACE=0``), alternated ``--repeat`` times so that load on
the machine hits both alike. Reports the median wall time of each (the launch's start to its
end: the ranks' interpreters, the rendezvous, the training, the records, the coordination
check) and their ratio.

Goal (``make bench-check``): traced <= 1.10 x untraced.

    python benchmarks/bench_trace.py [--epochs 8] [--repeat 5] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from goals import Goals

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def run_once(traced: bool, epochs: int, where: Path) -> float:
    from mlpipe import PyTorch
    from mlpipe.backends.local.launcher import launch

    where.mkdir(parents=True)
    (where / "out").mkdir()
    request = {"function": "trace_step:train", "sys_path": [str(HERE)], "inputs": {},
               "outputs": {}, "params": {"out": str(where / "out"), "epochs": epochs}}
    (where / "request.json").write_text(json.dumps(request))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLPIPE_")}
    env.update(PYTHONPATH=str(ROOT), MLPIPE_STEP_DIR=str(where / "step"), OMP_NUM_THREADS="1",
               MLPIPE_TRACE="1" if traced else "0")
    started = time.perf_counter()
    result = launch([sys.executable, "-m", "mlpipe.runtime.step", str(where / "request.json")],
                    distribution=PyTorch(processes_per_node=2, backend="gloo"), env=env,
                    cwd=str(where), log_dir=where / "logs", timeout=600)
    took = time.perf_counter() - started
    assert result.coordination is not None and result.coordination.ok, result.coordination
    parts = [json.loads(p.read_text()) for p in sorted((where / "step").glob("rank-*.json"))]
    assert all((p["trace"] is not None) == traced for p in parts), "trace switch not honoured"
    return took


def per_call(n: int = 20_000) -> dict[str, float]:
    """Microseconds a hooked call costs over the original, in this process (best of 5): a
    ``Tensor.to`` of the CPU (a training loop's hottest hooked call) and an ``all_reduce`` in a
    one-process gloo group."""
    import torch
    import torch.distributed as dist

    from mlpipe.runtime import ranktrace

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29531", RANK="0", WORLD_SIZE="1")
    ranktrace.install()
    trace = ranktrace.start()
    dist.init_process_group("gloo", init_method="env://")
    t, device = torch.zeros(4), torch.device("cpu")
    calls = {"Tensor.to": (lambda: t.to(device), lambda: torch.Tensor.to.__wrapped__(t, device)),
             "all_reduce": (lambda: dist.all_reduce(t),
                            lambda: dist.all_reduce.__wrapped__(t))}
    out = {}
    for name, (hooked, plain) in calls.items():
        count = n if name == "Tensor.to" else n // 10
        best = {}
        for label, fn in (("hooked", hooked), ("plain", plain)):
            runs = []
            for _ in range(5):
                started = time.perf_counter()
                for _ in range(count):
                    fn()
                runs.append((time.perf_counter() - started) / count)
            best[label] = min(runs)
        out[name] = (best["hooked"] - best["plain"]) * 1e6
    assert trace is not None and ranktrace.stop()["trace"]["collectives"]
    dist.destroy_process_group()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8, help="epochs of 64 steps a run")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each, alternated")
    parser.add_argument("--quick", action="store_true", help="3 runs of each")
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    repeat = 3 if args.quick else args.repeat
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        run_once(True, 1, Path(tmp) / "warm")   # the page cache: torch's files, both alike
        for i in range(repeat):
            for traced in (False, True) if i % 2 == 0 else (True, False):
                times[traced].append(run_once(traced, args.epochs, Path(tmp) / f"{i}-{traced}"))
    plain, traced = statistics.median(times[False]), statistics.median(times[True])
    print("| 2-rank step (gloo, CPU) | untraced | traced | ratio |")
    print("|---|---|---|---|")
    print(f"| {args.epochs} epochs, {repeat} runs each, median | {plain:.2f} s | "
          f"{traced:.2f} s | {traced / plain:.3f}x |")
    print(f"all untraced: {', '.join(f'{t:.2f}' for t in times[False])}; "
          f"all traced: {', '.join(f'{t:.2f}' for t in times[True])}")
    for name, extra in per_call().items():
        print(f"hooked {name}: +{extra:.2f} us a call over the original")
    goals.check("rank-level trace, 2-rank step wall", traced / plain, "<=", 1.10,
                unit="x untraced")
    goals.save()


if __name__ == "__main__":
    main()
