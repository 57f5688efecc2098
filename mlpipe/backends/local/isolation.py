"""The interpreter a step runs on here: mlpipe's own, or (``submit --isolate``) a virtual
environment built from the step's declared conda/pip specification, cached by its digest; and
what each one is, for the evidence (its path, version and a digest of its installed packages).

Builds and inspects interpreters only; what is recorded is the executor's job.
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mlpipe.digests import digest_of
from mlpipe.environments import (
    declared_conda_file,
    environment_identity,
    installed,
    runtime_identity,
    runtime_line,
    runtime_listing,
)
from mlpipe.errors import EnvironmentBuildFailed, UsageError
from mlpipe.spec import ComponentSpec, Environment
from mlpipe.version import DISTRIBUTION
from mlpipe.wheel import build_wheel, source_tree

#: Written last into a built environment: what it was built from and the package set in it.
DONE = "mlpipe-environment.json"

def _freeze_script() -> str:
    """``installed()`` as a script for an interpreter that has no mlpipe."""
    import inspect as source
    import textwrap

    return ("from __future__ import annotations\n" + textwrap.dedent(
        source.getsource(installed)) + "\nimport json, sys\n"
            "json.dump(installed(), sys.stdout)\n")


_CONDA_ONLY = {"python", "pip", "setuptools", "wheel"}
_SPEC = re.compile(r"^(?:[\w.-]+::)?(?P<name>[A-Za-z0-9][\w.-]*)\s*(?P<rest>.*)$")


@dataclass(frozen=True, slots=True)
class Interpreter:
    """An interpreter steps run on, as the evidence records it.

    ``packages`` is the digest of its installed package set (the sorted ``name==version``
    lines); ``environment`` the digest of the declared environment it was built from, None for
    mlpipe's own interpreter.
    """

    python: str
    version: str
    packages: str
    package_count: int
    environment: str | None = None
    built_with: str | None = None

    def evidence(self, declared: Environment | None, *, why_not: str | None
                 ) -> dict[str, Any]:
        """What a step run records (``StepRun.interpreter``, the bundle's ``interpreter``):
        which interpreter and package set ran it, and whether that is its declared
        environment, with a note when it is not (``why_not``: why it cannot be built here;
        None when ``--isolate`` would build it)."""
        inside = None if declared is None else self.environment is not None
        note = None
        if declared is not None and not inside:
            how = why_not or "submit --isolate builds it here from its conda file"
            note = (f"ran on mlpipe's own interpreter, not in its declared environment "
                    f"{_label(declared)!r} ({how})")
        return {"python": self.python, "version": self.version,
                "packages_digest": self.packages, "packages": self.package_count,
                "isolated": self.environment is not None, "built_with": self.built_with,
                "declared_environment": None if declared is None else _label(declared),
                "in_declared_environment": inside, "note": note}


def _label(env: Environment) -> str:
    if not env.name:  # an inline environment (image and conda file) names none
        return f"inline: {Path(env.conda_file).name if env.conda_file else env.image}"
    return f"{env.name}:{env.version}" if env.version else env.name


def _identity(data: dict[str, Any], python: str, **extra: Any) -> Interpreter:
    packages = list(data["packages"])
    return Interpreter(python, data["version"], digest_of(packages), len(packages), **extra)


def inspect(python: str) -> dict[str, Any]:
    """``{"version", "packages"}`` of the interpreter at ``python`` (its installed
    distributions as sorted ``name==version`` lines), asked in a subprocess.

    Raises:
        EnvironmentBuildFailed: the interpreter cannot be run.
    """
    try:
        done = subprocess.run([python, "-I", "-c", _freeze_script()], capture_output=True,
                              text=True, timeout=120, check=True)
        return json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise EnvironmentBuildFailed(f"the interpreter {python} cannot list its packages: "
                                     f"{exc}", hint="rebuild the environment: remove its "
                                     "folder and submit again") from None


_OWN: list[Interpreter] = []


def own_interpreter() -> Interpreter:
    """mlpipe's own interpreter (the one steps run on without ``--isolate``), inspected in this
    process, once."""
    if not _OWN:
        _OWN.append(_identity(installed(), sys.executable))
    return _OWN[0]


# --- the specification ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Requirements:
    """What an environment's conda file asks for, as pip installs it."""

    conda_file: Path
    python: str | None          # the declared Python version (``3.11``), if any
    packages: tuple[str, ...]   # pip requirement lines, in the conda file's order


def conda_requirement(spec: str) -> str | None:
    """A conda package spec as the pip requirement of the same package: ``numpy=1.26`` ->
    ``numpy==1.26.*`` (conda's ``=``, like ``numpy 1.26``, matches a version prefix),
    ``numpy==1.26.4`` and
    ``numpy>=1.26`` unchanged, a build string and a channel prefix dropped; None for Python,
    pip and the installers.

    Example:
        >>> conda_requirement("conda-forge::numpy=1.26=py311h0"), conda_requirement("pip")
        ('numpy==1.26.*', None)
    """
    m = _SPEC.match(spec.strip())
    if m is None:
        return spec.strip()
    name, rest = m["name"], m["rest"].strip()
    if name.lower() in _CONDA_ONLY:
        return None
    if not rest:
        return name
    if rest[0].isdigit():  # ``numpy 1.26 py311_0``: a version, then a build
        rest = "=" + rest.split()[0]
    rest = rest.replace(" ", "")
    if rest.startswith("=") and not rest.startswith("=="):
        version = rest[1:].split("=", 1)[0]
        return f"{name}=={version}" if version.endswith("*") else f"{name}=={version}.*"
    return f"{name}{rest.split('=', 2)[0] if rest.count('=') > 2 else rest}"


def requirements(env: Environment, conda_file: Path) -> Requirements:
    """The pip requirements of ``env``'s conda file.

    Raises:
        UsageError: the file cannot be read or is not a conda specification.
    """
    try:
        doc = yaml.safe_load(conda_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"environment {_label(env)!r}: its conda file {conda_file} cannot be "
                         f"read ({exc.__class__.__name__}: {exc})",
                         hint="fix the file (a conda environment YAML with dependencies:)"
                         ) from None
    deps = doc.get("dependencies") if isinstance(doc, dict) else None
    if not isinstance(deps, list):
        raise UsageError(f"environment {_label(env)!r}: its conda file {conda_file} has no "
                         f"dependencies: list", hint="list the packages under dependencies:")
    python, packages = None, []
    for dep in deps:
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            packages += [str(p).strip() for p in dep["pip"] if str(p).strip()]
        elif isinstance(dep, (str, int, float)):
            text = str(dep).strip()
            m = _SPEC.match(text)
            if m and m["name"].lower() == "python":
                python = m["rest"].lstrip("=<>!~ ").split("=")[0] or None
            required = conda_requirement(text)
            if required:
                packages.append(required)
    return Requirements(conda_file, python, tuple(packages))


def lists_mlpipe(wanted: Requirements) -> bool:
    """Whether the environment names mlpipe (this project's distribution, or the name
    ``mlpipe`` that the package index gives to another project: installed as Azure ML would,
    a Python function step then fails there as it would on Azure ML; MP631 says so first)."""
    return any(runtime_listing(p) is not None for p in wanted.packages)


def mlpipe_requirement(root: Path, extras: str = "") -> str:
    """The requirement that installs *this* mlpipe as an Azure ML image gets it: the wheel
    built from its checkout (under ``root/wheels``, once per state of the sources), not an
    editable source tree; for an installed copy, its released version."""
    if source_tree() is not None:
        wheel = build_wheel(root / "wheels")
        return f"{DISTRIBUTION}{extras} @ {wheel.resolve().as_uri()}"
    return runtime_line(extras.strip("[]"))


def _pinned(packages: tuple[str, ...], root: Path) -> list[str]:
    """The requirements with this project's distribution replaced by this mlpipe's own wheel
    (its extras kept): the runtime of a step must be the one that compiled and runs it. The
    name ``mlpipe`` is left as it is: Azure ML would install the other project it names."""
    out = []
    for line in packages:
        listing = runtime_listing(line)
        if listing is None or not listing[0] or line.lstrip().startswith("-"):
            out.append(line)
            continue
        found = re.search(r"\[[^\]]*\]", line)
        out.append(mlpipe_requirement(root, found.group(0) if found else ""))
    return out


def conda_file_of(component: ComponentSpec) -> Path | None:
    """The absolute path of the conda file that builds the component's environment: its own,
    or that of the project's definition of the registered environment it names
    (``environments/*.yml``, ``mlpipe.environments.declared_conda_file``)."""
    found = declared_conda_file(component.environment,
                                component.location.file if component.location else None)
    return found[0] if found is not None else None


# --- building -----------------------------------------------------------------------------------

def _base_python(wanted: str | None) -> str:
    """An interpreter of the declared Python version: mlpipe's own when it matches."""
    mine = platform.python_version()
    if wanted is None or mine == wanted or mine.startswith(wanted.rstrip(".*") + "."):
        return sys.executable
    short = ".".join(wanted.split(".")[:2])
    found = shutil.which(f"python{short}")
    if found is None:
        raise EnvironmentBuildFailed(
            f"the environment declares Python {wanted}; this machine runs {mine} and has no "
            f"python{short}", hint=f"install Python {short}, or declare the Python version the "
                                   f"steps need")
    return found


def _uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return None


#: pip's settings that say where packages come from, as uv's options
_PIP_TO_UV = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
              "find-links": "--find-links", "constraint": "--constraint"}


