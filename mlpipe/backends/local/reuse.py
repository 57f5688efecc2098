"""Whether a step is reused: its cache key, and the newest executed run of it whose outputs are
all still intact in the artifact store.

Decides only: reads the store and re-verifies stored outputs; the executor records what was
decided. What goes into the key is ``cachekey``'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlpipe.backends.local import cachekey
from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.evidence import models as m
from mlpipe.evidence.queries import Reusable, reusable_outputs
from mlpipe.evidence.store import Store
from mlpipe.spec import ComponentSpec


@dataclass(slots=True)
class Decision:
    """What the executor does with one step.

    ``origin`` is the executed step run to reuse (None: run the step), ``outputs`` its output
    artifacts by port, verified intact; ``why_not`` says why reuse was not even looked for.
    """

    key: str
    material: dict[str, Any]
    origin: Reusable | None = None
    outputs: dict[str, m.Artifact] = field(default_factory=dict)
    why_not: str | None = None


def decide(store: Store, cas: ArtifactStore, component: ComponentSpec, *,
           environment_digest: str, params: dict[str, Any], inputs: dict[str, str],
           local_scale: dict[str, Any] | None = None, packages: str | None = None,
           enabled: bool = True) -> Decision:
    """Make the step's cache key and look for an executed run of it to reuse.

    Args:
        store: the open evidence store.
        cas: the artifact store the outputs must still be intact in.
        component: the step's component, as declared.
        environment_digest: its environment's content digest.
        params: every parameter's value.
        inputs: input port -> content digest of what is bound to it.
        local_scale: the smaller launch ``--local-scale`` asked for, which enters the key.
        packages: the digest of the package set of the isolated environment the step runs in
            (``--isolate``), which enters the key; None on mlpipe's own interpreter.
        enabled: False for ``--no-reuse``.

    Returns:
        The decision; ``origin`` is None when the step must run.
    """
    material = cachekey.key_material(component, environment_digest=environment_digest,
                                     params=params, inputs=inputs)
    if local_scale is not None:
        material["local_scale"] = local_scale
    if packages is not None:
        material["isolated_packages"] = packages
    decision = Decision(cachekey.cache_key(material), material)
    if not enabled:
        decision.why_not = "reuse turned off (--no-reuse)"
    elif not component.reuse:
        decision.why_not = f"component {component.name!r} declares reuse=False"
    else:
        found = _intact_origin(store, cas, decision.key, component)
        if found is not None:
            decision.origin, decision.outputs = found
    return decision


def _intact_origin(store: Store, cas: ArtifactStore, key: str, component: ComponentSpec
                   ) -> tuple[Reusable, dict[str, m.Artifact]] | None:
    """The newest executed run with ``key`` that produced exactly the component's outputs, all
    of them still intact in ``cas``."""
    with store.session() as s:
        found = reusable_outputs(s, key)
    wanted = {p.name for p in component.outputs}
    for original in found:
        if set(original.outputs) != wanted:
            continue
        if all(cas.verify(art.location, art.digest) for art in original.outputs.values()):
            return original, dict(original.outputs)
    return None


__all__ = ["Decision", "decide"]
