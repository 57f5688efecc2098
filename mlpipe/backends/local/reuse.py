"""Whether a step is reused: its cache key, and the newest executed run of it whose outputs are
all intact in this run's own artifact root (fetched from the shared root when it lacks them).

Decides only: reads the store and re-verifies stored outputs; the executor records what was
decided. What goes into the key is ``cachekey``'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.backends.local import cachekey
from mlpipe.evidence import models as m
from mlpipe.evidence.queries import Reusable, reusable_outputs
from mlpipe.evidence.roots import ArtifactRoots, key_in
from mlpipe.evidence.store import Store
from mlpipe.spec import ComponentSpec


@dataclass(slots=True)
class Decision:
    """What the executor does with one step.

    ``origin`` is the executed step run to reuse (None: run the step), ``outputs`` its output
    artifacts by port, verified intact, and ``paths`` where they are in this run's own root;
    ``why_not`` says why reuse was not even looked for.
    """

    key: str
    material: dict[str, Any]
    origin: Reusable | None = None
    outputs: dict[str, m.Artifact] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    why_not: str | None = None


def decide(store: Store, roots: ArtifactRoots, component: ComponentSpec, *,
           environment_digest: str, params: dict[str, Any], inputs: dict[str, str],
           local_scale: dict[str, Any] | None = None, enabled: bool = True) -> Decision:
    """Make the step's cache key and look for an executed run of it to reuse.

    Args:
        store: the open evidence store.
        roots: the run's artifact roots: the outputs must be intact in its own root, or be
            fetched into it from the shared root.
        component: the step's component, as declared.
        environment_digest: its environment's content digest.
        params: every parameter's value.
        inputs: input port -> content digest of what is bound to it.
        local_scale: the smaller launch ``--local-scale`` asked for, which enters the key.
        enabled: False for ``--no-reuse``.

    Returns:
        The decision; ``origin`` is None when the step must run.
    """
    material = cachekey.key_material(component, environment_digest=environment_digest,
                                     params=params, inputs=inputs)
    if local_scale is not None:
        material["local_scale"] = local_scale
    decision = Decision(cachekey.cache_key(material), material)
    if not enabled:
        decision.why_not = "reuse turned off (--no-reuse)"
    elif not component.reuse:
        decision.why_not = f"component {component.name!r} declares reuse=False"
    else:
        found = _intact_origin(store, roots, decision.key, component)
        if found is not None:
            decision.origin, decision.outputs, decision.paths = found
    return decision


def _intact_origin(store: Store, roots: ArtifactRoots, key: str, component: ComponentSpec
                   ) -> tuple[Reusable, dict[str, m.Artifact], dict[str, Path]] | None:
    """The newest executed run with ``key`` that produced exactly the component's outputs, all
    of them intact in this run's own root (or fetched into it); never a path outside it."""
    with store.session() as s:
        found = reusable_outputs(s, key)
    wanted = {p.name for p in component.outputs}
    for original in found:
        if set(original.outputs) != wanted:
            continue
        paths: dict[str, Path] = {}
        for port, art in original.outputs.items():
            art_key = art.key or key_in(art.location, art.digest)
            path = None if art_key is None else roots.resolve(art_key, art.digest)
            if path is None:
                break
            paths[port] = path
        else:
            return original, dict(original.outputs), paths
    return None


__all__ = ["Decision", "decide"]
