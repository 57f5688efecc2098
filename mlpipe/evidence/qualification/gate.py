"""What a finished run reports and gates on: the compile-time diagnostics it ran with and the
findings its candidate's evidence will carry, computed when the run ends by the code that
builds the bundle (``bundle.build``, ``findings.every_finding``), and the ``--fail-on`` rule
that ``check`` and ``submit`` share.

Reads the store; seals nothing (``mlpipe evidence`` seals the first bundle) and decides
nothing.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: ``--fail-on SEVERITY``: the severities that make a command exit 1.
FAILING = {"error": ("error",), "warning": ("error", "warning"),
           "info": ("error", "warning", "info")}


def failing(findings: Iterable[dict[str, Any]], fail_on: str) -> list[dict[str, Any]]:
    """The findings at ``fail_on`` severity or worse (``check --fail-on``'s rule).

    Example:
        >>> [f["code"] for f in failing([{"code": "MP416", "severity": "warning"}], "error")]
        []
    """
    return [f for f in findings if f["severity"] in FAILING[fail_on]]


@dataclass(slots=True)
class RunReport:
    """A finished run's findings: ``findings`` (``every_finding``'s labelled dicts) of its
    candidate's evidence, or its compile-time diagnostics alone when it registered none."""

    run: str
    candidate: str | None
    findings: list[dict[str, Any]] = field(default_factory=list)

    def failing(self, fail_on: str) -> list[dict[str, Any]]:
        return failing(self.findings, fail_on)


def run_report(url: str, run_id: str, candidate_id: str | None) -> RunReport:
    """What ``submit`` prints after run ``run_id``: the findings candidate ``candidate_id``'s
    bundle will carry (the same as ``mlpipe evidence`` shows once it seals it, while the store
    is unchanged), or, without a candidate, the compile-time diagnostics the run ran with.

    Raises:
        StoreError: the store cannot be opened.
    """
    from mlpipe.evidence.bundles.bundle import build
    from mlpipe.evidence.records.checkresults import stored_checks
    from mlpipe.evidence.records.findings import COMPILE_TIME, every_finding
    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.store import Store

    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            cand = None if candidate_id is None else s.get(m.CandidateRow, candidate_id)
            if cand is not None:
                predicate = build(s, cand, hash_model=False)["predicate"]
                return RunReport(run_id, candidate_id, every_finding(predicate))
            checks = [{**d, "source": COMPILE_TIME, "run": run_id}
                      for d in stored_checks(s, run_id)]
            return RunReport(run_id, None, checks)
    finally:
        store.close()


def finding_line(f: dict[str, Any], run: str | None) -> str:
    """One finding as ``submit`` prints it: ``warning[MP416] name (compile-time): message``."""
    from mlpipe.evidence.records.findings import where_from

    return (f"{f['severity']}[{f['code']}] {f['name']} ({where_from(f, run)}"
            + (f", step {f['step']}" if f.get("step") else "") + f"): {f['message']}"
            + (f"\n  help: {f['hint']}" if f.get("hint") else ""))


__all__ = ["FAILING", "RunReport", "failing", "finding_line", "run_report"]
