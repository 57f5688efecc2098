"""Export speed: mlpipe's YAML export against azure-ai-ml's build + dump of the same pipeline.

For N in 10, 100, 1,000, 5,000 steps (a chain over three components with a parameter each),
measures in one run:
  - mlpipe: trace the @pipeline and write pipeline.yml + component YAMLs (export_pipeline);
  - azure-ai-ml: build the same pipeline with its dsl (components from load_component) and
    dump it to YAML (PipelineJob.dump).
Prints a Markdown table of seconds and ratios. Goal: at least 10x at 1,000 steps (trace +
export). Usage:
    .venv/bin/python benchmarks/bench_azure_export.py [--quick] [N ...]
"""
from __future__ import annotations

import argparse
import atexit
import logging
import pathlib
import shutil
import sys
import tempfile
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goals import Goals  # noqa: E402

from mlpipe import pipeline  # noqa: E402
from mlpipe.backends.azure.export import write_export  # noqa: E402

# The components live in a module of their own (a step process imports a component's module;
# export refuses one defined in __main__, MP113), written into a throw-away code folder.
COMPONENTS = '''
from mlpipe import Compute, Environment, Input, Output, Param, component

ENV = Environment("bench-env", version="1")


@component(environment=ENV, compute=Compute("cpu-cluster"))
def load(raw: Input["uri_folder"], out: Output["uri_folder"], rows: Param[int, 1:100] = 5):
    pass


@component(environment=ENV, compute=Compute("cpu-cluster"))
def transform(data: Input["uri_folder"], out: Output["uri_folder"], scale: Param[float] = 1.0):
    pass


@component(environment=ENV, compute=Compute("gpu-cluster"))
def fit(data: Input["uri_folder"], out: Output["uri_folder"], epochs: Param[int, 1:200] = 3):
    pass
'''
CODE = pathlib.Path(tempfile.mkdtemp(prefix="bench-azure-export-"))
atexit.register(shutil.rmtree, CODE, True)
(CODE / "bench_export_steps.py").write_text(COMPONENTS)
sys.path.insert(0, str(CODE))
from bench_export_steps import fit, load, transform  # noqa: E402


def mlpipe_pipeline(n: int):
    @pipeline(name=f"bench-{n}")
    def bench(raw):
        out = load(raw=raw).out
        for i in range(n - 1):
            out = (transform(data=out, scale=float(i)) if i % 2 else fit(data=out, epochs=3)).out
        return {"result": out}
    return bench


def time_mlpipe(n: int, out: pathlib.Path) -> tuple[float, float]:
    start = time.perf_counter()
    spec = mlpipe_pipeline(n).spec
    traced = time.perf_counter()
    write_export(spec, out, inputs={"raw": "azureml:raw:1"}, code_root=CODE)
    done = time.perf_counter()
    return done - start, done - traced


def time_azure(n: int, mlpipe_out: pathlib.Path, out: pathlib.Path) -> float:
    from azure.ai.ml import Input as AInput
    from azure.ai.ml import dsl, load_component

    start = time.perf_counter()
    comps = {name: load_component(mlpipe_out / "components" / f"{name}.yml")
             for name in ("load", "transform", "fit")}

    @dsl.pipeline(name=f"bench-{n}", default_compute="cpu-cluster")
    def bench(raw):
        out = comps["load"](raw=raw).outputs.out
        for i in range(n - 1):
            step = (comps["transform"](data=out, scale=float(i)) if i % 2
                    else comps["fit"](data=out, epochs=3))
            if not i % 2:
                step.compute = "gpu-cluster"
            out = step.outputs.out
        return {"result": out}

    job = bench(raw=AInput(type="uri_folder", path="azureml:raw:1"))
    job.dump(out / "pipeline.yml")
    return time.perf_counter() - start


def main(sizes: list[int], goals: Goals) -> None:
    logging.getLogger("azure").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore")
    import azure.ai.ml  # noqa: F401  (import cost is not part of either measurement)

    print("| steps | mlpipe trace + export (s) | of which export (s) "
          "| azure-ai-ml build + dump (s) | speed-up (trace + export) | speed-up (export) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            total, export = time_mlpipe(n, pathlib.Path(a))
            baseline = time_azure(n, pathlib.Path(a), pathlib.Path(b))
        print(f"| {n:,} | {total:.3f} | {export:.3f} | {baseline:.2f} | "
              f"{baseline / total:.0f}x | {baseline / export:.0f}x |", flush=True)
        if n == 1000:
            goals.check("trace + export of 1,000 steps, against azure-ai-ml's build + dump",
                        baseline / total, ">=", 10, unit="x faster")
    goals.save()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="*")
    parser.add_argument("--quick", action="store_true", help="1,000 steps only")
    Goals.add_argument(parser)
    args = parser.parse_args()
    main(args.sizes or ([1000] if args.quick else [10, 100, 1000, 5000]), Goals.from_args(args))
