"""The compile-time check results of a run, as stored rows: written once at submit, read back
by the bundle builder.

Knows the models and diagnostics; never runs a check itself (``mlpipe.checks`` does).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mlpipe.diagnostics import Diagnostic, sort_key
from mlpipe.evidence.storage import models as m


def summary(diagnostics: Iterable[Diagnostic]) -> dict[str, int]:
    """``{"errors", "warnings", "info"}`` counts, kept in ``Run.options["checks"]`` so a run
    that recorded no diagnostics is told apart from one recorded before mlpipe kept them."""
    counts = {"errors": 0, "warnings": 0, "info": 0}
    for d in diagnostics:
        counts[{"error": "errors", "warning": "warnings", "info": "info"}[d.severity.value]] += 1
    return counts


def record_checks(store, run_id: str, diagnostics: Iterable[Diagnostic]) -> None:
    """Store every diagnostic of ``run_id``'s compile-time checks (one transaction).

    Args:
        store: an open :class:`~mlpipe.evidence.storage.store.Store`.
        run_id: the run they belong to.
        diagnostics: what ``check_pipeline`` reported (warnings and info; never errors).
    """
    ordered = sorted(diagnostics, key=sort_key)
    if not ordered:
        return
    with store.session() as s:
        for d in ordered:
            j = d.to_json()
            s.add(m.CheckResult(run_id=run_id, code=d.code, name=d.name,
                                severity=d.severity.value, message=d.message, hint=d.hint,
                                step=d.step, port=d.port, source=d.source, target=d.target,
                                file=j["file"], line=d.line))


def stored_checks(s: Session, run_id: str) -> list[dict[str, Any]]:
    """The diagnostics recorded for ``run_id`` (stored rows; nothing is checked anew), in the
    order they were reported."""
    rows = s.scalars(select(m.CheckResult).where(m.CheckResult.run_id == run_id)
                     .order_by(m.CheckResult.id))
    return [{"code": r.code, "name": r.name, "severity": r.severity, "message": r.message,
             "hint": r.hint, "step": r.step, "port": r.port, "from": r.source, "to": r.target,
             "file": r.file, "line": r.line} for r in rows]
