"""Metric logging inside a step: one JSON line per value in ``$MLPIPE_STEP_DIR/metrics.jsonl``.

The line protocol (shared with the local executor and the evidence store) is exactly
``{"name", "value", "scope", "rank", "population"}``. Nothing here aggregates across ranks;
``mlpipe.runtime.distributed.all_reduce_metric`` does that before logging.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

SCOPES = ("global", "partial")
STEP_DIR_ENV = "MLPIPE_STEP_DIR"
METRICS_FILE = "metrics.jsonl"


def log_metric(name: str, value: float, *, scope: str = "global",
               population: str | None = None, reduced_over: int | None = None
               ) -> dict[str, Any]:
    """Record one metric value of this step.

    A ``global`` metric describes the whole population (all ranks' data, aggregated); a
    ``partial`` one only what this rank saw. The rank comes from ``RANK`` when set.

    Args:
        name: the metric's name.
        value: a finite number.
        scope: ``"global"`` when the value describes the whole population, ``"partial"`` when
            it is one rank's view of its shard.
        population: what the value was computed on (``"test split, 90 examples"``).
        reduced_over: how many ranks' values a global value combines (``all_reduce_metric``
            sets it); the evidence bundle compares it with the step's world size.

    Returns:
        The record (also when nothing is written: outside a step, e.g. when a step body is
        unit-tested on its own, it warns and records nothing).

    Example:
        >>> log_metric("accuracy", 0.93, scope="global", population="test")["scope"]
        'global'
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"metric name {name!r} is not a non-empty string")
    if scope not in SCOPES:
        raise ValueError(f"metric {name!r} has scope {scope!r}; use 'global' or 'partial'")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"metric {name!r} has value {value!r}; log a finite number")
    rank = os.environ.get("RANK")
    record = {"name": name, "value": float(value), "scope": scope,
              "rank": int(rank) if rank is not None and rank.isdigit() else None,
              "population": population}
    if reduced_over is not None:
        record["reduced_over"] = int(reduced_over)
    step_dir = os.environ.get(STEP_DIR_ENV)
    if not step_dir:
        warnings.warn(f"log_metric({name!r}) outside an mlpipe step: not recorded",
                      RuntimeWarning, stacklevel=2)
        return record
    path = Path(step_dir) / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    return record
