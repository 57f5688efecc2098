"""Whether a step is reused: its cache key, and the newest executed run of it whose outputs are
all still intact in the artifact store and whose reads outside its inputs still have the content
it read.

Decides only: reads the store and re-verifies stored outputs; the executor records what was
decided. What goes into the key is ``cachekey``'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlpipe.backends.local import cachekey
from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.digests.snapshot import StatCache, snapshot
from mlpipe.evidence import models as m
from mlpipe.evidence.queries import Reusable, reusable_outputs
from mlpipe.evidence.store import Store
from mlpipe.spec import ComponentSpec


@dataclass(slots=True)
class Decision:
    """What the executor does with one step.

    ``origin`` is the executed step run to reuse (None: run the step), ``outputs`` its output
    artifacts by port, verified intact; ``why_not`` says why reuse was not even looked for, or
    (``stale``) why an earlier run with the same key was passed over.
    """

    key: str
    material: dict[str, Any]
    origin: Reusable | None = None
    outputs: dict[str, m.Artifact] = field(default_factory=dict)
    why_not: str | None = None
    #: an earlier run passed over because what it read outside its inputs changed
    stale: str | None = None


def decide(store: Store, cas: ArtifactStore, component: ComponentSpec, *,
           environment_digest: str, params: dict[str, Any], inputs: dict[str, str],
           local_scale: dict[str, Any] | None = None, packages: str | None = None,
           enabled: bool = True, cache: StatCache | None = None) -> Decision:
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
        cache: the stat cache that re-hashes what an earlier run read outside its inputs.

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
        found, stale = _intact_origin(store, cas, decision.key, component, cache)
        if found is not None:
            decision.origin, decision.outputs = found
        elif stale is not None:
            decision.why_not = decision.stale = stale
    return decision


def _intact_origin(store: Store, cas: ArtifactStore, key: str, component: ComponentSpec,
                   cache: StatCache | None
                   ) -> tuple[tuple[Reusable, dict[str, m.Artifact]] | None, str | None]:
    """The newest executed run with ``key`` that produced exactly the component's outputs, all
    of them still intact in ``cas``, and that read nothing outside its inputs that has changed
    since; else None and, when a run was passed over for what it read, why."""
    with store.session() as s:
        found = reusable_outputs(s, key)
    wanted = {p.name for p in component.outputs}
    stale = None
    for original in found:
        if set(original.outputs) != wanted:
            continue
        if not all(cas.verify(art.location, art.digest) for art in original.outputs.values()):
            continue
        changed = changed_hidden_input(original.hidden_inputs, cache)
        if changed is not None:
            stale = stale or f"step run {original.id} {changed}: the step runs again"
            continue
        return (original, dict(original.outputs)), None
    return None, stale


def changed_hidden_input(entries: list[dict[str, Any]] | None,
                         cache: StatCache | None = None) -> str | None:
    """Why an earlier run's reads outside its inputs forbid its reuse (the first undeclared
    file whose content is not the one it read), or None when every such file is unchanged.

    Example:
        >>> changed_hidden_input([{"path": "/data/lookup.csv", "declared": False,
        ...                        "digest": "blake3:00"}])
        "read '/data/lookup.csv' outside its inputs, and its content has changed since"
    """
    for entry in entries or []:
        if entry.get("declared"):
            continue
        path = entry["path"]
        if entry.get("digest") is None:
            return (f"read {path!r} outside its inputs, and its content then was not "
                    f"recorded (the file was gone when the step finished)")
        try:
            now = snapshot(path, cache).digest
        except OSError:
            return f"read {path!r} outside its inputs, and it is gone now"
        if now != entry["digest"]:
            return f"read {path!r} outside its inputs, and its content has changed since"
    return None


__all__ = ["Decision", "changed_hidden_input", "decide"]
