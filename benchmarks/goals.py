"""The performance goals of docs/performance.md, checked: ``make bench-check``.

Runs the quick form of every benchmark under ``benchmarks/`` (each with ``--quick --goals
FILE``), collects the goals each one measured (a ratio against its floor, or a time, measured
in the same run) and exits 1 when one is missed, or when a benchmark fails to run. A benchmark
without a goal of its own is still run, as a smoke test of its quick form.

A benchmark records its goals with ``Goals``::

    goals = Goals.from_args(args)            # --goals FILE, or nothing to record
    goals.check("evidence, sealed, 1M step runs", ratio, "<=", 1.5, unit="x --version")
    goals.save()

Run: ``.venv/bin/python benchmarks/goals.py [--only NAME ...]`` (what ``make bench-check``
does). Timings are wall clock, best of several runs, each figure alternated with its floor, so
load on the machine hits both alike; on a machine shared with other jobs a goal near its limit
can still flip: the summary prints the load average at the start and the end.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Every benchmark and its quick form, in the order they run.
BENCHMARKS: dict[str, list[str]] = {
    "bench_store": ["--quick"],
    "bench_gc": ["--quick"],
    "bench_roots": ["--quick"],
    "bench_check": ["--quick"],
    "bench_compile": ["--quick"],
    "bench_local": ["--quick"],
    "bench_build": ["--quick"],
    "bench_azure_export": ["--quick"],
    "bench_evidence": ["--quick"],
    "bench_signing": ["--quick"],
    "bench_contracts": ["--quick"],
    "bench_splitrows": ["--quick"],
    "bench_runtime": ["--quick"],
    "bench_azure_submit": ["--quick"],
    "bench_preflight": ["--quick"],
    "bench_yaml": ["--quick"],
    "bench_sdk": ["--quick"],
    "bench_launcher": ["--quick"],
    "bench_rehearse": ["--quick"],
    "bench_trace": ["--quick"],
    # make test-fast, once (its whole form, five runs of make test, is `make bench-suite`)
    "bench_suite": ["--quick"],
}


@dataclass
class Goal:
    name: str
    value: float
    op: str
    limit: float
    unit: str
    met: bool
    detail: str = ""

    def line(self) -> str:
        verdict = "met" if self.met else "MISSED"
        return (f"goal {self.name}: {self.value:.3g} {self.unit} (goal {self.op} "
                f"{self.limit:g}): {verdict}" + (f" - {self.detail}" if self.detail else ""))


class Goals:
    """The goals one benchmark run measured; ``save()`` writes them where ``--goals`` said."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.goals: list[Goal] = []

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Goals:
        return cls(getattr(args, "goals", None))

    @staticmethod
    def add_argument(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--goals", metavar="FILE", default=None,
                            help="write the goals measured to FILE (JSON), for goals.py")

    def check(self, name: str, value: float, op: str, limit: float, *, unit: str = "x",
              detail: str = "") -> bool:
        met = value <= limit if op == "<=" else value >= limit
        goal = Goal(name, float(value), op, float(limit), unit, met, detail)
        self.goals.append(goal)
        print(goal.line(), flush=True)
        return met

    def save(self) -> None:
        if self.path:
            Path(self.path).write_text(json.dumps([asdict(g) for g in self.goals], indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, metavar="NAME",
                        help="run only these benchmarks (e.g. bench_store)")
    args = parser.parse_args()
    names = [n for n in BENCHMARKS if not args.only or n in args.only]
    load_before = os.getloadavg()[0]
    results: dict[str, list[Goal]] = {}
    failed: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mlpipe-goals-") as tmp:
        for name in names:
            out = Path(tmp) / f"{name}.json"
            print(f"\n=== {name} {' '.join(BENCHMARKS[name])}", flush=True)
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, str(HERE / f"{name}.py"), *BENCHMARKS[name],
                                   "--goals", str(out)], cwd=HERE.parent)
            print(f"=== {name}: {time.perf_counter() - t0:.0f} s", flush=True)
            if done.returncode != 0:
                failed.append(name)
            results[name] = ([Goal(**g) for g in json.loads(out.read_text())]
                             if out.exists() else [])
    missed = [(n, g) for n, goals in results.items() for g in goals if not g.met]
    print(f"\n=== goals ({time.perf_counter() - started:.0f} s; load average "
          f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
          f"{os.cpu_count()} cores)")
    for name, goals in results.items():
        for goal in goals:
            print(f"  {name}: {goal.line()}")
        if not goals:
            print(f"  {name}: no goal of its own (ran as a smoke test)"
                  + (": FAILED" if name in failed else ""))
    for name in failed:
        print(f"  {name}: the benchmark failed (exit status above)")
    if missed or failed:
        print(f"{len(missed)} goal(s) missed, {len(failed)} benchmark(s) failed")
        return 1
    print(f"every goal met ({sum(len(g) for g in results.values())} goals)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
