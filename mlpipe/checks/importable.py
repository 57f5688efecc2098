"""Can a step process import the component it runs? A component defined in ``__main__`` (a
script run directly, a notebook) or inside a function cannot be found by the step runtime,
which imports ``MODULE`` and looks up ``QUALNAME`` in a fresh process (MP113)."""
from __future__ import annotations

from collections.abc import Iterator

from mlpipe import codes
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Graph


def why_not_importable(function: str | None) -> str | None:
    """Why the step runtime could not import ``MODULE:QUALNAME``, or None when it can.

    Example:
        >>> why_not_importable("__main__:fit")
        'it is defined in __main__ (a script run directly, or a notebook)'
    """
    if not function:
        return None  # a script component: its command runs, nothing is imported
    module, _, qualname = function.partition(":")
    if module == "__main__" or module.startswith("__main__."):
        return "it is defined in __main__ (a script run directly, or a notebook)"
    if "<locals>" in qualname:
        outer = qualname.split(".<locals>", 1)[0]
        return f"it is defined inside the function {outer!r}"
    if not module or not all(part.isidentifier() for part in module.split(".")):
        return f"its module {module!r} has no importable name"
    return None


@check(codes.COMPONENT_NOT_IMPORTABLE)
def importable_components(graph: Graph) -> Iterator[Diagnostic]:
    reported: set[str] = set()
    for node in graph.step_nodes():
        c = node.component
        why = why_not_importable(c.function)
        if why is None or c.function is None or c.function in reported:
            continue
        reported.add(c.function)
        yield Diagnostic.of(
            codes.COMPONENT_NOT_IMPORTABLE,
            f"component {c.name!r} (step '{node.id}') cannot be imported by a step process: "
            f"{why}; each step runs in a fresh process that imports the component's module",
            hint=f"move {c.name!r} to a module of your project (components/{c.name}.py) and "
                 f"import it from there", **at_step(node))
