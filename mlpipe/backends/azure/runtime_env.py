"""An Azure ML environment that runs a pipeline's steps: a Docker build context that installs
the wheel of the mlpipe that runs ``mlpipe environment`` (its step runtime, not the authoring
side), what those steps need (their contracts' validators, the frameworks they import, an MLflow
client the workspace accepts), on a GPU base image when they run on GPU sizes.

Writes ``DIR/environment.yml`` (``build: {path: context}``, tagged ``mlpipe.runtime`` with the
version and ``mlpipe.wheel_sha256`` with the wheel's digest) and ``DIR/context/`` (the
Dockerfile, the wheel and ``requirements.txt``); registering it is ``az ml environment create
--file DIR/environment.yml``. Validates its inputs before it writes anything; never talks to
Azure.
"""
from __future__ import annotations

import fnmatch
import os
import re
import tempfile
import zipfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import yamlfile
from mlpipe.digests import sha256_file
from mlpipe.errors import UsageError
from mlpipe.version import __version__
from mlpipe.wheel import WHEEL_GLOB, build_wheel

#: The base image for CPU steps: Azure ML's CPU image with Python and conda.
DEFAULT_IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"
#: The base image for steps on GPU sizes: the same with CUDA 11.8 and cuDNN 8.
GPU_IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04"
#: The MLflow client the environment gets: what the workspace's tracking server accepts (MP860).
MLFLOW_CLIENT = ("mlflow-skinny>=2.16,<2.19", "azureml-mlflow>=1.57")
RUNTIME_TAG, WHEEL_TAG = "mlpipe.runtime", "mlpipe.wheel_sha256"
SCHEMA = "https://azuremlschemas.azureedge.net/latest/environment.schema.json"

# An Azure ML asset name or version: letters, digits, '-', '_' and '.', starting with a letter
# or digit (azure-ai-ml's own check of asset names).
_ASSET = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
# A Docker image reference (the grammar of distribution/reference): [host[:port]/]path[:tag]
# [@algorithm:hex], the path lower case.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = rf"{_LABEL}(?:\.{_LABEL})*"
_IMAGE = re.compile(rf"(?:{_HOST}(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
                    rf"(?::[\w][\w.-]{{0,127}})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z]"
                    rf"[A-Za-z0-9]*)*:[0-9a-fA-F]{{32,}})?")


