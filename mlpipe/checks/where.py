"""How checks name places: steps, ports, edges, and their lines in the user's code."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpipe.graph import Graph, StepNode

if TYPE_CHECKING:
    from mlpipe.checks.body import BodyFacts


def at_step(node: StepNode, port: str | None = None) -> dict[str, Any]:
    """Location keywords for a diagnostic about ``node`` (and one of its ports)."""
    loc = node.location
    return {"step": node.id, "port": port, "file": loc.file if loc else None,
            "line": loc.line if loc else None}


def at_code(node: StepNode, facts: BodyFacts | None, line: int | None) -> dict[str, Any]:
    """Location keywords for a diagnostic about ``line`` of ``node``'s code (of the file its
    body's ``facts`` were read from); the step's own place where no line is known."""
    where = at_step(node)
    if facts is not None and line:
        where.update(file=facts.file, line=line)
    return where


def at_edge(graph: Graph, source: str, target: str, node: StepNode) -> dict[str, Any]:
    """Location keywords for a diagnostic about the edge ``source -> target``."""
    loc = node.location
    return {"source": source, "target": target, "step": node.id,
            "port": target.rsplit(".", 1)[-1], "file": loc.file if loc else None,
            "line": loc.line if loc else None}


def at_pipeline(graph: Graph, input_name: str | None = None) -> dict[str, Any]:
    spec = graph.spec
    loc = spec.location
    if input_name is not None and (declared := graph.input(input_name)) is not None:
        loc = declared.location or loc
    return {"file": loc.file if loc else None, "line": loc.line if loc else None}


#: The folder azure-ai-ml Python pipelines are written to as YAML (``backends.azure.sdk``).
SDK_FOLDER = "mlpipe-sdk"


def written_in(node: StepNode) -> str:
    """How the step's component was written, so that a hint speaks its language: ``"yaml"``
    (a job or component file), ``"sdk"`` (azure-ai-ml Python: ``command()``,
    ``load_component``, ``@dsl.pipeline``) or ``"python"`` (mlpipe's decorators)."""
    loc = node.component.location
    if loc is None or not loc.file.lower().endswith((".yml", ".yaml")):
        return "python"
    return "sdk" if f"{SDK_FOLDER}" in loc.file.replace("\\", "/").split("/") else "yaml"


def help_for(node: StepNode, python: str, yaml: str, sdk: str | None = None) -> str:
    """The hint in the language the step was written in (``written_in``)."""
    kind = written_in(node)
    return yaml if kind == "yaml" else (sdk or yaml) if kind == "sdk" else python

