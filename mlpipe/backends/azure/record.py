"""Recording an Azure ML submission in the evidence store: the run, its pipeline spec,
component versions, environments, code revision, input references, and the plan ``sync`` needs.

Writes only through the store; never talks to Azure (``submit`` does, through the service).
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import update

from mlpipe.backends.azure.sync import JobRecord
from mlpipe.backends.azure.workspace import Workspace
from mlpipe.digests import REFERENCE, reference_digest
from mlpipe.digests.snapshot import snapshot
from mlpipe.environments import environment_identity
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.runstart import start_run
from mlpipe.evidence.storage.store import Store, utcnow
from mlpipe.graph import FromInput, FromStep, Graph
from mlpipe.judgements.diagnosis import wiring
from mlpipe.spec import InputRole, declared_topology, plain_value

_PINNED_ASSET = re.compile(r"/data/[^/]+/versions/(?!latest/?$)[^/]+/?$")


def reference_mutable(reference: str) -> bool:
    """Whether the data behind ``reference`` can change while the text stays the same.

    ``azureml:NAME:VERSION`` and ``azureml://.../data/NAME/versions/N`` pin a data asset
    version (immutable); ``azureml:NAME@latest``, an unversioned name, a datastore path, a URL
    or a local path do not.

    Example:
        >>> reference_mutable("azureml:images:1"), reference_mutable("azureml:images@latest")
        (False, True)
    """
    text = reference.strip()
    if text.startswith("azureml:") and not text.startswith("azureml://"):
        body = text[len("azureml:"):]
        name, sep, version = body.rpartition(":")
        return "@" in body or not (sep and name and version and version != "latest")
    if text.startswith("azureml://"):
        return _PINNED_ASSET.search(text) is None
    return True


def _endpoint(endpoint: Any) -> list[str] | None:
    if isinstance(endpoint, FromStep):
        return ["step", endpoint.node, endpoint.port]
    if isinstance(endpoint, FromInput):
        return ["input", endpoint.name]
    return None


def _values(graph: Graph, given: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """Split the given pipeline inputs into data references and parameter values."""
    from mlpipe.backends.azure.job_inputs import input_param  # the typing the export applies
    from mlpipe.runtime.argv import coerce_param

    refs: dict[str, str] = {}
    params: dict[str, Any] = {}
    for inp in graph.spec.inputs:
        value = given.get(inp.name, inp.default)
        if inp.role is InputRole.ARTIFACT:
            if value is not None:
                refs[inp.name] = os.fspath(value)
            continue
        param = input_param(graph.spec, inp)
        if isinstance(value, str) and inp.name in given and param is not None:
            value = coerce_param(param, value)
        params[inp.name] = plain_value(value)
    return refs, params


def _input_artifact(store: Store, reference: str, kind: str) -> tuple[m.Artifact, m.Snapshot]:
    """A local file or folder is hashed by content (azure-ai-ml uploads it); anything else is
    recorded as the reference it is."""
    if os.path.exists(reference):
        path = os.path.abspath(reference)
        snap = snapshot(path)
        return (store.artifact(snap.digest, kind, snap.size, snap.file_count, path),
                store.snapshot(snap.digest, path, snap.size, snap.file_count, mutable=True))
    digest = reference_digest(reference)
    return (store.artifact(digest, kind, 0, 0, reference),
            store.snapshot(digest, reference, 0, 0, mutable=reference_mutable(reference)))


def _step_params(node: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The parameter values step ``node`` runs with, as a local run records them."""
    from mlpipe.graph import FromLiteral

    found: dict[str, Any] = {}
    for param in node.component.params:
        endpoint = node.bindings.get(param.name)
        if isinstance(endpoint, FromLiteral):
            found[param.name] = plain_value(endpoint.value)
        elif isinstance(endpoint, FromInput) and endpoint.name in values:
            found[param.name] = values[endpoint.name]
        else:
            found[param.name] = plain_value(param.default)
    return found


def _candidate_plan(graph: Graph) -> dict[str, Any] | None:
    """The candidate the pipeline declares, its model (and evaluation) as the step outputs
    that will hold them."""
    cand = graph.spec.candidate
    return None if cand is None else {
        "name": cand.name, "model": _endpoint(graph.outputs.get(cand.model)),
        "evaluation": _endpoint(graph.outputs.get(cand.evaluation)) if cand.evaluation else None}


