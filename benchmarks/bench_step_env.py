"""Benchmark: installing a step's environment before and after the runtime split (issue 36).

A step with a TabularSchema input and an MLflowModel output, on Azure ML, needs mlpipe's
runtime, pyarrow, full mlflow below 2.19 and azureml-mlflow (what `mlpipe environment
--pipeline` writes for it). Before the split the runtime was the whole of mlpipe: the same
requirements with ``mlpipe-aml[authoring]`` (azure-ai-ml, SQLAlchemy, alembic, psycopg,
cryptography, ...). Each is installed into a fresh virtual environment from this checkout's
wheel and pip's configured sources, with uv (the resolver `submit --isolate` uses), taking
turns; uv's cache is warmed first, so the figures are resolving, linking and byte-compiling,
not downloading. Reported: the wall time of each (best of --repeat), their ratio, and the
number of distributions each installs; a set that does not resolve is reported as such.

    python benchmarks/bench_step_env.py [--quick] [--repeat 3]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import Goals

#: What the step needs beside the runtime (mlpipe.checks.needs, as `mlpipe environment`
#: writes it for tests/fixtures/runtime_install/fit.py).
NEEDS = ["pyarrow>=14", "mlflow>=2.16,<2.19", "azureml-mlflow>=1.57"]


def install(uv: str, sources: list[str], requirements: list[str], folder: Path
            ) -> tuple[float, int | None, str]:
    """(wall seconds, distributions installed or None when it failed, last line of output)."""
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(folder)], check=True)
    python = str(folder / "bin" / "python")
    start = time.perf_counter()
    done = subprocess.run([uv, "pip", "install", "--python", python, "--index-strategy",
                           "unsafe-best-match", *sources, "--compile-bytecode",
                           *requirements], capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - start
    if done.returncode != 0:
        return took, None, (done.stderr.strip().splitlines() or ["failed"])[-1]
    listed = subprocess.run([uv, "pip", "list", "--python", python, "--format", "freeze"],
                            capture_output=True, text=True, check=True).stdout
    return took, len(listed.split()), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one install of each")
    Goals.add_argument(parser)
    args = parser.parse_args()
    if args.quick:
        args.repeat = 1
    goals = Goals.from_args(args)

    from mlpipe.backends.local.isolation import _uv, pip_sources
    from mlpipe.wheel import build_wheel

    uv = _uv()
    if uv is None:
        sys.exit("uv is not installed here (pip install uv)")
    sources = pip_sources()
    with tempfile.TemporaryDirectory(prefix="bench-step-env-") as tmp:
        root = Path(tmp)
        wheel = build_wheel(root / "wheels").resolve()
        sets = {"after: mlpipe-aml (the runtime)": [f"mlpipe-aml @ {wheel.as_uri()}", *NEEDS],
                "before: mlpipe-aml[authoring]": [f"mlpipe-aml[authoring] @ {wheel.as_uri()}",
                                                  *NEEDS]}
        for requirements in sets.values():  # warm uv's cache: no figure includes a download
            install(uv, sources, requirements, root / "warm")
        times: dict[str, list[float]] = {name: [] for name in sets}
        counts: dict[str, int | None] = {}
        errors: dict[str, str] = {}
        for _ in range(args.repeat):
            for name, requirements in sets.items():  # taking turns
                took, count, error = install(uv, sources, requirements, root / "venv")
                times[name].append(took)
                counts[name] = count
                if error:
                    errors[name] = error
    print(f"a step environment: the runtime + {', '.join(NEEDS)} (uv, warm cache, "
          f"best of {args.repeat})")
    for name in sets:
        state = (f"{counts[name]} distributions" if counts[name] is not None else
                 f"does not resolve: {errors[name]}")
        print(f"  {name:34s} {min(times[name]):6.2f} s   {state}")
    (after_name, after), (before_name, before) = ((n, min(times[n])) for n in sets)
    if all(counts[n] is not None for n in sets):
        print(f"  after / before: {after / before:.2f}x the time, "
              f"{counts[after_name]} / {counts[before_name]} distributions")
        goals.check("a step environment installs faster without the authoring side",
                    after / before, "<=", 1.0, unit="x the install before the split")
    goals.save()


if __name__ == "__main__":
    main()
