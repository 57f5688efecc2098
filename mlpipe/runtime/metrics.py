"""Metric logging inside a step: one JSON line per value in ``$MLPIPE_STEP_DIR/metrics.jsonl``.

The line protocol (shared with the local executor and the evidence store) is exactly
``{"name", "value", "scope", "rank", "population"}``. Nothing here aggregates across ranks;
``mlpipe.runtime.distributed.all_reduce_metric`` does that before logging.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

SCOPES = ("global", "partial")


def log_metric(name: str, value: float, *, scope: str = "global",
               population: str | None = None) -> dict[str, Any]:
    """Record one metric value of this step.

    Args:
        name: the metric's name.
        value: a finite number.
        scope: ``"global"`` when the value describes the whole population, ``"partial"`` when
            it is one rank's view of its shard.
        population: what the value was computed on (``"test split, 90 examples"``).

    Returns:
        The record written (also returned when ``MLPIPE_STEP_DIR`` is unset and nothing is
        written, e.g. when a step body is unit-tested on its own).

    Example:
        >>> log_metric("accuracy", 0.93, scope="global", population="test")["scope"]
        'global'
    """
    if scope not in SCOPES:
        raise ValueError(f"metric {name!r} has scope {scope!r}; use 'global' or 'partial'")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"metric {name!r} has value {value!r}; log a finite number")
    rank = os.environ.get("RANK")
    record = {"name": name, "value": float(value), "scope": scope,
              "rank": int(rank) if rank is not None and rank.isdigit() else None,
              "population": population}
    step_dir = os.environ.get("MLPIPE_STEP_DIR")
    if step_dir:
        path = Path(step_dir) / "metrics.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    return record
