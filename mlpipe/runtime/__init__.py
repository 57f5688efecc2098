"""What runs inside a step: metric logging with an explicit scope.

Imported by step code, so it stays light: it must not import the graph, checks, backends or
the evidence store.
"""
from __future__ import annotations

import json
import math
import os
import warnings

SCOPES = ("global", "partial")
STEP_DIR_ENV = "MLPIPE_STEP_DIR"
METRICS_FILE = "metrics.jsonl"

__all__ = ["log_metric"]


def log_metric(name: str, value: float, *, scope: str = "global",
               population: str | None = None) -> None:
    """Record a metric of the running step.

    A ``global`` metric describes the whole population (all ranks' data, aggregated); a
    ``partial`` one only what this rank saw. The rank comes from ``RANK`` when set.

    Args:
        name: metric name, such as ``"accuracy"``.
        value: a finite number.
        scope: ``"global"`` or ``"partial"``.
        population: what the value was computed on, such as ``"test split, 412 images"``.

    Example:
        >>> log_metric("accuracy", 0.93, population="test split")
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"metric name {name!r} is not a non-empty string")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"metric {name!r} has value {value!r}; log a finite number")
    if scope not in SCOPES:
        raise ValueError(f"metric {name!r} has scope {scope!r}; use 'global' or 'partial'")
    step_dir = os.environ.get(STEP_DIR_ENV)
    if not step_dir:
        warnings.warn(f"log_metric({name!r}) outside an mlpipe step: not recorded",
                      RuntimeWarning, stacklevel=2)
        return
    rank = os.environ.get("RANK")
    line = json.dumps({"name": name, "value": float(value), "scope": scope,
                       "rank": int(rank) if rank and rank.isdigit() else None,
                       "population": population})
    with open(os.path.join(step_dir, METRICS_FILE), "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
