"""What a job sets over the component it runs, read from YAML: compute (or the pipeline input
naming it), instances, VM size, distribution, environment, environment variables.

Builds spec values and records what it cannot read in ``Problems``; never judges.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mlpipe.backends.azure import nodes, vocabulary
from mlpipe.backends.azure.component_yaml import (
    Problems,
    Where,
    read_environment,
    read_resources,
)
from mlpipe.backends.azure.jobkinds import job_kind_named
from mlpipe.paths import lexical
from mlpipe.spec import ComponentSpec, Compute


def job_compute(value: Any) -> Compute | None:
    """A job's compute; one bound to a pipeline input (``${{parent.inputs.X}}``) is known only
    when the job is submitted: it names no target here, only the input."""
    body = nodes.expression(value)
    if body is not None:
        m = nodes.PARENT_INPUT.match(body)
        return Compute(None, input=m["name"]) if m else None
    return vocabulary.parse_compute(value)


def with_job_settings(where: Where, problems: Problems, node: Any, kind: str,
                      spec: ComponentSpec, default_compute: Compute | None,
                      field: str) -> ComponentSpec:
    """What the job sets over its component: compute, instances, VM size, distribution,
    environment variables."""
    changes: dict[str, Any] = {}
    compute = job_compute(node.get("compute")) or spec.compute or default_compute
    if compute is not None and compute.sku is None and spec.compute is not None \
            and spec.compute.sku is not None:
        # the component's resources.instance_type stays the VM size on the job's cluster
        compute = Compute(compute.name, spec.compute.sku)
    instances, sku = read_resources(where, problems, node, f"{field}.resources")
    if sku is not None:
        compute = Compute(compute.name if compute else None, sku)
    if compute != spec.compute:
        changes["compute"] = compute
    launched = all(getattr(job_kind_named(k), "launched", False) for k in (kind, spec.kind))
    if launched and instances is not None and instances != spec.instances:
        changes["instances"] = instances
    if launched and node.get("distribution") is not None and node.get("component") is not None:
        dist = vocabulary.parse_distribution(node["distribution"], job=True)
        if isinstance(dist, str):
            problems.add(where, node, "distribution", dist, field=f"{field}.distribution")
        else:
            # the component's own declaration (from its tags) carries over, the job's adds
            dist = vocabulary.read_launch_tags(dist, {
                **vocabulary.launch_tags(spec.distribution), **(node.get("tags") or {})})
            if isinstance(dist, str):
                problems.add(where, node, "tags", dist, field=f"{field}.tags")
            else:
                changes["distribution"] = dist
    if node.get("environment") is not None and node.get("component") is not None:
        env = read_environment(where, problems, node, lexical(where.file).parent,
                               f"{field}.environment")
        if env is not None:  # the job runs the component in another environment
            changes["environment"] = env
    variables = node.get("environment_variables")
    if isinstance(variables, dict) and variables and node.get("component") is not None:
        merged = dict(spec.environment_variables)
        merged.update({str(k): str(v) for k, v in variables.items()})
        changes["environment_variables"] = tuple(sorted(merged.items()))
    return dataclasses.replace(spec, **changes) if changes else spec

