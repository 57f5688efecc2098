"""Benchmark: the differential rehearsal of the example's DDP step against its own correctness
run (issue 40: "the differential rehearsal of the example's DDP step takes <= 2x its own
correctness run").

The example's ``train_cnn`` (``components/defect_ddp.py``) on a small prepared data set (40
images a class), a few epochs. The correctness run is the step launched once at 1x2 through the
local launcher, as the executor starts it (``python -m mlpipe.runtime.step``, its step record,
no probe). The rehearsal is ``backends/local/rehearsal.rehearse``: the same step at world size
1 and at 1x2, each rank under the rehearsal probe, started together, and the judgement.
Alternated ``--repeat`` times (load on the machine hits both alike); medians of the wall time,
and the CPU time (user + system of every process) beside it.

    python benchmarks/bench_rehearse.py [--epochs 10] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from goals import Goals

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]


def _cpu() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 epochs, 3 runs of each")
    Goals.add_argument(parser)
    args = parser.parse_args()
    if args.quick:
        args.epochs, args.repeat = 3, 3
    goals = Goals.from_args(args)

    from components.defect import prepare
    from components.defect_ddp import train_cnn
    from components.synthetic import make_dataset
    from mlpipe.backends.local.rehearsal import rehearse, run_once, scaled
    from mlpipe.judgements.rehearsal import judge

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-rehearse-"))
    try:
        raw, split = make_dataset(tmp / "data", per_class=40)
        prepare.fn(str(raw), str(split), str(tmp / "examples"), str(tmp / "labels.json"))
        inputs = {"examples": str(tmp / "examples"), "labels": str(tmp / "labels.json")}
        params = {"epochs": args.epochs}
        where = {"cwd": str(ROOT), "sys_path": [str(ROOT)], "timeout": 600.0}
        spec = train_cnn.spec
        plain, both, plain_cpu, both_cpu = [], [], [], []
        for i in range(args.repeat):
            c0, t0 = _cpu(), time.perf_counter()
            run = run_once(scaled(spec, 1, 2), inputs=inputs, params=params,
                           work=tmp / "plain", probe_ranks=False, **where)
            plain.append(time.perf_counter() - t0)
            plain_cpu.append(_cpu() - c0)
            if run.failure:
                raise SystemExit(f"bench_rehearse: the correctness run failed: {run.failure}")
            c0, t0 = _cpu(), time.perf_counter()
            one, many = rehearse(spec, inputs=inputs, params=params, work=tmp / "rehearse",
                                 scale=(1, 2), **where)
            found = judge(one.facts(), many.facts(), step="train_cnn")
            both.append(time.perf_counter() - t0)
            both_cpu.append(_cpu() - c0)
            codes = [d.code for d in found.diagnostics]
            print(f"run {i + 1}: correctness run {plain[-1]:.2f} s, rehearsal {both[-1]:.2f} s "
                  f"(world size 1 {one.seconds:.2f} s, 2 ranks {many.seconds:.2f} s), "
                  f"found {codes or 'nothing'}", flush=True)
        wall, cpu = statistics.median(both), statistics.median(both_cpu)
        base, base_cpu = statistics.median(plain), statistics.median(plain_cpu)
        print(f"correctness run 1x2: {base:.2f} s wall, {base_cpu:.2f} s CPU (median of "
              f"{args.repeat}); rehearsal: {wall:.2f} s wall, {cpu:.2f} s CPU; load "
              f"{os.getloadavg()[0]:.1f}")
        goals.check("rehearsal of the example's DDP step (1 vs 1x2), wall", wall / base, "<=",
                    2.0, unit="x its correctness run", detail=f"CPU {cpu / base_cpu:.2f}x")
        goals.save()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
