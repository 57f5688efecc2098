"""The candidate of an Azure ML pipeline job, named in its tags: what azure-ai-ml and Azure ML
carry and ignore, and what mlpipe reads as the ``Candidate(model=..., evaluation=...)`` of one
of its own pipelines.

Two spellings: ``mlpipe.candidate.model: OUTPUT`` (with ``mlpipe.candidate.evaluation`` and
``mlpipe.candidate.name``, optional), as a team writes it (``@dsl.pipeline(tags={...})`` or
``job.tags[...] = ...``), and ``mlpipe.candidate: {"model": ..., ...}`` (JSON), as mlpipe's
export writes it, so a compiled job reads back with its candidate. Never judges anything else.
"""
from __future__ import annotations

import json
from typing import Any

from mlpipe.errors import LoadError
from mlpipe.spec import CandidateSpec

PREFIX = "mlpipe.candidate"
_FIELDS = ("model", "evaluation", "name")


def candidate_of(tags: Any, outputs: list[str], file: str | None = None,
                 line: int | None = None) -> CandidateSpec | None:
    """The candidate the job's ``tags`` name, among the pipeline's ``outputs``; None when
    they name none.

    Raises:
        LoadError: a tag names no output of the pipeline, the JSON form is not a mapping with
            ``model``, or a tag under ``mlpipe.candidate.`` is none of model, evaluation, name.

    Example:
        >>> candidate_of({"mlpipe.candidate.model": "model"}, ["model"]).model
        'model'
    """
    if not isinstance(tags, dict):
        return None
    given: dict[str, Any] = {}
    if PREFIX in tags:
        try:
            whole = json.loads(str(tags[PREFIX]))
        except ValueError:
            whole = None
        if not isinstance(whole, dict) or not whole.get("model"):
            raise LoadError(f"tag {PREFIX} is {tags[PREFIX]!r}, not a JSON mapping naming the "
                            f"model output", hint=f"write the tag {PREFIX}.model: OUTPUT (and "
                            f"{PREFIX}.evaluation: OUTPUT) instead", file=file, line=line)
        given.update({k: v for k, v in whole.items() if k in _FIELDS and v is not None})
    for key, value in tags.items():
        if str(key).startswith(PREFIX + "."):
            field = str(key)[len(PREFIX) + 1:]
            if field not in _FIELDS:
                raise LoadError(f"tag {key} names no part of a candidate",
                                hint=f"use {', '.join(f'{PREFIX}.{f}' for f in _FIELDS)}",
                                file=file, line=line)
            given[field] = str(value)
    if not given:
        return None
    if not given.get("model"):
        raise LoadError(f"the tags name a candidate without its model ({sorted(given)})",
                        hint=f"add the tag {PREFIX}.model: OUTPUT, the pipeline output that "
                             f"is the model", file=file, line=line)
    for field in ("model", "evaluation"):
        if given.get(field) and given[field] not in outputs:
            shown = ", ".join(outputs) or "none"
            raise LoadError(f"tag {PREFIX}.{field} names {given[field]!r}, which is no output "
                            f"of the pipeline (outputs: {shown})",
                            hint="name a pipeline output: return it from the @dsl.pipeline "
                                 "function ({'model': fit.outputs.model}) or declare it under "
                                 "outputs:", file=file, line=line)
    return CandidateSpec(model=str(given["model"]), evaluation=given.get("evaluation"),
                         name=given.get("name"))


__all__ = ["PREFIX", "candidate_of"]
