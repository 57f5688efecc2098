"""A step's cache key: the digest of everything that decides its outputs, kept as material.

Covers the component spec, code, environment, local runtime, declared environment variables,
parameter values, contract versions and input *content* digests; never names, paths or ids.
Pure: no I/O beyond reading a declared conda file.
"""
from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

from mlpipe.contracts.base import contract_spec
from mlpipe.spec import ComponentSpec, Environment, digest_of

KEY_VERSION = 1


def runtime_identity() -> str:
    """The interpreter that runs steps locally, e.g. ``cpython-3.11.2-linux-x86_64``."""
    return (f"{platform.python_implementation().lower()}-{platform.python_version()}-"
            f"{sys.platform}-{platform.machine()}")


def environment_identity(env: Environment | None, component_file: str | None
                         ) -> tuple[str, str | None, str, bool]:
    """``(name, version, digest, mutable)`` of the environment a component declares.

    The digest is the image digest when the image is pinned by ``@sha256:``, else the content
    of the conda file when one is declared, else the name and version. Mutable means the
    reference can change behind the same name (an image tag, no version, no environment).
    """
    if env is None:
        return "local", None, digest_of({"local": runtime_identity()}), True
    material: dict[str, Any] = {"name": env.name, "version": env.version}
    mutable = env.version is None
    if env.image:
        pinned = "@sha256:" in env.image
        material["image"] = env.image.split("@", 1)[1] if pinned else env.image
        mutable = mutable or not pinned
    if env.conda_file:
        base = Path(component_file).parent if component_file else Path.cwd()
        try:
            material["conda"] = digest_of((base / env.conda_file).read_text())
        except OSError:
            material["conda"] = None
            mutable = True
    return env.name, env.version, digest_of(material), mutable


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
