"""The skeleton of an exported pipeline job: one job of each form, for azure-ai-ml to validate
in place of every job.

azure-ai-ml validates a pipeline job one child job at a time (its schema, its component's
required inputs, its compute) plus what the pipeline binds (which pipeline inputs are used,
the default compute); offline it resolves no reference to another job. Two jobs that differ
only in their names, in the job their ``${{parent.jobs.NAME.outputs.PORT}}`` bindings name and
in the values of plain literal inputs of the same type are therefore accepted or rejected
alike. The skeleton keeps the pipeline's own fields and the first job of each form, written as
it is; a 1,000-step chain over three components validates as four or five jobs instead of a
thousand (docs/performance.md). ``tests/backends/azure/test_skeleton.py`` holds the claim to
azure-ai-ml: every export validates alike whole and as its skeleton, including the rejected
ones, and literals of one form are accepted alike.

Knows YAML documents, not azure-ai-ml: ``validate`` hands the skeleton to azure-ai-ml.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

#: Job names and references masked to one form; any other name keeps a form of its own.
_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]{0,99}")
_JOB_OUTPUT = re.compile(r"\$\{\{parent\.jobs\.([a-z_][a-z0-9_]{0,99})\.outputs\.(\w{1,100})\}\}")
_JOB_NAMED = re.compile(r"parent\.jobs\.(\w+)")
#: Strings azure-ai-ml cannot read as anything but text (no expression, no asset reference).
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9 _.,+\-]{0,200}")


@dataclass(slots=True)
class Skeleton:
    """The pipeline document with one job per form, and the jobs each kept job stands for."""

    pipeline: dict[str, Any]
    stands_for: dict[str, list[str]] = field(default_factory=dict)

    @property
    def jobs(self) -> int:
        """How many jobs the whole pipeline has."""
        return sum(len(names) for names in self.stands_for.values())


def job_form(name: str, job: Any) -> str:
    """What azure-ai-ml's validation can tell of ``job`` (the job ``name`` of a pipeline), as
    text: two jobs of one form are accepted or rejected alike.

    A plain name (lowercase letters, digits, ``_``) is masked, and so are the job names in
    ``${{parent.jobs.NAME.outputs.PORT}}`` inputs, and literal inputs that are a bool, an int,
    a finite float or plain text, each by its type. Everything else is kept as written, a job
    that is not a command whole, name included.

    Example:
        >>> job_form("fit_2", {"type": "command", "inputs": {"epochs": 3}}) == \\
        ...     job_form("fit_7", {"type": "command", "inputs": {"epochs": 12}})
        True
    """
    if not isinstance(job, dict) or job.get("type") != "command" \
            or not _PLAIN_NAME.fullmatch(name):
        return repr(_canonical({"name": name, "job": job}))
    inputs = job.get("inputs")
    masked = dict(job)
    if isinstance(inputs, dict):
        masked["inputs"] = {k: _input_form(v) for k, v in inputs.items()}
    return repr(_canonical({"job": masked}))


def _canonical(value: Any) -> Any:
    # any YAML value (keys of any type, dates, non-finite floats), order of keys aside
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return type(value).__name__, repr(value)


def _input_form(value: Any) -> Any:
    if isinstance(value, bool):
        return {"mlpipe:literal": "bool"}
    if isinstance(value, int):
        return {"mlpipe:literal": "int"} if -2**63 <= value < 2**63 else value
    if isinstance(value, float):
        return {"mlpipe:literal": "float"} if math.isfinite(value) else value
    if isinstance(value, str):
        reference = _JOB_OUTPUT.fullmatch(value)
        if reference:
            return {"mlpipe:output-of-a-job": reference.group(2)}
        if _PLAIN_TEXT.fullmatch(value):
            return {"mlpipe:literal": "str"}
    return value


def skeleton(pipeline: dict[str, Any]) -> Skeleton:
    """``pipeline`` (a pipeline job document) with only the first job of each form.

    Example:
        >>> sk = skeleton(yaml.safe_load(open("build/pipeline.yml")))
        >>> len(sk.pipeline["jobs"]), sk.jobs
        (5, 1000)
    """
    jobs = pipeline.get("jobs")
    if not isinstance(jobs, dict):
        return Skeleton(pipeline, {})
    named = _named_elsewhere(pipeline)
    first: dict[str, str] = {}
    stands_for: dict[str, list[str]] = {}
    for name, job in jobs.items():
        form = repr(("named", str(name))) if name in named else job_form(str(name), job)
        kept = first.setdefault(form, name)
        stands_for.setdefault(kept, []).append(name)
    return Skeleton({**pipeline, "jobs": {name: jobs[name] for name in stands_for}}, stands_for)


def _named_elsewhere(pipeline: dict[str, Any]) -> set[str]:
    """Jobs the pipeline names outside a command job's inputs (a control-flow node's body, the
    ``on_init``/``on_finalize`` settings): kept, each its own form."""
    named: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            named.update(_JOB_NAMED.findall(value))

    for key, value in pipeline.items():
        if key != "jobs":
            walk(value)
    settings = pipeline.get("settings")
    if isinstance(settings, dict):
        named.update(str(settings[k]) for k in ("on_init", "on_finalize") if settings.get(k))
    for job in pipeline["jobs"].values():
        if not isinstance(job, dict) or job.get("type") != "command":
            walk(job)
    return named


__all__ = ["Skeleton", "job_form", "skeleton"]
