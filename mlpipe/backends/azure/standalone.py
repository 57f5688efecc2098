"""A standalone sweep or AutoML job (``type: sweep`` / ``type: automl`` at the top of a job
file) as a one-step pipeline: the step is the job read exactly as the same job is read inside
a pipeline, so its trial's command, environment and launch meet every check a step meets;
the search space is checked against the trial (MP116); the export writes the document back as
it was read. Both run only on Azure ML: a local run refuses them, naming why.

A sweep's trial is a component file (``trial: ./train.yml``, whose inputs the search space
sets) or an inline command (``trial: {command, code, environment}``, which reads the job's
inputs as ``${{inputs.X}}`` and the sampled values as ``${{search_space.X}}``). Never imports
azure-ai-ml.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import yamlfile
from mlpipe.backends.azure.component_yaml import Where
from mlpipe.codes import SEARCH_SPACE_MISMATCH
from mlpipe.diagnostics import Diagnostic
from mlpipe.paths import cloud_reference, lexical
from mlpipe.spec import (
    ComponentSpec,
    Location,
    Origin,
    ParamSpec,
    ParamType,
    PipelineSpec,
    StepOutput,
)

#: ``${{search_space.X}}`` (or ``{search_space.X}``, which azure-ai-ml also substitutes).
_SEARCHED = re.compile(r"\$?\{\{?\s*search_space\.([A-Za-z_]\w*)\s*\}?\}")
#: The parameter type a search space distribution samples.
_SAMPLED = {"uniform": ParamType.FLOAT, "loguniform": ParamType.FLOAT,
            "normal": ParamType.FLOAT, "lognormal": ParamType.FLOAT,
            "quniform": ParamType.FLOAT, "qloguniform": ParamType.FLOAT,
            "qnormal": ParamType.FLOAT, "qlognormal": ParamType.FLOAT,
            "randint": ParamType.INT}


def standalone_pipeline(reader: Any, doc: Any, path: Path) -> PipelineSpec:
    """The one-step pipeline of the sweep or AutoML job ``doc`` read from ``path`` by the
    importer's ``reader`` (its problems and diagnostics collect what is wrong)."""
    where = Where(str(path))
    name = _step_name(str(doc.get("name") or path.stem))
    jobs = yamlfile.Mapping({name: doc})
    jobs.line = 1
    jobs.lines = {name: doc.line_of("type") if isinstance(doc, yamlfile.Mapping) else 1}
    step = reader.step(where, jobs, name, path, (), None, {}, {}, {}, {})
    if step is None:
        reader.problems.raise_any()
    assert step is not None  # the reader gives None only with problems, raised just above
    target = step.target
    outputs = tuple((p.name, StepOutput(step.name, p.name)) for p in target.outputs) \
        if isinstance(target, ComponentSpec) else ()
    return PipelineSpec(
        name=str(doc.get("display_name") or doc.get("name") or path.stem), inputs=(),
        steps=(step,), outputs=outputs, description=doc.get("description"),
        location=Location(where.file, 1), function=str(path),
        origin=Origin.of(str(lexical(path)), doc))


def search_space_problems(name: str, node: Any, target: ComponentSpec,
                          where: Where) -> Iterator[Diagnostic]:
    """MP116 for the sweep job ``name``: what its search space sets that its trial component
    does not take, or (an inline trial) what the trial's command reads from ``search_space``
    that the space does not set."""
    space = node.get("search_space") if isinstance(node.get("search_space"), dict) else {}
    line = node.line_of("search_space") if isinstance(node, yamlfile.Mapping) else None
    trial = node.get("trial")
    if not isinstance(trial, (str, dict)) or (
            isinstance(trial, str) and cloud_reference(trial.removeprefix("file:")) is not None):
        return  # a registered trial: its inputs are not known here
    if isinstance(trial, dict) and "inputs" not in trial:
        read = set(_SEARCHED.findall(str(trial.get("command") or "")))
        for missing in sorted(read - set(space)):
            yield Diagnostic.of(
                SEARCH_SPACE_MISMATCH,
                f"the trial's command reads search_space.{missing}, which the search space of "
                f"sweep {name!r} does not set: Azure ML has no value to put there, so no trial "
                f"runs as written",
                hint=f"add {missing}: to search_space (e.g. {missing}: {{type: choice, values: "
                     f"[...]}}), or remove it from the command", step=name, file=where.file,
                line=line)
        return
    takes = {p.name for p in (*target.params, *target.inputs)}
    for key in space:
        if key not in takes:
            yield Diagnostic.of(
                SEARCH_SPACE_MISMATCH,
                f"the search space of sweep {name!r} sets {key!r}, which its trial "
                f"{target.name!r} does not take as an input (it takes: "
                f"{', '.join(sorted(takes)) or 'nothing'}): the sampled value reaches no trial",
                hint="name one of the trial's inputs in search_space, or declare the input in "
                     "the trial component", step=name, file=where.file, line=line)


def sampled_params(space: Any) -> tuple[ParamSpec, ...]:
    """A parameter for each search space entry, of the type its distribution samples."""
    if not isinstance(space, dict):
        return ()
    found = []
    for key, entry in space.items():
        kind = entry.get("type") if isinstance(entry, dict) else None
        ptype = _SAMPLED.get(str(kind).lower(), ParamType.STR)
        if kind == "choice":
            values = entry.get("values") or []
            types = {type(v) for v in values if not isinstance(v, bool)}
            ptype = {int: ParamType.INT, float: ParamType.FLOAT}.get(
                types.pop(), ParamType.STR) if len(types) == 1 else ParamType.STR
        found.append(ParamSpec(str(key), ptype, required=False))
    return tuple(found)


def with_sampled(spec: ComponentSpec, space: Any) -> ComponentSpec:
    """The inline trial with the sampled values as its parameters."""
    have = {p.name for p in (*spec.params, *spec.inputs)}
    extra = tuple(p for p in sampled_params(space) if p.name not in have)
    return dataclasses.replace(spec, params=spec.params + extra) if extra else spec


def _step_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name.lower())
    return cleaned if cleaned[:1].isalpha() else f"job_{cleaned}"


__all__ = ["sampled_params", "search_space_problems", "standalone_pipeline", "with_sampled"]
