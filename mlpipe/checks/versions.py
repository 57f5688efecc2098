"""Versions that name two codes (MP805): a component whose name and version the evidence
store already holds with another code digest.

Pure, like every check, but it needs what the store recorded, so it is not registered with the
graph checks: ``mlpipe check`` asks the store (``evidence.versions``) and passes the answer in.
"""
from __future__ import annotations

from collections.abc import Mapping

from mlpipe.checks.where import at_step
from mlpipe.codes import COMPONENT_VERSION_REUSED
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Graph


def component_names(graph: Graph) -> set[str]:
    """The names of the components the graph's steps run."""
    return {node.component.name for node in graph.step_nodes()}


def reused_versions(graph: Graph, recorded: Mapping[tuple[str, str], set[str]]
                    ) -> list[Diagnostic]:
    """MP805 for each component whose ``(name, version)`` ``recorded`` holds with a code
    digest other than the one it has now (once per component)."""
    found: list[Diagnostic] = []
    seen: set[tuple[str, str]] = set()
    for node in graph.step_nodes():
        c = node.component
        key = (c.name, c.version)
        others = sorted(recorded.get(key, set()) - {c.code_digest})
        if not others or key in seen or c.kind != "command":
            continue
        seen.add(key)
        shown = ", ".join(d[:19] for d in others[:2]) + (" ..." if len(others) > 2 else "")
        found.append(Diagnostic.of(
            COMPONENT_VERSION_REUSED,
            f"component {c.name!r} version {c.version!r} is recorded in the evidence store with "
            f"other code ({shown}); its code now has digest {c.code_digest[:19]}: evidence "
            f"citing {c.name}@{c.version} no longer names one code",
            hint="give the changed component a new version (version= on @component, or "
                 "version: in its YAML), so each version names one code", **at_step(node)))
    return found
