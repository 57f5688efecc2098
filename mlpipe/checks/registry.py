"""The check registry: checks are pure functions Graph -> diagnostics, registered by code.

The checker runs every check, collects everything, and never raises.
"""
from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mlpipe.codes import CHECK_CRASHED, published
from mlpipe.diagnostics import Code, Diagnostic
from mlpipe.graph import Graph

CheckFn = Callable[[Graph], Iterable[Diagnostic]]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    codes: tuple[Code, ...]
    fn: CheckFn


CHECKS: list[Check] = []


def check(*codes: Code) -> Callable[[CheckFn], CheckFn]:
    """Register a check function that reports diagnostics with the given codes."""
    def register(fn: CheckFn) -> CheckFn:
        CHECKS.append(Check(fn.__name__, codes, fn))
        return fn
    return register


def run_checks(graph: Graph) -> list[Diagnostic]:
    """Run every registered check on ``graph``.

    Returns:
        All diagnostics found, in the order the checks produced them.
    """
    found: list[Diagnostic] = []
    for c in CHECKS:
        try:
            found.extend(c.fn(graph))
        except Exception as exc:  # a crashed check is reported, never raised
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            found.append(Diagnostic.of(
                CHECK_CRASHED, f"check {c.name!r} raised {type(exc).__name__}: {exc} "
                f"(at {frame.filename}:{frame.lineno})",
                hint="this is a bug in mlpipe; report it with the pipeline that triggers it"))
    return found


def published_codes() -> list[Code]:
    """Every published code (``mlpipe.codes``), in code order."""
    return published()
