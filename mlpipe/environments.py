"""What a declared environment is, by content: its digest and whether the reference can move;
and the local interpreter that runs steps here.

Every backend records environments this way, so the same declaration gets the same digest
wherever it runs. Reads a declared conda file; nothing else.
"""
from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

from mlpipe.digests import digest_of
from mlpipe.spec import Environment


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
