"""Metric logging inside a step: each value goes into this rank's part of the step record
(``metrics``: ``{"name", "value", "scope", "rank", "population", "reduced_over", "at"}``) and,
when an MLflow tracking URI is active, to MLflow with mlpipe's tags (``mlpipe.runtime.tracking``).

Nothing here aggregates across ranks; ``mlpipe.runtime.distributed.all_reduce_metric`` does
that before logging. Never imports mlflow itself.
"""
from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from typing import Any

from mlpipe.runtime import record as step_record
from mlpipe.runtime import tracking

SCOPES = ("global", "partial")
STEP_DIR_ENV = step_record.RECORD_DIR_ENV


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
        unit-tested on its own, it warns and records nothing in a step record; it still goes
        to MLflow when a tracking URI is set).

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
    if isinstance(population, str) and _MASK:
        population = _MASK[0](population)
    rank = os.environ.get("RANK")
    record = {"name": name, "value": float(value), "scope": scope,
              "rank": int(rank) if rank is not None and rank.isdigit() else None,
              "population": population}
    if reduced_over is not None:
        record["reduced_over"] = int(reduced_over)
    tracking.log(record)
    part = step_record.current()
    if part is None:
        warnings.warn(f"log_metric({name!r}) outside an mlpipe step: not recorded",
                      RuntimeWarning, stacklevel=2)
        return record
    part.add_metric(record)
    return record


#: What masks the step's secrets in a population's text, when the step was given secrets (the
#: step runtime sets it): a population goes to the step record and to MLflow.
_MASK: list[Callable[[str], str]] = []


def mask_populations(mask: Callable[[str], str] | None) -> None:
    _MASK.clear()
    if mask is not None:
        _MASK.append(mask)
