"""Pre-flight against the workspace: what a job names, asked of Azure ML before it is sent.

Each compute exists, has the declared VM size and enough max nodes; each serverless VM size is
offered in the workspace's region and its family's quota has room; each registered
environment, component and data asset version exists (``@latest`` resolved to the version it
names today); each registered environment holds mlpipe and an MLflow client the tracking server
accepts, judged from its conda specification. Every finding is a coded diagnostic. Requests
go through azure-ai-ml's ``MLClient`` (its retry policy waits out 429 Retry-After), one per
distinct name, at most ``WORKERS`` at once; a failure that is not "not found" is one
``AzureError`` line (``service.azure_failure``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mlpipe.backends.azure.verdicts import Needs, judge
from mlpipe.backends.azure.workspace import Workspace
from mlpipe.diagnostics import Diagnostic
from mlpipe.errors import AzureError
from mlpipe.references import AssetReference, asset_reference, environment_reference
from mlpipe.spec import InputRole, Literal, PipelineSpec

#: Lookups in flight at once (each a distinct compute, environment, component or data asset).
WORKERS = 8
_COMPONENT_REF = re.compile(r"a registered component \((?P<ref>[^)]*)\)")


@dataclass(slots=True)
class Preflight:
    """The pre-flight's findings, what each moving reference names today (``resolved``:
    ``"azureml:defect-cpu@latest" -> "azureml:defect-cpu:5"``, recorded with the run) and the
    number of requests it made."""

    diagnostics: list[Diagnostic]
    resolved: dict[str, str]
    requests: int


def registered(ref: Any) -> tuple[str, str | None, str | None] | None:
    """``(name, version, label)`` of a workspace asset: ``azureml:NAME:VERSION``,
    ``azureml:NAME@LABEL`` (a bare ``azureml:NAME`` is ``@latest``) or its ARM id; None for
    anything else (paths, URIs, registry assets: ``references.asset_reference`` reads those).

    Example:
        >>> registered("azureml:defect-cpu@latest"), registered("azureml://datastores/x")
        (('defect-cpu', None, 'latest'), None)
    """
    found = asset_reference(ref)
    if found is None or found.registry is not None:
        return None
    return found.name, found.version, found.label




def needs_of(spec: PipelineSpec, inputs: Mapping[str, Any] | None = None,
             default_compute: str | None = None) -> Needs:
    """What ``spec`` (with these input values and default compute) names in the workspace."""
    needs = Needs()
    given = dict(inputs or {})
    default = (default_compute or "").removeprefix("azureml:")
    if default and default != "serverless":
        needs.computes[default] = []  # the job's default compute must exist too
    for step, comp in spec.leaves():
        at = (step, comp)
        compute = comp.compute
        # as the export writes it: a step without a compute name runs serverless
        name = (compute.name or "") if compute is not None and compute.input is None else ""
        name = name.removeprefix("azureml:")
        if name and name != "serverless" and "${{" not in name:
            needs.computes.setdefault(name, []).append(at)
        elif compute is not None and compute.sku:
            needs.serverless.setdefault(compute.sku, []).append(at)
        env = environment_reference(comp.environment) if comp.environment else None
        if env is not None:
            _need(needs, needs.environments, env, at, f"step {step.name!r}")
        m = _COMPONENT_REF.search(comp.azure_only or "")
        ref = asset_reference(m["ref"], "components") if m else None
        if ref is not None:
            _need(needs, needs.components, ref, at, f"step {step.name!r}")
        for port_name, binding in step.bindings:
            port = comp.input(port_name)
            kind = port.kind if port is not None else None
            if isinstance(binding, Literal) and (ref := asset_reference(binding.value,
                                                                        _kind(kind))):
                said = f"{step.name} (a literal input)"
                _need(needs, _table(needs, ref), ref, said, said)
    for inp in spec.inputs:
        if inp.role is not InputRole.ARTIFACT:
            continue
        kind = inp.kind or (inp.port.kind if inp.port is not None else None)
        ref = asset_reference(given.get(inp.name, inp.default), _kind(kind))
        if ref is not None:
            said = f"pipeline input {inp.name!r}"
            _need(needs, _table(needs, ref), ref, said, said)
    return needs


def _kind(kind: Any) -> str:
    """The asset kind a short reference bound to a port of ``kind`` names: a model input's
    ``azureml:NAME:V`` is a registered model, any other a data asset."""
    return "models" if str(kind or "").endswith("_model") else "data"


def _table(needs: Needs, ref: AssetReference) -> dict[Any, list[Any]]:
    return needs.models if ref.kind == "models" else needs.data


def _need(needs: Needs, table: dict[Any, list[Any]], ref: AssetReference, use: Any,
          said: str) -> None:
    """``ref`` asked of the workspace under ``table``, or, a registry asset, kept to be said
    as not checked."""
    if ref.registry is not None:
        uses = needs.registry.setdefault(ref.text, [])
        if said not in [s for s, _ in uses]:
            uses.append((said, use))
        return
    table.setdefault((ref.name, ref.version, ref.label), []).append(use)


def run_preflight(spec: PipelineSpec, workspace: Workspace, client: Any, *,
                  inputs: Mapping[str, Any] | None = None,
                  default_compute: str | None = None) -> Preflight:
    """Ask the workspace about everything ``spec`` names, through ``client`` (an
    ``azure.ai.ml.MLClient``); the findings, the resolved references, the request count.

    Raises:
        AzureError: the workspace cannot be reached or refused a request (one line: no
            network, not authenticated, throttled past the retries, ...).

    Example:
        >>> run_preflight(spec, ws, MLClientService(ws).client).diagnostics
        [Diagnostic(code='MP851', ...)]   # compute 'gpu-clustr' does not exist
    """
    from mlpipe.backends.azure import lookups

    needs = needs_of(spec, inputs, default_compute)
    ask = lookups.Lookups(client, workspace)
    jobs: list[tuple[str, Any, Any]] = []
    jobs += [("compute", name, name) for name in needs.computes]
    jobs += [("environment", key, key) for key in needs.environments]
    jobs += [("component", key, key) for key in needs.components]
    jobs += [("data", key, key) for key in needs.data]
    jobs += [("model", key, key) for key in needs.models]
    if needs.serverless:  # the region's VM sizes and the subscription's quota in it
        jobs += [("sizes", None, None), ("usages", None, None)]
    found: dict[tuple[str, Any], Any] = {}
    where = ask.get("workspace", None)
    if isinstance(where, AzureError):
        raise where
    if jobs:
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(jobs))) as pool:
            answers = pool.map(lambda job: ask.get(job[0], job[2]), jobs)
            for (kind, key, _), answer in zip(jobs, answers, strict=True):
                found[(kind, key)] = answer
    failures = [a for a in found.values() if isinstance(a, AzureError)]
    if failures:
        raise failures[0]
    diagnostics, resolved = judge(needs, found)
    return Preflight(diagnostics, resolved, ask.requests)


__all__ = ["WORKERS", "Preflight", "needs_of", "registered", "run_preflight"]

