"""The checks: pure functions Graph -> diagnostics, grouped by family, run all at once.

Importing this package imports every module in it, so every family's ``@check`` functions
are registered (``registry.load_families``): a new family is a new module, listed nowhere.
Backends and the CLI call ``check_pipeline``. The codes themselves are published in
``mlpipe.codes``; what is judged after a step ran lives in ``mlpipe.judgements``.
"""
from __future__ import annotations

from mlpipe.checks.registry import (
    CHECKS,
    Check,
    check,
    load_families,
    published_codes,
    run_checks,
)
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Graph, compile_pipeline
from mlpipe.spec import PipelineSpec

load_families()   # every module of this folder: a family registers itself with @check


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
