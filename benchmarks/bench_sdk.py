"""`mlpipe check` of azure-ai-ml Python pipelines (issue 39), whole processes, against their
floor in the same run: `python -c "import azure.ai.ml"` (what reading any such file costs
before mlpipe does anything: the user's module imports azure-ai-ml).

The pipelines: the team fixture's job (`tests/fixtures/azure/sdk/teams.py:job`: a component
loaded from YAML, a `command()` builder, settings set on the job), its nested pipeline
(`pipelines.py:nested`), the tutorial's defect classifier (`pipelines/defect_classifier_aml.py`:
three `command()` steps, one DDP), and, where the shared corpus is present, two of azure-ai-ml's own
test configurations (`nyc_taxi_data_regression`, five components; `automl_job_in_pipeline`).
Each `check` runs with an empty cache of its own (its first read, the dearest), alternated
with the floor so load on the machine hits both alike; figures are CPU (user + system of the
child), best of `--repeat`. Goal: each ≤ 2x the floor.
Run: ``.venv/bin/python benchmarks/bench_sdk.py [--quick] [--repeat R]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from goals import Goals

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "azure-ai-ml-test-configs" / "dsl_pipeline"
#: `check` of an azure-ai-ml pipeline file: at most this many times `import azure.ai.ml`
GOAL = 2.0

PIPELINES = {
    "teams.py:job": ROOT / "tests" / "fixtures" / "azure" / "sdk" / "teams.py:job",
    "pipelines.py:nested": ROOT / "tests" / "fixtures" / "azure" / "sdk" / "pipelines.py:nested",
    "defect_classifier_aml": ROOT / "pipelines" / "defect_classifier_aml.py:"
                                    "defect_classifier_aml",
    "nyc_taxi_data_regression": CORPUS / "nyc_taxi_data_regression" / "pipeline.py:"
                                         "generate_dsl_pipeline",
    "automl_job_in_pipeline": CORPUS / "automl_job_in_pipeline" / "pipeline.py:"
                                       "generate_dsl_pipeline",
}


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str], cache: Path) -> tuple[float, float]:
    """(wall, CPU) of one process; `check` exits 0 or 1 (findings), never 2."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    env["XDG_CACHE_HOME"] = str(cache)
    cpu, t0 = _cpu_children(), time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    wall, used = time.perf_counter() - t0, _cpu_children() - cpu
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr}")
    return wall, used


def measure(target: str, repeat: int) -> dict[str, tuple[float, float]]:
    floor = ["-c", "import azure.ai.ml"]
    check = ["-m", "mlpipe.cli", "check", target]
    best = {"floor": (float("inf"), float("inf")), "check": (float("inf"), float("inf"))}
    with tempfile.TemporaryDirectory(prefix="bench-sdk-") as tmp:
        _run(floor, Path(tmp) / "warm")  # bytecode, page cache
        _run(check, Path(tmp) / "warm")
        for i in range(repeat):
            for name, args in (("floor", floor), ("check", check)):
                wall, cpu = _run(args, Path(tmp) / f"cache-{i}")  # a first read each time
                best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="best of 3")
    parser.add_argument("--repeat", type=int, default=None)
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    repeat = args.repeat or (3 if args.quick else 7)
    print("| pipeline | `import azure.ai.ml` | `mlpipe check` | check / import (CPU) |")
    print("|---|---:|---:|---:|")
    for name, target in PIPELINES.items():
        if not Path(str(target).rsplit(":", 1)[0]).exists():
            print(f"| {name} | (not here) | | |")
            continue
        best = measure(str(target), repeat)
        ratio = best["check"][1] / best["floor"][1]
        print(f"| {name} | {best['floor'][1]:.3f} s CPU ({best['floor'][0]:.3f} s wall) "
              f"| {best['check'][1]:.3f} s CPU ({best['check'][0]:.3f} s wall) "
              f"| {ratio:.2f}x |", flush=True)
        goals.check(f"`mlpipe check` of the azure-ai-ml pipeline {name}", ratio, "<=", GOAL,
                    unit="x import azure.ai.ml (CPU)",
                    detail=f"{best['check'][1]:.3f} s against {best['floor'][1]:.3f} s")
    print(f"(best of {repeat}; cpu count {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f})")
    goals.save()


if __name__ == "__main__":
    main()