def _control(what: str, value: str) -> None:
    bad = next((i for i, ch in enumerate(value) if ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None:
        raise UsageError(f"the {what} {value!r} holds a control character ({value[bad]!r} at "
                         f"position {bad}): in a Dockerfile or YAML file it would start a line "
                         f"of its own", hint=f"give the {what} on one line, without control "
                                            f"characters")


def validate_inputs(name: str, version: str, image: str) -> None:
    """Refuse a name, version or image that cannot make a registrable environment, each with
    one message saying what is wrong and how to fix it.

    Raises:
        UsageError: the first of them that is not valid.
    """
    for what, value in (("environment name", name), ("version", version), ("image", image)):
        _control(what, value)
    if not _ASSET.fullmatch(name):
        raise UsageError(f"the environment name {name!r} is not an Azure ML asset name",
                         hint="use letters, digits, '-', '_' and '.', starting with a letter "
                              "or digit (e.g. defect-gpu)")
    if not _ASSET.fullmatch(version) or version.lower() == "latest":
        raise UsageError(f"the version {version!r} is not an Azure ML asset version",
                         hint="use letters, digits, '-', '_' and '.', starting with a letter "
                              "or digit (e.g. 5); 'latest' is a label Azure ML resolves, not a "
                              "version to register")
    if not _IMAGE.fullmatch(image):
        raise UsageError(f"the image {image!r} is not a Docker image reference",
                         hint="give [registry/]repository[:tag][@sha256:digest], the "
                              "repository in lower case (e.g. "
                              "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04)")


@dataclass(frozen=True, slots=True)
class StepsNeed:
    """What the steps of one environment need from it: ``gpu`` (one runs on a GPU size),
    ``packages`` (requirement lines beyond the runtime) and ``steps`` (their names)."""

    gpu: bool
    packages: tuple[str, ...]
    steps: tuple[str, ...]


def _pin(line: str) -> str:
    """A framework pinned to the version installed here (its local label dropped: torch 2.13.0
    +cpu is torch==2.13.0 on the package index), else the bare name."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", line):
        return line
    try:
        return f"{line}=={version(line).split('+', 1)[0]}"
    except PackageNotFoundError:
        return line


def steps_need(spec: Any, name: str, env_version: str) -> StepsNeed:
    """What the steps of ``spec`` that run in environment ``name`` (at ``env_version``, or
    unversioned) need from it (``mlpipe.checks.needs.step_needs``), and whether any of them
    runs on a GPU size.

    Raises:
        UsageError: no step of ``spec`` runs in that environment.
    """
    from mlpipe.checks.body import step_facts
    from mlpipe.checks.needs import AZUREML_MLFLOW, MLFLOW_FULL, MLFLOW_SKINNY, step_needs
    from mlpipe.compute import CATALOGUE
    from mlpipe.graph import compile_pipeline

    graph = compile_pipeline(spec)
    gpu, lines, steps = False, {}, []
    for node, facts in step_facts(graph):
        env = node.component.environment
        if env is None or env.name != name or env.version not in (None, env_version):
            continue
        steps.append(node.id)
        size = CATALOGUE.resolve(node.component.compute)[0] if node.component.compute else None
        gpu = gpu or bool(size is not None and size.has_gpu)
        for need in step_needs(node, facts.imports if facts else ()):
            lines.setdefault(need.line, None)
    if not steps:
        raise UsageError(f"no step of pipeline {spec.name!r} runs in environment "
                         f"{name}:{env_version}",
                         hint=f"give the name and version a step declares "
                              f"(Environment({name!r}, version=...)), or leave out --pipeline")
    full = MLFLOW_FULL in lines
    lines.pop(MLFLOW_FULL, None)
    packages = [_pin(line) for line in lines]
    packages += [MLFLOW_FULL if full else MLFLOW_SKINNY, AZUREML_MLFLOW]
    return StepsNeed(gpu, tuple(packages), tuple(steps))


def _given_wheel(wheel: Path) -> None:
    if not wheel.is_file() or not fnmatch.fnmatch(wheel.name, WHEEL_GLOB):
        raise UsageError(f"{wheel} is not an mlpipe wheel", hint=f"pass {WHEEL_GLOB}")
    try:
        with zipfile.ZipFile(wheel) as archive:
            holds = "mlpipe/runtime/step.py" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        holds = False
    if not holds:
        raise UsageError(f"{wheel} is not an mlpipe wheel: it holds no mlpipe/runtime/step.py",
                         hint="pass the wheel `pip wheel --no-deps .` builds in the checkout")


def write_runtime_environment(out_dir: str | os.PathLike[str], name: str, version: str, *,
                              image: str | None = None,
                              wheel: str | os.PathLike[str] | None = None,
                              need: StepsNeed | None = None) -> Path:
    """Write the environment ``name:version`` under ``out_dir``; returns its YAML file.
    ``image``: the base image (by default Azure ML's GPU image when ``need`` says a step runs
    on a GPU size, else its CPU image); ``need``: what the steps need (``steps_need``).

    Raises:
        UsageError: an invalid name, version, image or wheel (nothing is written).

    Example:
        >>> write_runtime_environment("build/env", "defect-cpu", "5")
        PosixPath('build/env/environment.yml')
    """
    base = image or (GPU_IMAGE if need is not None and need.gpu else DEFAULT_IMAGE)
    validate_inputs(name, str(version), base)
    if wheel is not None:
        _given_wheel(Path(wheel))
    packages = need.packages if need is not None else MLFLOW_CLIENT
    out = Path(out_dir)
    context = out / "context"
    context.mkdir(parents=True, exist_ok=True)
    for old in context.glob(WHEEL_GLOB):
        old.unlink()
    if wheel is None:
        with tempfile.TemporaryDirectory(prefix="mlpipe-wheel-") as tmp:
            made = build_wheel(Path(tmp))
            built = context / made.name
            built.write_bytes(made.read_bytes())
    else:
        built = context / Path(wheel).name
        built.write_bytes(Path(wheel).read_bytes())
    (context / "requirements.txt").write_text("".join(f"{p}\n" for p in packages),
                                              encoding="utf-8")
    (context / "Dockerfile").write_text(
        f"FROM {base}\n"
        f"COPY {built.name} requirements.txt /tmp/mlpipe/\n"
        f"RUN python -m pip install --no-cache-dir /tmp/mlpipe/{built.name} "
        f"-r /tmp/mlpipe/requirements.txt && rm -rf /tmp/mlpipe\n", encoding="utf-8")
    doc = {"$schema": SCHEMA, "name": name, "version": str(version),
           "description": f"mlpipe {__version__} runtime on {base}"
                          + (f" for steps {', '.join(need.steps)}" if need else ""),
           "build": {"path": "context"},
           "tags": {RUNTIME_TAG: built.name.split("-")[1], WHEEL_TAG: sha256_file(built),
                    "mlpipe.mlflow": " ".join(p for p in packages if "mlflow" in p)}}
    return yamlfile.write(out / "environment.yml", doc)


__all__ = ["DEFAULT_IMAGE", "GPU_IMAGE", "MLFLOW_CLIENT", "RUNTIME_TAG", "WHEEL_TAG", "StepsNeed",
           "steps_need", "validate_inputs", "write_runtime_environment"]
