"""`mlpipe check` on the example pipelines: this tree against a baseline commit, same run.

Two figures per pipeline: the checker alone (``check_pipeline`` on the loaded spec, in
process, best of 50), and the command a user runs (``mlpipe check FILE`` in a fresh
interpreter, best of 7, imports included). The baseline is the tree of a git commit
(``--baseline REF``, by default the commit before issue 11's checks) exported to a temporary
folder and run from there with the same interpreter, alternating with this tree so that load
on the machine hits both alike. Run: ``.venv/bin/python benchmarks/bench_check.py``.
Prints a Markdown table for docs/performance.md.

Issue 13's goals, measured in both forms (``--quick`` measures only them): ``mlpipe check`` of
each example pipeline at most 0.3 s whole process (printed with its ratio to ``mlpipe
--version``, the floor, measured alternately in the same run), and no library a step body
imports (torch, numpy, pyarrow, ...) imported by the check. The 0.3 s is judged on the process's
CPU time (best of the runs; the wall time is printed with it): the command waits on nothing
else, and on a machine shared with other jobs its wall time measures the neighbours.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from goals import Goals

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ("pipelines/defect_classifier.py", "pipelines/defect_classifier_ddp.py")
#: Job files as teams have them (issue 27): a command job without type:, a standalone sweep,
#: an AutoML job. Held to the same 0.3 s; reading YAML imports yaml, so the library goal is
#: the Python pipelines' only.
JOB_FILES = ("tests/fixtures/azure/command_job/job.yml",
             "tests/fixtures/azure/command_job/sweep.yml",
             "tests/fixtures/azure/command_job/automl.yml")
#: main before issue 11's checks landed (the layers merge it was built on)
DEFAULT_BASELINE = "5607034"
GOAL_S = 0.3
#: What the example bodies import (and the heavy libraries a check must never need). Not
#: PyYAML since issue 36: check reads the registered environments a project declares in
#: environments/*.yml (MP631-MP635), as the example now does; it is the runtime's own
#: dependency, installed in every step environment.
BODY_LIBRARIES = ("torch", "numpy", "pyarrow", "networkx", "sqlalchemy", "azure",
                  "mlflow", "pint", "jsonschema")
PROBE = r"""
import json, sys
sys.argv = ["mlpipe", "check", sys.argv[1]]
from mlpipe.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2:]))),
      file=sys.stderr)
"""

IN_PROCESS = r"""
import sys, time
from mlpipe.checks import check_pipeline
from mlpipe.loader import load_spec
spec, _ = load_spec(sys.argv[1])
check_pipeline(spec)  # warm: parse caches, lazy imports
best = min((lambda t0: (check_pipeline(spec), time.perf_counter() - t0)[1])(time.perf_counter())
           for _ in range(int(sys.argv[2])))
print(best)
"""


def export_tree(ref: str, into: Path) -> Path:
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("MLPIPE_HOME", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules load from bytecode
    return env


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def version(tree: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``mlpipe --version``."""
    cpu = _cpu_children()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mlpipe.cli", "--version"], cwd=tree, env=_env(tree),
                   capture_output=True, check=True)
    return time.perf_counter() - t0, _cpu_children() - cpu


def imported(pipeline: str) -> list[str]:
    """The body libraries (and heavy ones) a fresh `mlpipe check PIPELINE` imported."""
    import json

    probe = PROBE.replace("sys.argv[2:]", repr(list(BODY_LIBRARIES)))
    done = subprocess.run([sys.executable, "-c", probe, pipeline], cwd=ROOT, env=_env(ROOT),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stderr.strip().splitlines()[-1])


def goals_of_check(goals: Goals, runs: int) -> list[tuple[str, float, float]]:
    """Issue 13's goals: each example's `mlpipe check` against `mlpipe --version`."""
    rows = []
    for pipeline in (*PIPELINES, *JOB_FILES):
        command(ROOT, pipeline)  # warm: bytecode, page cache
        ours, floor, ours_cpu, floor_cpu = [], [], [], []
        for _ in range(runs):
            wall, cpu = version(ROOT)
            floor.append(wall)
            floor_cpu.append(cpu)
            cpu = _cpu_children()
            ours.append(command(ROOT, pipeline))
            ours_cpu.append(_cpu_children() - cpu)
        rows.append((pipeline, min(ours), min(floor), min(ours_cpu), min(floor_cpu)))
        goals.check(f"`mlpipe check {pipeline}`, whole process", min(ours_cpu), "<=", GOAL_S,
                    unit="s CPU", detail=f"{min(ours_cpu) / min(floor_cpu):.2f}x `mlpipe "
                                         f"--version` ({min(floor_cpu):.3f} s CPU); wall "
                                         f"{min(ours):.3f} s ({min(floor):.3f} s)")
        if pipeline in JOB_FILES:
            continue
        found = imported(pipeline)
        goals.check(f"libraries of step bodies imported by `mlpipe check {pipeline}`",
                    len(found), "<=", 0, unit="modules", detail=", ".join(found))
    return rows


def in_process(tree: Path, pipeline: str, repeat: int) -> float:
    done = subprocess.run([sys.executable, "-c", IN_PROCESS, pipeline, str(repeat)], cwd=tree,
                          env=_env(tree), capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def command(tree: Path, pipeline: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "check", pipeline], cwd=tree,
                          env=_env(tree), capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise RuntimeError(f"mlpipe check {pipeline} in {tree} failed:\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git commit to compare")
    parser.add_argument("--runs", type=int, default=7, help="fresh-interpreter runs each")
    parser.add_argument("--quick", action="store_true",
                        help="only issue 13's goals (no baseline commit)")
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    print("| pipeline | `mlpipe check` wall (CPU) | `mlpipe --version` wall (CPU) | ratio (CPU) |")
    print("|---|---:|---:|---:|")
    for pipeline, ours, floor, ours_cpu, floor_cpu in goals_of_check(goals, args.runs):
        print(f"| {pipeline} | {ours:.3f} s ({ours_cpu:.3f} s) | {floor:.3f} s ({floor_cpu:.3f} s)"
              f" | {ours / floor:.2f}x ({ours_cpu / floor_cpu:.2f}x) |")
    goals.save()
    if args.quick:
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        base = export_tree(args.baseline, Path(tmp))
        for pipeline in PIPELINES:
            ours_in = in_process(ROOT, pipeline, 50)
            base_in = in_process(base, pipeline, 50)
            ours_cmd, base_cmd = [], []
            for _ in range(args.runs):  # alternate, so load hits both alike
                ours_cmd.append(command(ROOT, pipeline))
                base_cmd.append(command(base, pipeline))
            rows.append((pipeline, ours_in, base_in, min(ours_cmd), min(base_cmd)))
            print(f"{pipeline}: checks {ours_in * 1e3:.2f} ms (baseline {base_in * 1e3:.2f} ms), "
                  f"mlpipe check {min(ours_cmd):.2f} s (baseline {min(base_cmd):.2f} s)",
                  file=sys.stderr)
    print(f"| pipeline | checks, this tree | checks, {args.baseline} | ratio | `mlpipe check`, "
          f"this tree | `mlpipe check`, {args.baseline} | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for pipeline, oi, bi, oc, bc in rows:
        print(f"| {pipeline} | {oi * 1e3:.2f} ms | {bi * 1e3:.2f} ms | {oi / bi:.2f}× "
              f"| {oc:.2f} s | {bc:.2f} s | {oc / bc:.2f}× |")


if __name__ == "__main__":
    main()
