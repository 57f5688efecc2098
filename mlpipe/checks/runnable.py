"""Does calling a component's function run its body? A generator function (``yield``) or an
``async def`` returns an object without running a line of the body: the step would "succeed"
with empty outputs (MP960). Judged on the function itself, found by the name the step runtime
imports; a component whose module is not loaded here (YAML, a script) is not judged."""
from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from typing import Any

from mlpipe import codes
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Graph


def body_kind(fn: Any) -> str | None:
    """What calling ``fn`` returns instead of running it, or None when it runs its body.

    Example:
        >>> def g():
        ...     yield 1
        >>> body_kind(g)
        'a generator function (it yields)'
    """
    if inspect.isasyncgenfunction(fn):
        return "an async generator function (async def with yield)"
    if inspect.iscoroutinefunction(fn):
        return "a coroutine function (async def)"
    if inspect.isgeneratorfunction(fn):
        return "a generator function (it yields)"
    return None


def _function(target: str | None) -> Any:
    module_name, _, qualname = (target or "").partition(":")
    obj: Any = sys.modules.get(module_name)
    for part in qualname.split(".") if obj is not None and qualname else ():
        obj = getattr(obj, part, None)
    return getattr(obj, "fn", obj) if obj is not None else None


@check(codes.COMPONENT_BODY_NEVER_RUNS)
def runnable_bodies(graph: Graph) -> Iterator[Diagnostic]:
    reported: set[str] = set()
    for node in graph.step_nodes():
        c = node.component
        if not c.function or c.function in reported:
            continue
        kind = body_kind(_function(c.function))
        if kind is None:
            continue
        reported.add(c.function)
        yield Diagnostic.of(
            codes.COMPONENT_BODY_NEVER_RUNS,
            f"component {c.name!r} (step '{node.id}') is {kind}: calling it returns an object "
            f"and runs none of its body, so its outputs would never be written",
            hint="make it a plain def that writes its outputs and returns nothing; collect what "
                 "a yield produced into a list, and run async code with asyncio.run() inside",
            **at_step(node))