def pip_sources(python: str = sys.executable) -> list[str]:
    """pip's configured package sources (``pip config list``: its files and ``PIP_*``
    variables) as ``uv pip install`` options, so uv installs from the registries pip is set up
    to use here.

    Example:
        >>> pip_sources()  # with find-links = /opt/wheels in pip.conf
        ['--find-links', '/opt/wheels']
    """
    try:
        done = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    found: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        option = _PIP_TO_UV.get(key.rpartition(".")[2])
        if option is None:
            continue
        values = value.strip().strip("'\"").split()
        # a PIP_* variable (":env:") overrides the files, as it does for pip
        if key.startswith(":env:") or option not in found:
            found[option] = values
    return [part for option, values in found.items() for value in values
            for part in (option, value)]


def _run(argv: list[str], log: Any, cwd: Path) -> None:
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, check=True,
                   stdin=subprocess.DEVNULL, timeout=1800)


def build(env: Environment, conda_file: Path, digest: str, root: Path,
          note: Any = None, installer: str | None = None) -> Interpreter:
    """The virtual environment of ``env``, built from its conda file under ``root`` (once:
    later calls with the same environment digest find it built), with ``uv`` when it is
    installed, else ``venv`` and ``pip``; either way from the package sources pip is
    configured with here (its indexes, wheel folders and constraints).

    ``installer`` (``"uv"`` or ``"pip"``) chooses; by default uv when it is found.

    Safe for two runs at once: a lock per environment; a half-built folder is rebuilt.

    Raises:
        UsageError: the conda file cannot be read.
        EnvironmentBuildFailed: the build failed (the message names the log).
    """
    wanted = requirements(env, conda_file)
    packages = _pinned(wanted.packages, root.parent)
    # this mlpipe's wheel lies in a folder named after its sources' digest
    own = [p for p in packages if p not in wanted.packages]
    key = digest_of({"environment": digest, "runtime": runtime_identity(),
                     "mlpipe": own or None})
    folder = root / key.split(":", 1)[-1][:16]
    done = folder / DONE
    root.mkdir(parents=True, exist_ok=True)
    with open(folder.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            state = json.loads(done.read_text())
            python = str(folder / "bin" / "python")
            listed = state.get("listed")
            if listed is None or state.get("site") != _site_stamp(folder):
                listed = inspect(python)  # installed into since: list it again
            return _identity(listed, python, environment=digest,
                             built_with=state.get("built_with"))
        shutil.rmtree(folder, ignore_errors=True)
        log_path = folder.with_suffix(".log")
        base = _base_python(wanted.python)
        uv = _uv() if installer in (None, "uv") else None
        if installer == "uv" and uv is None:
            raise EnvironmentBuildFailed("uv is not installed here",
                                         hint="pip install uv, or build with pip")
        if note is not None:
            note(f"building environment {_label(env)!r} ({len(wanted.packages)} "
                 f"requirement{'s' if len(wanted.packages) != 1 else ''}, "
                 f"{'uv' if uv else 'venv and pip'}); log: {log_path}")
        reqs = folder.with_suffix(".requirements.txt")
        reqs.write_text("".join(f"{p}\n" for p in packages))
        python = str(folder / "bin" / "python")
        try:
            with open(log_path, "w") as log:
                if uv:
                    _run([uv, "venv", "--quiet", "--python", base, str(folder)], log, root)
                    if wanted.packages:
                        # every source considered alike, as pip (and Azure ML's image
                        # build) does: uv would stop at the first index naming a package
                        _run([uv, "pip", "install", "--python", python, "--index-strategy",
                              "unsafe-best-match", *pip_sources(), "-r", str(reqs)], log,
                             conda_file.parent)
                else:
                    _run([base, "-m", "venv", str(folder)], log, root)
                    if wanted.packages:
                        _run([python, "-m", "pip", "install", "--disable-pip-version-check",
                              "-r", str(reqs)], log, conda_file.parent)
        except (OSError, subprocess.SubprocessError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            last = "\n".join(log_path.read_text(errors="replace").splitlines()[-5:]) \
                if log_path.exists() else ""
            raise EnvironmentBuildFailed(
                f"environment {_label(env)!r} could not be built from {conda_file} "
                f"({exc.__class__.__name__}){': ' + last if last else ''}",
                hint=f"fix its requirements (whole log: {log_path}); every package must be "
                     f"installable with pip here") from None
        listed = inspect(python)
        identity = _identity(listed, python, environment=digest,
                             built_with="uv" if uv else "venv+pip")
        done.write_text(json.dumps({"built_with": identity.built_with,
                                    "requirements": packages,
                                    "conda_file": str(conda_file), "listed": listed,
                                    "site": _site_stamp(folder)}))
        return identity


def _site_stamp(folder: Path) -> list[list[Any]]:
    """The environment's site-packages folders and their modification times: installing or
    removing a distribution adds or removes a ``.dist-info`` folder there, which changes it,
    so an unchanged stamp means the package set listed at build time is still the one."""
    return [[str(p), p.stat().st_mtime_ns] for p in sorted(folder.glob("lib*/python*/"
                                                                     "site-packages"))]


@dataclass(slots=True)
class Plan:
    """Each step's interpreter for one run: the isolated ones built before the run begins;
    mlpipe's own inspected only when a step first runs on it (a run that reuses every step
    inspects nothing)."""

    isolated: dict[str, Interpreter] = dataclasses.field(default_factory=dict)

    def bin_folder(self, step: str) -> str | None:
        """The folder to put first on a step's PATH (None: mlpipe's own interpreter)."""
        found = self.isolated.get(step)
        return None if found is None else os.path.dirname(found.python)

    def packages(self, step: str) -> str | None:
        """The isolated step's package-set digest (it enters the cache key); else None."""
        found = self.isolated.get(step)
        return None if found is None else found.packages

    def evidence(self, step: str, component: ComponentSpec) -> dict[str, Any]:
        """What the step run records about the interpreter that ran it."""
        interpreter = self.isolated.get(step) or own_interpreter()
        return interpreter.evidence(component.environment,
                                    why_not=_why_not(component, short=True))


def plan(components: dict[str, ComponentSpec], *, isolate: bool, root: Path,
         note: Any = None) -> Plan:
    """Each step's interpreter: with ``isolate``, its declared environment, built (each
    distinct environment once) before anything runs; else mlpipe's own.

    Raises:
        UsageError: with ``isolate``, steps whose environment cannot be built here (none
            declared with a conda file, or a Python-function step whose conda file lists no
            mlpipe), all named at once.
        EnvironmentBuildFailed: a build failed.
    """
    found = Plan()
    if not isolate:
        return found
    cannot = [f"{sid!r} ({why})" for sid, comp in components.items()
              if (why := _why_not(comp))]
    if cannot:
        raise UsageError(
            f"--isolate cannot build the environment of step{'s' if len(cannot) > 1 else ''} "
            f"{', '.join(cannot)}",
            hint="declare each step's environment with a conda file that lists what it "
                 "needs (inline: image and conda_file; a registered one: its Azure ML "
                 "environment YAML with a conda_file in the project's environments/ folder; "
                 "mlpipe-aml too, for a Python function step), so it can be built here")
    built: dict[str, Interpreter] = {}
    for sid, comp in components.items():
        _, _, digest, _ = environment_identity(
            comp.environment, comp.location.file if comp.location else None)
        env, conda_file = comp.environment, conda_file_of(comp)
        assert env is not None and conda_file is not None  # else _why_not(comp) said why
        if not env.conda_file:
            # a registered environment the project declares: built from its conda file's text
            digest = digest_of({"environment": digest,
                                "conda": conda_file.read_text(encoding="utf-8")})
        if digest not in built:
            built[digest] = build(env, conda_file, digest, root, note)
        found.isolated[sid] = built[digest]
    return found


def _why_not(comp: ComponentSpec, short: bool = False) -> str | None:
    """Why the step's environment cannot be built here; None when it can."""
    if comp.environment is None:
        return "it declares no environment"
    conda = conda_file_of(comp)
    if conda is None:
        env = comp.environment
        if short or env.image or not env.name or not env.version:
            return ("it has no conda file to build it from here" if short else
                    f"its environment {_label(env)!r} has no conda file")
        return (f"its environment {_label(env)!r} is registered in the workspace and "
                f"declared nowhere here: add its Azure ML environment YAML (name: {env.name}, "
                f"version: {env.version}, image, conda_file) to an environments/ folder at or "
                f"above the component's file")
    if not conda.is_file():
        return f"its conda file {conda} does not exist"
    if comp.function is not None:
        try:
            listed = lists_mlpipe(requirements(comp.environment, conda))
        except UsageError:
            return None  # the build says what is wrong with the file
        if not listed:
            return ("its conda file lists no mlpipe, which a Python function step's runtime "
                    "is (on Azure ML too)")
    return None


__all__ = ["Interpreter", "Plan", "build", "conda_requirement", "inspect", "installed",
           "own_interpreter", "plan", "requirements"]
