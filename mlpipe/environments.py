"""What a declared environment is, by content: its digest and whether the reference can move;
the local interpreter that runs steps here; the package set installed in an interpreter; and
what a requirement line installs (which distribution, whether it is this mlpipe's runtime);
and the conda file that builds an environment (its own, or the one the project's
``environments/`` folder declares for a registered environment).

Every backend records environments and interpreters this way, so the same declaration gets the
same digest wherever it runs. Reads a declared conda file, the project's environment YAML files
and the names of the package folders on ``sys.path``; nothing else.
"""
from __future__ import annotations

import platform
import re
import sys
from pathlib import Path
from typing import Any

from mlpipe.digests import digest_of
from mlpipe.references import as_written
from mlpipe.spec import Environment
from mlpipe.version import DISTRIBUTION, __version__


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


#: The project folder whose Azure ML environment YAML files (what ``az ml environment create
#: --file`` reads: name, version, image, conda_file) declare the registered environments its
#: components name: the nearest one at or above a component's folder (docs/azure.md).
DECLARED_DIR = "environments"


def declared_conda_file(env: Environment | None, component_file: str | None
                        ) -> tuple[Path, str] | None:
    """The conda file that builds ``env``, as ``(absolute path, how messages show it)``: its
    own ``conda_file`` (relative to the component's file), or, for a registered environment
    (a name and version, no conda file), the ``conda_file`` of its definition in the project:
    an Azure ML environment YAML with the same name and version in the nearest
    ``environments/`` folder at or above the component's folder. None when neither exists.

    Example:
        >>> path, shown = declared_conda_file(Environment("defect-cpu", version="4"),
        ...                                   "components/defect.py")
        >>> shown
        'environments/defect-cpu.conda.yml'
    """
    if env is None:
        return None
    base = Path(component_file).resolve().parent if component_file else Path.cwd()
    if env.conda_file:
        return (base / env.conda_file).resolve(), env.conda_file
    if env.image or not env.name or not env.version:
        return None
    name = env.name.removeprefix("azureml:")
    for folder in (base, *base.parents):
        declared = folder / DECLARED_DIR
        if declared.is_dir():
            found = _declared_in(declared, name, env.version)
            if found is None:
                return None
            return found, str(found.relative_to(folder)) if found.is_relative_to(folder) \
                else str(found)
    return None


def _declared_in(folder: Path, name: str, version: str) -> Path | None:
    """The conda file of environment ``name:version`` declared by a YAML file in ``folder``."""
    import yaml

    for path in sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")]):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(doc, dict) or str(doc.get("name")) != name or \
                str(doc.get("version")) != version or not isinstance(doc.get("conda_file"), str):
            continue
        return (path.parent / doc["conda_file"]).resolve()
    return None


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


_WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9][\w.]*?)-(?P<version>\d[\w.+!]*?)(?:-[\w.]+)*"
                    r"\.(?:whl|tar\.gz|zip)$")
_PIN = re.compile(r"^===?\s*(?P<version>[\w.+!]+)\s*$")


def normalized(name: str) -> str:
    """A distribution name as the package index compares it (PEP 503): ``Mlpipe_AML`` ->
    ``mlpipe-aml``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str | None:
    """The distribution a pip or conda requirement line installs, normalized; None for an
    option, a comment, or a path that names none.

    Example:
        >>> requirement_name("conda-forge::PyArrow>=14")
        'pyarrow'
        >>> requirement_name("./dist/mlpipe_aml-0.1.0-py3-none-any.whl")
        'mlpipe-aml'
    """
    text = line.split(" #", 1)[0].strip()
    if not text or text.startswith("#"):
        return None
    egg = re.search(r"#egg=([\w.-]+)", text)
    if egg:
        return normalized(egg.group(1))
    if text.startswith("-"):
        return None
    stem = text.rsplit("/", 1)[-1]
    wheel = _WHEEL.match(stem)
    if wheel:
        return normalized(wheel.group("name"))
    if "://" in text:
        return None
    base = re.split(r"[=<>!~\[\s@;]", text.split("::", 1)[-1], maxsplit=1)[0]
    return normalized(base) or None


def pinned_version(line: str) -> str | None:
    """The one version a requirement line allows (``==V``, ``===V``, conda's ``=V``, or a
    wheel or sdist file's version); None when it allows a range or names none."""
    text = line.split(" #", 1)[0].split(";", 1)[0].strip()
    wheel = _WHEEL.match(text.rsplit("/", 1)[-1])
    if wheel:
        return wheel.group("version")
    if requirement_name(text) is None or "://" in text:
        return None
    rest = re.sub(r"^[^=<>!~]*", "", text.split("::", 1)[-1])
    if re.fullmatch(r"=[^=<>!~]+", rest.replace(" ", "")):  # conda's "name=1.2"
        return rest.strip("= ").split("=", 1)[0]
    pin = _PIN.match(rest)
    return pin.group("version") if pin else None


def runtime_listing(line: str) -> tuple[bool, str | None] | None:
    """How a requirement line installs mlpipe's step runtime: None when it names no mlpipe;
    ``(True, version)`` for this project's distribution (``mlpipe-aml``, by name or as its
    wheel), ``version`` its exact pin or None; ``(False, version)`` for the name ``mlpipe``,
    which the package index gives to another project (0.1.0 ... 0.1.17).

    Example:
        >>> runtime_listing("mlpipe-aml==0.1.0"), runtime_listing("mlpipe")
        ((True, '0.1.0'), (False, None))
    """
    name = requirement_name(line)
    if name not in (DISTRIBUTION, "mlpipe"):
        return None
    return name == DISTRIBUTION, pinned_version(line)


def runtime_line(extras: str = "") -> str:
    """The requirement that installs this mlpipe's step runtime and nothing else:
    ``mlpipe-aml==0.1.0`` (with ``extras``, e.g. ``"tabular"``)."""
    return f"{DISTRIBUTION}{f'[{extras}]' if extras else ''}=={__version__}"
