"""What a job is and what it is given: steps that mlpipe checks and exports but that run only
on Azure ML (MP603), and values given to inputs a nested pipeline does not have (MP103).

Pure functions Graph -> diagnostics, like every check.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator

from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.codes import AZURE_ONLY_STEP, UNKNOWN_PORT
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Graph
from mlpipe.spec import PipelineSpec


@check(AZURE_ONLY_STEP)
def azure_only_steps(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        reason = node.component.azure_only
        if reason is None:
            continue
        yield Diagnostic.of(
            AZURE_ONLY_STEP,
            f"step '{node.id}' is {reason}: mlpipe checks its wiring and exports it, but it "
            f"runs only on Azure ML",
            hint="submit the pipeline with --target azure; `mlpipe submit` here refuses it",
            **at_step(node))


@check(UNKNOWN_PORT)
def nested_pipeline_bindings(graph: Graph) -> Iterator[Diagnostic]:
    """A value given to an input a nested pipeline does not have (MP103, as for a step)."""
    yield from _nested(graph.spec, "")


def _nested(spec: PipelineSpec, prefix: str) -> Iterator[Diagnostic]:
    for step in spec.steps:
        target = step.target
        if not isinstance(target, PipelineSpec):
            continue
        names = [i.name for i in target.inputs]
        for key, _ in step.bindings:
            if target.input(key) is not None:
                continue
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            loc = step.location
            yield Diagnostic.of(
                UNKNOWN_PORT,
                f"pipeline {target.name!r} has no input {key!r} (step '{prefix}{step.name}')",
                hint=f"{hint}{target.name!r} takes: {', '.join(names) or 'nothing'}",
                step=f"{prefix}{step.name}", port=key, file=loc.file if loc else None,
                line=loc.line if loc else None)
        yield from _nested(target, f"{prefix}{step.name}.")
