"""What a declared environment is, by content: its digest and whether the reference can move;
the local interpreter that runs steps here; and the package set installed in an interpreter.

Every backend records environments and interpreters this way, so the same declaration gets the
same digest wherever it runs. Reads a declared conda file and the names of the package folders
on ``sys.path``; nothing else.
"""
from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

from mlpipe.digests import digest_of
from mlpipe.references import as_written
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
    reference can change behind the same name (an image tag, no version or a label such as
    ``@latest``, no environment).
    """
    if env is None:
        return "local", None, digest_of({"local": runtime_identity()}), True
    env = as_written(env)  # azureml:NAME:3 is version 3; azureml:NAME@latest is a label
    material: dict[str, Any] = {"name": env.name, "version": env.version}
    mutable = env.version is None or env.version.startswith("@")
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


def installed() -> dict[str, Any]:
    """``{"version", "packages"}`` of this interpreter: its Python version and its installed
    distributions as sorted ``name==version`` lines, one per normalized name (the first on
    ``sys.path`` wins, as for imports), read from the ``.dist-info``/``.egg-info`` folder
    names (a few milliseconds: no metadata file is parsed but an egg-info's without a
    version in its name). Self-contained: ``inspect`` runs its source in other interpreters.
    """
    import os
    import re
    import sys

    seen: dict[str, str] = {}
    for folder in sys.path:
        try:
            entries = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            stem, dot, kind = entry.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            name, _, version = stem.partition("-")
            version = version.split("-py", 1)[0] if kind == "egg-info" else version
            if not version:  # ``name.egg-info`` (a development install): its PKG-INFO
                path = os.path.join(folder or ".", entry)
                path = os.path.join(path, "PKG-INFO") if os.path.isdir(path) else path
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        version = next((line.split(":", 1)[1].strip() for line in fh
                                        if line.startswith("Version:")), "")
                except OSError:
                    pass
            key = re.sub(r"[-_.]+", "-", name).lower()
            if key and key not in seen:
                seen[key] = f"{key}=={version or 'unknown'}"
    return {"version": ".".join(map(str, sys.version_info[:3])),
            "packages": sorted(seen.values())}


def interpreter_evidence(packages: dict[str, Any] | None = None) -> dict[str, Any]:
    """This interpreter as a step record describes it, where no executor of mlpipe's saw it
    (a step run by Azure ML): its path, Python version, and the digest and count of its
    installed package set (``installed()``), as ``StepRun.interpreter`` holds them locally."""
    found = packages if packages is not None else installed()
    return {"python": sys.executable, "version": found["version"],
            "packages_digest": digest_of(list(found["packages"])),
            "packages": len(found["packages"])}
