"""Metrics report contracts: metric names, the population each was computed on, and whether
each value is global (over all workers) or one worker's partial value.

A report is a JSON file ``{"population": {...}, "metrics": {name: {"value", "scope",
"population"?}}}``. Knows nothing of specs.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import Contract, Difference, check_exists, declared_entries, read_json
from mlpipe.errors import ContractError, DefinitionError

SCOPES = ("global", "partial")


@dataclass(frozen=True)
class Metric:
    """One metric of a report.

    Args:
        name: the metric's name (``accuracy``).
        scope: ``global`` (aggregated over every worker) or ``partial`` (one worker's value).
        split: the split it was computed on (``test``), if the contract fixes one.
        snapshot: the data snapshot it was computed on, if the contract fixes one.

    Example:
        >>> Metric("accuracy", split="test")
    """

    name: str
    scope: str = "global"
    split: str | None = None
    snapshot: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise DefinitionError(f"metric {self.name!r} has scope {self.scope!r}, which is not "
                                  f"global or partial", hint='write scope="global" or "partial"')

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scope": self.scope, "split": self.split,
                "snapshot": self.snapshot}


@dataclass(frozen=True, eq=True)
class MetricsReport(Contract):
    """An evaluation report: which metrics, on which population, with which scope.

    Args:
        name: the report contract's name.
        metrics: the metrics the report holds (Metric values, or names for global metrics);
            a report may hold more (safe widening).
        version: ``MAJOR`` or ``MAJOR.MINOR``.

    Example:
        >>> MetricsReport("defect-evaluation", metrics=[Metric("accuracy", split="test")])
    """

    kind = "metrics-report"
    transport = AssetType.URI_FILE
    holds_examples = False

    name: str | None = None
    metrics: Sequence[Metric] = ()
    version: str = "1"

    def __post_init__(self) -> None:
        super().__post_init__()
        metrics = declared_entries(
            f"MetricsReport {self.name!r}",
            (Metric(m) if isinstance(m, str) else m for m in self.metrics), Metric, "metric",
            example='write Metric("accuracy", split="test"), or only the name')
        object.__setattr__(self, "metrics", metrics)

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    def differences(self, required: Contract) -> Iterator[Difference]:
        assert isinstance(required, MetricsReport)
        for want in required.metrics:
            have = self.metric(want.name)
            if have is None:
                yield Difference(f"metric {want.name!r} is required but {self.label} does not "
                                 f"promise it (promised: "
                                 f"{', '.join(m.name for m in self.metrics) or 'none'})",
                                 f"compute {want.name!r} in the producer and declare it")
                continue
            if have.scope != want.scope:
                yield Difference(f"metric {want.name!r} is {have.scope} but the consumer "
                                 f"requires a {want.scope} value",
                                 "aggregate the metric across workers (all-reduce) and declare "
                                 "it global" if want.scope == "global" else
                                 "declare the same scope on both ports", "metric-scope-mismatch")
            for attr in ("split", "snapshot"):
                w, h = getattr(want, attr), getattr(have, attr)
                if w is not None and h != w:
                    yield Difference(f"metric {want.name!r} is computed on {attr} {h!r} but "
                                     f"the consumer requires {attr} {w!r}",
                                     f"compute {want.name!r} on {attr} {w!r}")

    def validate(self, path: Path) -> None:
        """Check a report JSON file: each declared metric present, finite, in scope and on
        the declared population.

        Raises:
            ContractError: naming the file and the metric at fault.
        """
        path = Path(path)
        check_exists(self, path)
        doc = read_json(self.label, path, "the report", '{"metrics": {...}}',
                        hint="write the report as JSON")
        metrics = doc.get("metrics") if isinstance(doc, dict) else None
        if not isinstance(metrics, dict):
            raise ContractError(f"the report has no \"metrics\" object; {self.label} expects "
                                f'{{"metrics": {{name: {{"value", "scope"}}}}}}',
                                hint="write the metrics under a \"metrics\" key",
                                file=str(path), key="metrics")
        common = doc.get("population") or {}
        if not isinstance(common, dict):
            raise ContractError(f"the report's \"population\" is {type(common).__name__}, not "
                                f"an object; {self.label} reads the split and snapshot there",
                                hint='write "population": {"split": ..., "snapshot": ...}',
                                file=str(path), key="population")
        for want in self.metrics:
            self._check_metric(path, want, metrics.get(want.name), common)

    def _check_metric(self, path: Path, want: Metric, entry: Any, common: dict) -> None:
        def fail(message: str, hint: str, mismatch: str) -> ContractError:
            return ContractError(f"metric {want.name!r} {message}", hint=hint, file=str(path),
                                 key=f"metrics.{want.name}", mismatch=mismatch)

        if entry is None:
            raise fail(f"is missing; {self.label} requires it", f"report {want.name!r}",
                       "missing")
        if not isinstance(entry, dict):
            entry = {"value": entry}
        value = entry.get("value")
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value)):
            raise fail(f"has value {value!r}; {self.label} expects a finite number",
                       "report a number", "value")
        scope = entry.get("scope")
        if scope != want.scope:
            raise fail(f"has scope {scope!r} but {self.label} requires {want.scope!r}",
                       "aggregate the value across workers and mark it global"
                       if want.scope == "global" else f"mark it {want.scope!r}", "scope")
        own = entry.get("population") or {}
        if not isinstance(own, dict):
            raise fail(f"has \"population\" {own!r}, not an object; {self.label} reads the "
                       f"split and snapshot there",
                       'write "population": {"split": ..., "snapshot": ...}', "value")
        population = {**common, **own}
        for attr in ("split", "snapshot"):
            expected = getattr(want, attr)
            if expected is not None and population.get(attr) != expected:
                raise fail(f"was computed on {attr} {population.get(attr)!r} but {self.label} "
                           f"requires {attr} {expected!r}",
                           f"compute it on {attr} {expected!r} and record the population",
                           "population")
