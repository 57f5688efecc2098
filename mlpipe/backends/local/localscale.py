"""``--local-scale``: a distributed step launched here with fewer instances or processes
than it declares, at the size given or as small as this machine needs (``fit``)."""
from __future__ import annotations

import dataclasses
import os

from mlpipe.errors import UsageError
from mlpipe.graph import Graph
from mlpipe.spec import ComponentSpec, declared_topology


def processes_per_node(comp: ComponentSpec) -> int:
    """The processes per instance a component declares (1 when it is not distributed)."""
    return comp.distribution.processes_per_instance() if comp.distribution else 1


def fit_scale(comp: ComponentSpec, env: dict[str, str] | None = None) -> tuple[int, int]:
    """``--local-scale STEP=fit``: the declared launch, made as small as it must be for this
    machine: one GPU per CUDA rank, or one core per rank where there is no GPU."""
    from mlpipe.backends.local.launcher.accelerators import fitted, uses_cuda, visible_gpus

    gpus = visible_gpus(env).count if uses_cuda(comp.distribution, comp.compute) else 0
    room = gpus or os.cpu_count() or 1
    if comp.distribution is not None and not hasattr(comp.distribution, "processes_per_node"):
        return max(1, min(comp.instances, room)), 1  # TensorFlow: one worker per node
    return fitted(comp.instances, processes_per_node(comp), room)


def scaled_components(graph: Graph, scale: dict[str, tuple[int, int] | str]
                      ) -> dict[str, ComponentSpec]:
    """The components of ``scale``'s steps, launched with fewer instances/processes here.

    Raises:
        UsageError: an unknown step, a step that is not distributed, or a non-positive size.
    """
    found: dict[str, ComponentSpec] = {}
    for sid, size in sorted(scale.items()):
        node = graph.steps.get(sid)
        if node is None:
            raise UsageError(f"--local-scale names step {sid!r}, which the pipeline does not "
                             f"have (steps: {', '.join(graph.steps)})",
                             hint="give one of those step names")
        comp = node.component
        if declared_topology(comp) is None:
            raise UsageError(f"--local-scale names step {sid!r}, which is not distributed",
                             hint="scale only steps that declare a distribution or instances")
        if isinstance(size, str):  # "fit"
            instances, per_node = fit_scale(comp)
            if (instances, per_node) == (comp.instances, processes_per_node(comp)):
                continue  # it fits as declared
        else:
            instances, per_node = size
        if instances < 1 or per_node < 1:
            raise UsageError(f"--local-scale {sid}={instances}x{per_node} is not a positive "
                             f"size", hint="write it as STEP=NODESxPROCESSES, e.g. train=2x2")
        dist = comp.distribution
        if dist is not None and hasattr(dist, "processes_per_node"):
            dist = dataclasses.replace(dist, processes_per_node=per_node)
        elif dist is not None or per_node != 1:
            raise UsageError(f"--local-scale {sid}={instances}x{per_node}: only PyTorch and MPI "
                             f"steps have processes per node to scale",
                             hint=f"give {sid}={instances}x1 to change the instance count only")
        found[sid] = dataclasses.replace(comp, instances=instances, distribution=dist)
    return found
