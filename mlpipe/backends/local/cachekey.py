"""A step's cache key: the digest of everything that decides its outputs, kept as material.

Covers the component spec, code, environment, local runtime, declared environment variables,
parameter values, contract versions and input *content* digests; never names, paths or ids.
Pure: no I/O. What an environment is by content is ``mlpipe.environments``'s.
"""
from __future__ import annotations

from typing import Any

from mlpipe.contracts.base import contract_spec
from mlpipe.digests import digest_of
from mlpipe.environments import runtime_identity
from mlpipe.spec import ComponentSpec

KEY_VERSION = 1


def key_material(component: ComponentSpec, *, environment_digest: str,
                 params: dict[str, Any], inputs: dict[str, str]) -> dict[str, Any]:
    """The parts of a step's cache key, by name (what ``mlpipe show --why`` compares).

    Args:
        component: the step's component.
        environment_digest: from :func:`environment_identity`.
        params: the step's parameter values, every parameter included.
        inputs: input port -> content digest of what is bound to it.
    """
    spec = component.to_dict()
    for part in ("code", "environment", "environment_variables"):
        spec.pop(part)
    variables = dict(component.environment.variables) if component.environment else {}
    variables.update(dict(component.environment_variables))
    return {
        "key_version": KEY_VERSION,
        "component": f"{component.name}@{component.version} {digest_of(spec)}",
        "code": component.code_digest,
        "environment": environment_digest,
        "runtime": runtime_identity(),
        "environment_variables": variables,
        "params": params,
        "contracts": {p.name: None if p.contract is None else contract_spec(p.contract)
                      for p in (*component.inputs, *component.outputs)},
        "inputs": inputs,
    }


def cache_key(material: dict[str, Any]) -> str:
    """The key itself: sha256 over the canonical JSON of the material."""
    return digest_of(material)
