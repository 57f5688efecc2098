"""After a step: what its body read outside its declared inputs (MP804), judged from the step
record the runtime left (``step.hidden_inputs``, docs/step-record.md). Reads the record only;
shared by every backend that reads step records, like ``coordination``.
"""
from __future__ import annotations

from typing import Any

from mlpipe.codes import READ_OUTSIDE_INPUTS
from mlpipe.diagnostics import Diagnostic

#: How many paths a message names before it counts the rest.
SHOWN = 3


def undeclared_reads(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The entries of a step record's ``hidden_inputs`` that no ``reads=`` declaration covers
    (empty when nothing was read outside the inputs, or when reads were not observed)."""
    step = (record or {}).get("step") or {}
    return [entry for entry in step.get("hidden_inputs") or [] if not entry.get("declared")]


def check_reads(record: dict[str, Any] | None, *, step: str | None = None
                ) -> list[Diagnostic]:
    """MP804 for a step that read files outside its declared inputs without declaring them.

    Args:
        record: the step record (assembled or stored form).
        step: the step id, to locate the finding.

    Returns:
        One warning naming the files (at most three, then a count), or nothing.

    Example:
        >>> [d.code for d in check_reads(load_record(step_dir), step="prepare")]
        ['MP804']
    """
    found = undeclared_reads(record)
    if not found:
        return []
    paths = [entry["path"] for entry in found]
    shown = ", ".join(repr(p) for p in paths[:SHOWN])
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    what = "a file" if len(paths) == 1 else f"{len(paths)} files"
    return [Diagnostic.of(
        READ_OUTSIDE_INPUTS,
        f"step {step!r} read {what} outside its declared inputs ({shown}{more}); the cache "
        f"key cannot see {'it' if len(paths) == 1 else 'them'} change, so reuse of this step "
        f"waits for the same content, which the evidence records",
        hint="declare what it reads as an Input of the component, or, for a source that "
             "never changes under its path, declare it with @component(reads=[...])",
        step=step)]


__all__ = ["check_reads", "undeclared_reads"]
