"""Local runs of imported Azure ML YAML, whole `mlpipe submit` processes: what `--isolate`
adds to a run once its environment is built, against the same run on mlpipe's own interpreter
(the baseline, in the same run); and what recording the interpreter's package set costs,
against the library listing it replaces (``importlib.metadata``, each metadata file parsed).

The pipeline is a chain of script steps written as CLI v2 YAML into a throw-away project,
with an inline environment (an image and a conda file listing one pip package) and a data
path relative to the YAML; mlpipe runs from another folder. Figures: best of ``--repeat``
runs, each command alternated with its baseline, so load on the machine hits both alike. The
first build of the environment (uv, or venv and pip) is printed, not judged: it is a download.
Run: ``.venv/bin/python benchmarks/bench_yaml.py [--quick] [--steps N] [--repeat R]``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from goals import Goals

ROOT = Path(__file__).resolve().parents[1]

#: --isolate with its environment built: at most this much of the plain run's time
ISOLATE_GOAL = 1.25
#: listing the package set: at most this fraction of importlib.metadata's listing
LISTING_GOAL = 0.25

STEP = '''  s{i}:
    type: command
    command: python step.py --data ${{{{inputs.data}}}} --out ${{{{outputs.out}}}} --n {i}
    code: ./src
    environment:
      image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04
      conda_file: ./env/conda.yml
    inputs:
      data: {data}
    outputs:
      out: {{type: uri_folder}}
'''
SCRIPT = '''import argparse, os
p = argparse.ArgumentParser()
for a in ("--data", "--out", "--n"):
    p.add_argument(a)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "n.txt"), "w") as fh:
    fh.write(str(len(os.listdir(args.data)) if os.path.isdir(args.data) else 1) + args.n)
'''


def write_project(root: Path, steps: int) -> Path:
    pipe = root / "team"
    (pipe / "src").mkdir(parents=True)
    (pipe / "env").mkdir()
    (pipe / "data").mkdir()
    (pipe / "data" / "a.txt").write_text("a")
    (pipe / "src" / "step.py").write_text(SCRIPT)
    (pipe / "env" / "conda.yml").write_text(
        "dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - termcolor==3.3.0\n")
    jobs = "".join(STEP.format(i=i, data="{type: uri_folder, path: ./data}" if i == 0 else
                               f"${{{{parent.jobs.s{i - 1}.outputs.out}}}}")
                   for i in range(steps))
    (pipe / "pipeline.yml").write_text(f"type: pipeline\ndisplay_name: bench-yaml\njobs:\n{jobs}")
    (root / "run").mkdir()
    (root / "run" / "mlpipe.toml").write_text("")
    return pipe / "pipeline.yml"


def timed(argv: list[str], cwd: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return took


def listing(repeat: int) -> tuple[float, float]:
    """Best in-process time of mlpipe's package listing and of importlib.metadata's."""
    import importlib.metadata as meta

    from mlpipe.backends.local.isolation import installed

    def library() -> list[str]:
        return sorted(f"{d.metadata['Name']}=={d.version}" for d in meta.distributions())

    ours, theirs = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        installed()
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        library()
        theirs.append(time.perf_counter() - t)
    return min(ours), min(theirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 steps, best of 3")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=None)
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    steps = args.steps or (3 if args.quick else 5)
    repeat = args.repeat or (3 if args.quick else 5)
    mlpipe = [sys.executable, "-m", "mlpipe.cli", "submit"]
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; {steps} script "
          f"steps, best of {repeat}")
    with tempfile.TemporaryDirectory(prefix="mlpipe-bench-yaml-") as tmp:
        yml = write_project(Path(tmp), steps)
        cwd = Path(tmp) / "run"
        built = timed([*mlpipe, str(yml), "--isolate"], cwd)
        print(f"first --isolate run, building the environment: {built:.2f} s")
        figures: dict[str, list[float]] = {k: [] for k in ("plain", "isolated", "plain reused",
                                                             "isolated reused")}
        for _ in range(repeat):
            figures["plain"].append(timed([*mlpipe, str(yml), "--no-reuse"], cwd))
            figures["isolated"].append(timed([*mlpipe, str(yml), "--no-reuse", "--isolate"],
                                             cwd))
            figures["plain reused"].append(timed([*mlpipe, str(yml)], cwd))
            figures["isolated reused"].append(timed([*mlpipe, str(yml), "--isolate"], cwd))
        best = {k: min(v) for k, v in figures.items()}
        for name, value in best.items():
            print(f"  submit, {name}: {value:.3f} s")
        goals.check(f"submit --isolate (environment built), {steps} steps executed",
                    best["isolated"] / best["plain"], "<=", ISOLATE_GOAL, unit="x plain submit")
        goals.check(f"submit --isolate (environment built), {steps} steps reused",
                    best["isolated reused"] / best["plain reused"], "<=", ISOLATE_GOAL,
                    unit="x plain submit")
    ours, theirs = listing(repeat * 3)
    print(f"  package listing: {ours * 1000:.1f} ms (importlib.metadata: {theirs * 1000:.1f} ms)")
    goals.check("the package set recorded with each run", ours / theirs, "<=", LISTING_GOAL,
                unit="x importlib.metadata")
    goals.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
