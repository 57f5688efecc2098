"""A run's start, the one way both backends record it: its pipeline spec, the code revision
and the files it loaded, the policy it committed to, then the run as ``running``.

Knows no backend: each passes the options only it records (``executor`` and the rest).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlpipe.evidence.storage.config import project_root
from mlpipe.evidence.storage.revision import file_states, git_revision, pipeline_files
from mlpipe.evidence.storage.store import Store
from mlpipe.spec import PipelineSpec


def start_run(store: Store, spec: PipelineSpec, *, target: str, run_id: str,
              params: Mapping[str, Any], inputs: Mapping[str, Any],
              options: Mapping[str, Any],
              commitment: Mapping[str, Any] | None = None) -> str:
    """Record run ``run_id`` of ``spec`` as begun on ``target`` (``local`` or ``azure``).

    Args:
        store: the evidence store.
        spec: the pipeline it runs (its spec row is written once per digest).
        target: the backend's name, as ``Run.target`` holds it.
        run_id: the run's id.
        params: the parameters as recorded (secrets already as their keyed hash).
        inputs: input name -> its snapshot row.
        options: the backend's own ``Run.options``; the code files the pipeline loaded
            (``code_files``) and the committed policy (``policy``) are added here.
        commitment: the qualification policy committed to before anything ran, if any.

    Returns:
        ``run_id``.

    Example:
        >>> start_run(store, spec, target="local", run_id="r-0a1b2", params={}, inputs={},
        ...           options={"executor": "local"})
        'r-0a1b2'
    """
    pipeline = store.pipeline_spec(spec.digest, spec.name, spec.to_dict())
    commit, dirty = git_revision(str(project_root()))
    code = store.code_revision(commit, dirty) if commit else None
    loaded = file_states(str(project_root()), pipeline_files(spec)) if commit else None
    recorded = {**({"code_files": loaded} if loaded is not None else {}), **options,
                **({"policy": dict(commitment)} if commitment else {})}
    return store.begin_run(pipeline=pipeline, target=target, params=dict(params),
                           inputs=dict(inputs), code=code, options=recorded, run_id=run_id)


__all__ = ["start_run"]
