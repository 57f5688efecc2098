"""``mlpipe rehearse``: a distributed step's differential rehearsal (parse, call, render).

The runs are ``backends/local/rehearsal.py``'s, the judgement ``judgements/rehearsal.py``'s.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from mlpipe.cli.base import EXIT_CLEAN, EXIT_PROBLEMS, TARGET, assignments, main


@main.command()
@click.argument("target", metavar=TARGET)
@click.option("--step", "step_id", required=True, metavar="STEP",
              help="The distributed step to rehearse.")
@click.option("--input", "inputs", multiple=True, metavar="PORT=PATH",
              help="A local path for one of the step's inputs (repeatable).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A value for one of the step's parameters (repeatable; the rest keep "
                   "their defaults). Both runs get the same values, seed included.")
@click.option("--scale", default="1x2", show_default=True, metavar="NODESxPROCS",
              help="The topology to compare with world size 1, scaled down to this machine.")
@click.option("--tolerance", type=click.FloatRange(min=0.0, max=10.0), default=0.1,
              show_default=True, help="Relative difference allowed in examples, batch, loss "
                                      "and metrics.")
@click.option("--work", "work", default="build/rehearse", show_default=True, metavar="DIR",
              help="Where the two runs keep their outputs, records and logs.")
@click.option("--timeout", type=click.FloatRange(min=1.0), default=600.0, show_default=True,
              help="Seconds each run may take.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def rehearse(target: str, step_id: str, inputs: tuple[str, ...], params: tuple[str, ...],
             scale: str, tolerance: float, work: str, timeout: float, fmt: str) -> None:
    """Run a distributed STEP's small correctness run at world size 1 and at a scaled-down
    topology, on the same data and seed, and report what a coordinated implementation keeps
    equal but these runs do not (MP560-MP565). Exit 1 when it reports anything."""
    from mlpipe.backends.local.options import local_scales
    from mlpipe.backends.local.rehearsal import rehearse as run_both
    from mlpipe.errors import UsageError
    from mlpipe.graph import compile_pipeline
    from mlpipe.judgements.rehearsal import judge
    from mlpipe.loader import load_spec
    from mlpipe.runtime.argv import coerce_param

    size = local_scales({step_id: scale})[step_id]
    if size == "fit":
        raise UsageError("--scale fit is not a size the rehearsal compares",
                         hint="give it as NODESxPROCESSES, e.g. --scale 1x2")
    spec, _ = load_spec(target)
    graph = compile_pipeline(spec)
    node = graph.steps.get(step_id)
    if node is None:
        raise UsageError(f"pipeline {spec.name!r} has no step {step_id!r}",
                         hint=f"its steps: {', '.join(graph.steps)}")
    comp = node.component
    given = assignments(params, "--param")
    values = {}
    for name, text in given.items():
        found = next((p for p in comp.params if p.name == name), None)
        if found is None:
            raise UsageError(f"step {step_id!r} has no parameter {name!r}",
                             hint=f"its parameters: "
                                  f"{', '.join(p.name for p in comp.params) or 'none'}")
        values[name] = coerce_param(found, text)
    paths = assignments(inputs, "--input")
    for port, path in paths.items():
        if not Path(path).exists():
            raise UsageError(f"--input {port}={path}: no such file or folder",
                             hint="give a local path the step can read")
    paths = {port: str(Path(path).resolve()) for port, path in paths.items()}
    assert isinstance(size, tuple)
    one, many = run_both(comp, inputs=paths, params=values, work=Path(work).resolve(),
                         cwd=str(Path.cwd()), sys_path=[p for p in sys.path if p],
                         scale=size, timeout=timeout)
    found = judge(one.facts(), many.facts(), step=step_id, tolerance=tolerance)
    if fmt == "json":
        document = {**found.to_json(), "seconds": {"world_size_1": round(one.seconds, 3),
                                                   f"world_size_{many.world_size}":
                                                   round(many.seconds, 3)}}
        click.echo(json.dumps(document, indent=2, default=str))
    else:
        _show(found, one.seconds, many.seconds)
    sys.exit(EXIT_PROBLEMS if found.findings else EXIT_CLEAN)


def _show(found, one_s: float, many_s: float) -> None:
    k = found.world_size
    click.echo(f"rehearsal of step {found.step!r}: world size 1 ({one_s:.1f} s) against "
               f"world size {k} ({many_s:.1f} s)")
    for row in found.compared:
        mark = {True: "same", False: "DIFFERS", None: "-"}[row["same"]]
        note = f"  ({row['note']})" if row["note"] else ""
        click.echo(f"  {mark:8} {row['fact']}: {row['world_size_1']} | "
                   f"{row[f'world_size_{k}']}{note}")
    for what in found.unseen:
        click.echo(f"  unseen   {what}")
    for d in found.diagnostics:
        click.echo(d.render())
    n = len(found.findings)
    click.echo("no difference found" if not n else
               f"{n} difference{'s' if n != 1 else ''} found")
