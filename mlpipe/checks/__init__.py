"""The checks: pure functions Graph -> diagnostics, grouped by family, run all at once.

Importing this package registers every graph check family. Backends and the CLI call
``check_pipeline``. The codes themselves are published in ``mlpipe.codes``; ``coordination``
judges a distributed step's rank records after it ran (both backends call it), and ``reads``
what a step read outside its declared inputs.
"""
from __future__ import annotations

from mlpipe.checks import (  # noqa: F401  (registration)
    artifacts,
    contracts,
    credentials,
    distribution,
    environment,
    evaluation,
    fields,
    frameworks,
    importable,
    jobfields,
    jobs,
    launch,
    literals,
    needs,
    parameters,
    placement,
    reproducibility,
    runnable,
    structure,
)
from mlpipe.checks.registry import CHECKS, Check, check, published_codes, run_checks
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Graph, compile_pipeline
from mlpipe.spec import PipelineSpec


def check_pipeline(spec: PipelineSpec) -> tuple[Graph, list[Diagnostic]]:
    """Compile ``spec`` and run every check on it.

    Returns:
        The compiled graph and all diagnostics (never raises for a wiring problem).

    Example:
        >>> graph, diagnostics = check_pipeline(defect_classifier.spec)
    """
    graph = compile_pipeline(spec)
    return graph, run_checks(graph)


__all__ = ["CHECKS", "Check", "check", "check_pipeline", "published_codes", "run_checks"]