def begin_azure_run(store: Store, graph: Graph, *, run_id: str, workspace: Workspace,
                    experiment: str, inputs: Mapping[str, Any] | None = None,
                    default_compute: str | None = None,
                    ci: Mapping[str, str | None] | None = None,
                    preflight: Mapping[str, Any] | None = None,
                    commitment: dict[str, Any] | None = None) -> str:
    """Record a run about to be submitted to Azure ML, as ``running`` by this process.

    Records the pipeline spec, every step's component version and environment, the code
    revision, the inputs (Azure data references by reference, mutable when unversioned) and,
    in ``Run.options``, the workspace and the plan ``sync`` turns child jobs into step runs
    with. If this process dies before :func:`mark_submitted`, the next store open marks the
    run interrupted, as for a local run.

    Returns:
        ``run_id``.

    Example:
        >>> begin_azure_run(store, graph, run_id="r-0a1b2c3d4e", workspace=ws,
        ...                 experiment="defect-classifier", inputs={"raw": "azureml:raw:1"})
        'r-0a1b2c3d4e'
    """
    spec = graph.spec
    refs, params = _values(graph, inputs or {})
    snaps: dict[str, m.Snapshot] = {}
    planned_inputs: dict[str, Any] = {}
    for name, reference in sorted(refs.items()):
        declared = spec.input(name)
        kind = declared.kind.value if declared is not None and declared.kind else "uri_folder"
        art, snaps[name] = _input_artifact(store, reference, kind)
        planned_inputs[name] = {"reference": reference, "artifact_id": art.id,
                                "mutable": snaps[name].mutable}
    steps: dict[str, Any] = {}
    for sid, node in graph.steps.items():
        comp = node.component
        row = store.component_version(comp.name, comp.version, comp.digest, comp.code_digest,
                                      comp.to_dict())
        if comp.command is None:  # a function component: its source, for diffs
            store.source_text(comp.code_digest, comp.location.file if comp.location else None,
                              comp.function, comp.location.line if comp.location else None)
        name, version, digest, mutable = environment_identity(
            comp.environment, comp.location.file if comp.location else None)
        env = store.environment(name, version, digest, mutable)
        topology = declared_topology(comp)
        steps[sid] = {
            "component_version_id": row.id, "environment_id": env.id,
            "compute": None if comp.compute is None else comp.compute.to_dict(),
            "topology": {"declared": topology} if topology else {},
            "outputs": {p.name: p.kind.value for p in comp.outputs},
            # a function component's step runtime leaves a step record (``mlpipe_record``)
            "record": comp.command is None,
            "inputs": {port: ref for port, e in sorted(node.bindings.items())
                       if (ref := _endpoint(e)) is not None and comp.input(port) is not None},
            "params": _step_params(node, params),
            "wiring": [w.to_dict() for w in wiring(graph, sid)],
            "job_name": None, "studio_url": None, "azure_status": None,
        }
    candidate = _candidate_plan(graph)
    options = {
        "executor": "azure", "experiment": experiment, "default_compute": default_compute,
        "workspace": {"subscription_id": workspace.subscription_id,
                      "resource_group": workspace.resource_group,
                      "workspace_name": workspace.workspace_name},
        "job_name": None, "studio_url": None, "azure_status": None, "synced_at": None,
        "inputs": planned_inputs, "outputs": {}, "steps": steps, "candidate": candidate,
        "ci": None if ci is None else dict(ci),
        # what the pre-flight's moving references (@latest) named when the job was sent
        **({"preflight": dict(preflight)} if preflight is not None else {}),
    }
    return start_run(store, spec, target="azure", run_id=run_id, params=params, inputs=snaps,
                     options=options, commitment=commitment)


def _update_run(store: Store, run_id: str, **values: Any) -> None:
    with store.session() as s:
        s.execute(update(m.Run).where(m.Run.id == run_id).values(**values))


def mark_submitted(store: Store, run_id: str, created: JobRecord) -> None:
    """Azure ML accepted the job: note its name, studio URL and status. The run stays
    ``running``, now owned by Azure ML rather than this process (``sync`` updates it)."""
    with store.session() as s:
        run = s.get(m.Run, run_id)
        assert run is not None  # recorded before the job was submitted
        options = dict(run.options)
    options.update(job_name=created.name, studio_url=created.studio_url,
                   azure_status=created.status)
    _update_run(store, run_id, options=options, pid=None, pid_started=None)


def mark_not_submitted(store: Store, run_id: str, why: str) -> None:
    """Azure ML did not confirm the job: close the run as failed, saying why."""
    _update_run(store, run_id, status=m.FAILED, finished_at=utcnow(), pid=None,
                pid_started=None, message=f"not submitted: {why}")


__all__ = ["REFERENCE", "begin_azure_run", "mark_not_submitted", "mark_submitted",
           "reference_digest", "reference_mutable"]
