"""The check registry: checks are pure functions Graph -> diagnostics, registered by code.

A check exists only through its ``@check`` entry, and every module of ``mlpipe.checks`` is
imported (``load_families``), so a family added to the folder runs without being listed
anywhere. The checker runs every check, collects everything, and never raises.
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


def load_families(package: str = "mlpipe.checks") -> list[str]:
    """Import every module of ``package`` (its families register their checks as they are
    imported), in name order so the checks run in one order everywhere.

    Returns:
        The modules imported.

    Example:
        >>> "mlpipe.checks.structure" in load_families()
        True
    """
    import importlib
    import pkgutil

    path = importlib.import_module(package).__path__
    names = sorted(f"{package}.{info.name}" for info in pkgutil.iter_modules(path))
    for name in names:
        importlib.import_module(name)
    return names


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
