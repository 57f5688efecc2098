"""Build + compile + check generated pipelines through mlpipe, azure-ai-ml and plain networkx.

Shapes: a chain (step i reads step i-1) and a fan-out/fan-in (one source, parallel middles,
then a binary tree of joins), at 10, 100, 1,000 and 5,000 steps. mlpipe's time covers tracing
the pipeline function, compiling it to the DAG and running every check; azure-ai-ml's covers
building the same pipeline with ``@dsl.pipeline`` and validating it offline
(``PipelineJob._validate``), up to 1,000 steps. Run: ``.venv/bin/python benchmarks/bench_build.py``
(``--quick`` for a smoke run). Prints a Markdown table for docs/performance.md.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import networkx as nx
from goals import Goals

from mlpipe import Input, Output, component, pipeline
from mlpipe.checks import check_pipeline


@component
def stage(out: Output["uri_folder"], a: Input["uri_folder"] = None, b: Input["uri_folder"] = None):
    pass


def plan(shape: str, n: int) -> list[tuple[int, ...]]:
    """Per step, the indexes of the earlier steps it reads (the same plan for every tool)."""
    if shape == "chain":
        return [()] + [(i - 1,) for i in range(1, n)]
    middles = max(1, (n - 1) // 2 + 1)
    steps: list[tuple[int, ...]] = [()] + [(0,)] * middles
    layer = list(range(1, middles + 1))
    while len(layer) > 1 and len(steps) < n:
        nxt = []
        for i in range(0, len(layer) - 1, 2):
            steps.append((layer[i], layer[i + 1]))
            nxt.append(len(steps) - 1)
        if len(layer) % 2:
            nxt.append(layer[-1])
        layer = nxt
    while len(steps) < n:
        steps.append((len(steps) - 1,))
    return steps[:n]


def mlpipe_build_and_check(steps: list[tuple[int, ...]]) -> int:
    @pipeline
    def generated():
        handles = []
        for sources in steps:
            handles.append(stage(**{p: handles[s].out for p, s in zip("ab", sources)}))
        return {"last": handles[-1].out}
    graph, diagnostics = check_pipeline(generated.spec)
    # MP113: this script's own component is defined in __main__ (the check still runs)
    assert not [d for d in diagnostics if d.severity.value == "error" and d.code != "MP113"], \
        diagnostics[:3]
    return len(graph.steps)


def networkx_build_and_check(steps: list[tuple[int, ...]]) -> int:
    g = nx.DiGraph()
    for i, sources in enumerate(steps):
        g.add_node(i)
        for s in sources:
            g.add_edge(s, i)
    assert nx.is_directed_acyclic_graph(g)
    return g.number_of_nodes()


def azure_build_and_validate(steps: list[tuple[int, ...]]) -> int:
    from azure.ai.ml import Input as AInput
    from azure.ai.ml import Output as AOutput
    from azure.ai.ml import command, dsl

    comp = command(name="stage", command="echo ${{outputs.out}}",
                   inputs={"a": AInput(type="uri_folder", optional=True),
                           "b": AInput(type="uri_folder", optional=True)},
                   outputs={"out": AOutput(type="uri_folder")},
                   environment="azureml:env:1", compute="cpu")

    @dsl.pipeline(name="generated", default_compute="cpu")
    def generated():
        handles = []
        for sources in steps:
            handles.append(comp(**{p: handles[s].outputs.out for p, s in zip("ab", sources)}))
        return {"last": handles[-1].outputs.out}

    job = generated()
    result = job._validate()
    assert result.passed, result.error_messages
    return len(job.jobs)


def timed(fn, *args, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="10, 100 and 1,000 steps; azure-ai-ml up to 100")
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    sizes = [10, 100, 1000] if args.quick else [10, 100, 1000, 5000]
    azure_max = 100 if args.quick else 1000
    rows = []
    for shape in ("chain", "fan-out/fan-in"):
        for n in sizes:
            steps = plan(shape, n)
            repeat = 5 if n <= 1000 else 3
            ours = timed(mlpipe_build_and_check, steps, repeat=repeat)
            base = timed(networkx_build_and_check, steps, repeat=repeat)
            azure = timed(azure_build_and_validate, steps, repeat=1) if n <= azure_max else None
            rows.append((shape, n, ours, base, azure))
            print(f"{shape:15} {n:5}  mlpipe {ours * 1e3:9.1f} ms ({ours / n * 1e6:6.1f} µs/step)"
                  f"  networkx {base * 1e3:7.1f} ms"
                  + (f"  azure-ai-ml {azure:7.2f} s  ratio {azure / ours:7.0f}x" if azure else ""),
                  file=sys.stderr)
    print("| shape | steps | mlpipe build+compile+check | per step | azure-ai-ml build+validate "
          "| azure / mlpipe | networkx build+cycle check | mlpipe / networkx |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape, n, ours, base, azure in rows:
        az = f"{azure:.2f} s" if azure is not None else "—"
        ratio = f"{azure / ours:.0f}×" if azure is not None else "—"
        print(f"| {shape} | {n:,} | {ours * 1e3:.1f} ms | {ours / n * 1e6:.0f} µs | {az} | {ratio} "
              f"| {base * 1e3:.2f} ms | {ours / base:.0f}× |")
    for shape, n, ours, _base, azure in rows:
        if n == 1000:
            goals.check(f"build + compile + check, {shape}, 1,000 steps", ours, "<=", 0.2,
                        unit="s")
        if n == azure_max and azure is not None:
            goals.check(f"build + compile + check, {shape}, {n:,} steps, against azure-ai-ml's "
                        f"build + validate", azure / ours, ">=", 100, unit="x faster")
    goals.save()


if __name__ == "__main__":
    main()
