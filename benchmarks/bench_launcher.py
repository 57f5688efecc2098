"""Benchmark: a local distributed step against ``torchrun`` on the same DDP script (issue 29).

``launcher_ddp.py`` (gloo on CPU, a logistic regression on synthetic data, a few hundred
optimiser steps) runs as ``torchrun --standalone --nnodes 1 --nproc-per-node N`` and as the
mlpipe step ``launcher_step.train`` through the local executor with ``--local-scale`` 1x2, 1x4
and 2x2. For 2x2 the torchrun anchor is two agents on this host, ``torchrun --nnodes 2
--node-rank I`` with a c10d rendezvous, started together. Both launches get the same
environment (``OMP_NUM_THREADS=1``, which torchrun would otherwise set for its workers alone).

Each shape alternates torchrun and mlpipe ``--repeat`` times (so load on the machine hits both
alike) and reports medians of:

- wall: torchrun's command from start to exit; mlpipe's ``LocalExecutor.submit`` of the
  one-step pipeline (the checks, the launch, the ranks' records, the coordination check, the
  outputs into the artifact store, the run's evidence);
- CPU: user + system of every process of the launch (for mlpipe, also the executor's own);
- per rank (the slowest rank): ``start`` (the launch began -> the rank's process started),
  ``first collective`` (process start -> ``init_process_group`` and a first barrier done: the
  interpreter, imports, the rendezvous), ``training`` (that barrier -> the barrier after the
  last step), and ``after`` (the slowest rank's training done -> the launch's end: the
  group's teardown and, for mlpipe, the ranks' records, the finisher and the store).

Goals (``make bench-check``): mlpipe's wall <= 1.15 x torchrun's, its training <= 1.05 x.

A torchrun worker can abort at interpreter exit after training ("terminate called without an
active exception": torch's gloo threads destroyed at teardown; mlpipe's ranks leave through
``os._exit`` once recorded): its agent fails and the other agent of a 2-node run would wait in
torchrun's exit barrier for 300 s. The other agents are stopped at once, and the run is run
again (at most twice) and counted in the output.

    python benchmarks/bench_launcher.py [--shapes 1x2 1x4 2x2] [--steps 300] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from goals import Goals

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
#: torchrun runs a worker of which aborted at exit, by shape (run again, and reported).
ABORTED: dict[str, int] = {}


@dataclass
class Sample:
    wall: float
    cpu: float
    start: float      # the launch began -> the slowest rank's process started
    first: float      # process start -> first collective done, the slowest rank
    training: float   # first collective -> the barrier after the last step, the slowest rank
    after: float      # the last rank's training done -> the launch's end (teardown, records)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _ranks(times: Path, world: int, began: float, what: str, wall: float
           ) -> tuple[float, float, float, float]:
    found = [json.loads(p.read_text()) for p in sorted(times.glob("rank-*.json"))]
    if len(found) != world:
        raise SystemExit(f"bench_launcher: {what} left {len(found)} rank timings of {world}")
    return (max(r["started"] - began for r in found),
            max(r["joined"] - r["started"] for r in found),
            max(r["trained"] - r["joined"] for r in found),
            began + wall - max(r["trained"] for r in found))


def _fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def run_torchrun(nodes: int, ppn: int, steps: int, root: Path, port: int) -> Sample:
    times, out = _fresh(root / "times"), _fresh(root / "torchrun-out")
    env = {**os.environ, "BENCH_TIMES": str(times)}
    script = [str(root / "launcher_ddp.py"), str(out), str(steps)]
    if nodes == 1:
        commands = [[*TORCHRUN, "--standalone", "--nnodes", "1", "--nproc-per-node", str(ppn),
                     *script]]
    else:
        commands = [[*TORCHRUN, "--nnodes", str(nodes), "--nproc-per-node", str(ppn),
                     "--node-rank", str(i), "--rdzv-backend", "c10d",
                     "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"bench-{port}",
                     *script] for i in range(nodes)]
    cpu0, began, t0 = _cpu(resource.RUSAGE_CHILDREN), time.time(), time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:
        agents = [subprocess.Popen(c, cwd=root, env=env, stdout=subprocess.DEVNULL,
                                   stderr=errors, text=True) for c in commands]
        # an agent whose worker failed ends at once, while the other waits in torchrun's exit
        # barrier for 300 s: stop the others as soon as one fails
        stopped: set[int] = set()
        while any(a.poll() is None for a in agents):
            if any(a.returncode not in (None, 0) for a in agents):
                for i, a in enumerate(agents):
                    if a.poll() is None:
                        a.kill()
                        stopped.add(i)
            time.sleep(0.01)
        wall = time.perf_counter() - t0
        cpu = _cpu(resource.RUSAGE_CHILDREN) - cpu0
        errors.seek(0)
        err = errors.read()
    code = next((a.returncode for i, a in enumerate(agents)
                 if a.returncode != 0 and i not in stopped), 0)
    if code != 0:
        raise TorchrunFailed(code, err)
    return Sample(wall, cpu, *_ranks(times, nodes * ppn, began, "torchrun", wall))


class TorchrunFailed(Exception):
    def __init__(self, code: int, err: str) -> None:
        super().__init__(f"torchrun exited {code}:\n{err[-3000:]}")
        # torch's gloo worker threads destroyed at interpreter exit, after training (the ranks
        # wrote their times): torchrun's own failure, which a user's script meets as well
        self.at_teardown = "terminate called without an active exception" in err


def torchrun_sample(nodes: int, ppn: int, steps: int, root: Path, tries: int = 3) -> Sample:
    """One torchrun run; a run that torch aborted at teardown is counted and run again."""
    from mlpipe.backends.local.launcher import free_port

    for attempt in range(tries):
        try:
            return run_torchrun(nodes, ppn, steps, root, free_port())
        except TorchrunFailed as failed:
            if not failed.at_teardown or attempt == tries - 1:
                raise SystemExit(f"bench_launcher: {failed}") from None
            ABORTED[f"{nodes}x{ppn}"] = ABORTED.get(f"{nodes}x{ppn}", 0) + 1
            print(f"torchrun {nodes}x{ppn}: a worker aborted at exit ('terminate called "
                  f"without an active exception'); run again", flush=True)
    raise AssertionError("unreachable")


def run_mlpipe(nodes: int, ppn: int, steps: int, root: Path) -> Sample:
    import launcher_step

    from mlpipe.backends.local.executor import LocalExecutor
    from mlpipe.graph import compile_pipeline

    times = _fresh(root / "times")
    os.environ["BENCH_TIMES"] = str(times)
    graph = compile_pipeline(launcher_step.ddp.spec)
    executor = LocalExecutor(reuse=False, stream=None, local_scale={"ddp_train": (nodes, ppn)})
    cpu0 = _cpu(resource.RUSAGE_CHILDREN) + _cpu(resource.RUSAGE_SELF)
    began, t0 = time.time(), time.perf_counter()
    result = executor.submit(graph, inputs={}, params={"steps": steps})
    wall = time.perf_counter() - t0
    cpu = _cpu(resource.RUSAGE_CHILDREN) + _cpu(resource.RUSAGE_SELF) - cpu0
    if result.status != "succeeded":
        raise SystemExit(f"bench_launcher: the mlpipe step {result.status}")
    return Sample(wall, cpu, *_ranks(times, nodes * ppn, began, "mlpipe", wall))


def _median(samples: list[Sample], field: str) -> float:
    return statistics.median(getattr(s, field) for s in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["1x2", "1x4", "2x2"],
                        metavar="NODESxPROCS")
    parser.add_argument("--steps", type=int, default=300, help="optimiser steps a run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternated")
    parser.add_argument("--quick", action="store_true",
                        help="1x2 and 2x2, 200 steps, 7 runs of each (the goals)")
    Goals.add_argument(parser)
    args = parser.parse_args()
    if args.quick:
        # seven: one run's training phase differs from the next by up to 15 % (ranks sharing two
        # cores), so a median of three flipped the 5 % goal from run to run
        args.shapes, args.steps, args.repeat = ["1x2", "2x2"], 200, 7
    goals = Goals.from_args(args)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("bench_launcher: needs torch (pip install torch, the CPU build)") from None
    with tempfile.TemporaryDirectory(prefix="mlpipe-bench-launcher-") as tmp:
        root = Path(tmp)
        for name in ("launcher_ddp.py", "launcher_step.py"):
            shutil.copy(HERE / name, root / name)
        (root / "mlpipe.toml").write_text("")
        for var in ("MLPIPE_STORE_URL", "MLPIPE_ARTIFACT_ROOT", "MLPIPE_SHARED_ARTIFACTS"):
            os.environ.pop(var, None)
        os.environ["MLPIPE_HOME"] = str(root / "evidence")
        os.environ["OMP_NUM_THREADS"] = "1"
        os.chdir(root)
        sys.path.insert(0, str(root))
        rows = []
        for shape in args.shapes:
            nodes, ppn = (int(n) for n in shape.split("x"))
            torchrun: list[Sample] = []
            mlpipe: list[Sample] = []
            for _ in range(args.repeat):   # taking turns, so that load hits both alike
                torchrun.append(torchrun_sample(nodes, ppn, args.steps, root))
                mlpipe.append(run_mlpipe(nodes, ppn, args.steps, root))
            rows.append((shape, torchrun, mlpipe))
            wall = _median(mlpipe, "wall") / _median(torchrun, "wall")
            training = _median(mlpipe, "training") / _median(torchrun, "training")
            goals.check(f"local step {shape} wall", wall, "<=", 1.15, unit="x torchrun",
                        detail=f"{_median(mlpipe, 'wall'):.2f} s vs "
                               f"{_median(torchrun, 'wall'):.2f} s, {args.steps} steps")
            goals.check(f"local step {shape} training", training, "<=", 1.05,
                        unit="x torchrun",
                        detail=f"{_median(mlpipe, 'training'):.2f} s vs "
                               f"{_median(torchrun, 'training'):.2f} s")
    load = os.getloadavg()[0]
    print(f"\n{args.steps} steps, medians of {args.repeat} alternated runs, load average "
          f"{load:.1f} on {os.cpu_count()} cores\n")
    print("| shape | launcher | wall | CPU | start (slowest rank) | to first collective | "
          "training | after training | wall ratio | training ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape, torchrun, mlpipe in rows:
        for name, samples in (("torchrun", torchrun), ("mlpipe", mlpipe)):
            ratio = "" if name == "torchrun" else (
                f"{_median(mlpipe, 'wall') / _median(torchrun, 'wall'):.2f}x | "
                f"{_median(mlpipe, 'training') / _median(torchrun, 'training'):.2f}x")
            print(f"| {shape} | {name} | {_median(samples, 'wall'):.2f} s | "
                  f"{_median(samples, 'cpu'):.2f} s | {_median(samples, 'start'):.2f} s | "
                  f"{_median(samples, 'first'):.2f} s | {_median(samples, 'training'):.2f} s | "
                  f"{_median(samples, 'after'):.2f} s | "
                  f"{ratio or ' | '} |")
    for shape, count in ABORTED.items():
        print(f"torchrun {shape}: {count} run(s) a worker of which aborted at exit, run again")
    goals.save()


if __name__ == "__main__":
    main()
