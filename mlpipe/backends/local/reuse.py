"""Whether a step is reused: its cache key, and the newest executed run of it whose outputs are
all intact in this run's own artifact root (fetched from the shared root when it lacks them)
and whose reads outside its inputs still have the content it read.

Decides only: reads the store and re-verifies stored outputs; the executor records what was
decided. What goes into the key is ``cachekey``'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.backends.local import cachekey
from mlpipe.digests.snapshot import StatCache, snapshot
from mlpipe.evidence.records.queries import Reusable, reusable_outputs
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.roots import ArtifactRoots, key_in
from mlpipe.evidence.storage.store import Store
from mlpipe.spec import ComponentSpec


@dataclass(slots=True)
class Decision:
    """What the executor does with one step.

    ``origin`` is the executed step run to reuse (None: run the step), ``outputs`` its output
    artifacts by port, verified intact, and ``paths`` where they are in this run's own root;
    ``why_not`` says why reuse was not even looked for, or (``stale``) why an earlier run with
    the same key was passed over.
    """

    key: str
    material: dict[str, Any]
    origin: Reusable | None = None
    outputs: dict[str, m.Artifact] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    why_not: str | None = None
    #: an earlier run passed over because what it read outside its inputs changed
    stale: str | None = None


def decide(store: Store, roots: ArtifactRoots, component: ComponentSpec, *,
           environment_digest: str, params: dict[str, Any], inputs: dict[str, str],
           local_scale: dict[str, Any] | None = None, packages: str | None = None,
           enabled: bool = True, cache: StatCache | None = None) -> Decision:
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
        found, stale = _intact_origin(store, roots, decision.key, component, cache)
        if found is not None:
            decision.origin, decision.outputs, decision.paths = found
        elif stale is not None:
            decision.why_not = decision.stale = stale
    return decision


def _intact_origin(store: Store, roots: ArtifactRoots, key: str, component: ComponentSpec,
                   cache: StatCache | None
                   ) -> tuple[tuple[Reusable, dict[str, m.Artifact], dict[str, Path]] | None,
                              str | None]:
    """The newest executed run with ``key`` that produced exactly the component's outputs, all
    of them intact in this run's own root (or fetched into it; never a path outside it), and
    that read nothing outside its inputs that has changed since; else None and, when a run was
    passed over for what it read, why."""
    with store.session() as s:
        found = reusable_outputs(s, key)
    wanted = {p.name for p in component.outputs}
    stale = None
    for original in found:
        if set(original.outputs) != wanted:
            continue
        changed = changed_hidden_input(original.hidden_inputs, cache)
        if changed is not None:
            stale = stale or f"step run {original.id} {changed}: the step runs again"
            continue
        paths = _resolved(roots, original.outputs)
        if paths is not None:
            return (original, dict(original.outputs), paths), None
    return None, stale


def _resolved(roots: ArtifactRoots, outputs: dict[str, m.Artifact]) -> dict[str, Path] | None:
    """Each output's intact copy in the own root, or None when any is in no root."""
    paths: dict[str, Path] = {}
    for port, art in outputs.items():
        art_key = art.key or key_in(art.location, art.digest)
        path = None if art_key is None else roots.resolve(art_key, art.digest)
        if path is None:
            return None
        paths[port] = path
    return paths


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
