"""An Azure ML environment with this exact mlpipe runtime: a Docker build context that installs
the wheel built from the checkout (or installed copy) that runs ``mlpipe environment``.

Writes ``DIR/environment.yml`` (``build: {path: context}``, tagged ``mlpipe.runtime`` with the
version and ``mlpipe.wheel_sha256`` with the wheel's digest) and ``DIR/context/`` (the
Dockerfile and the wheel); registering it is ``az ml environment create --file
DIR/environment.yml``. Never talks to Azure.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlpipe.backends.azure import yamlfile
from mlpipe.digests import sha256_file
from mlpipe.errors import UsageError
from mlpipe.version import __version__

#: The base image when none is given: Azure ML's CPU image with Python and conda.
DEFAULT_IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"
#: The MLflow client the environment gets: what the workspace's tracking server accepts (MP860).
MLFLOW_CLIENT = ("mlflow-skinny>=2.16,<2.19", "azureml-mlflow>=1.57")
RUNTIME_TAG, WHEEL_TAG = "mlpipe.runtime", "mlpipe.wheel_sha256"
SCHEMA = "https://azuremlschemas.azureedge.net/latest/environment.schema.json"


def source_tree() -> Path:
    """The folder mlpipe is built from: the checkout this mlpipe was imported from."""
    here = Path(__file__).resolve().parents[3]
    pyproject = here / "pyproject.toml"
    if not pyproject.is_file() or 'name = "mlpipe"' not in pyproject.read_text(encoding="utf-8"):
        raise UsageError(f"mlpipe {__version__} is not imported from a checkout ({here} has no "
                         f"mlpipe pyproject.toml), so there is no source to build its wheel from",
                         hint="run it from a clone of mlpipe (pip install -e .), or pass "
                              "--wheel FILE of the mlpipe wheel to install")
    return here


def write_runtime_environment(out_dir: str | os.PathLike[str], name: str, version: str, *,
                              image: str = DEFAULT_IMAGE,
                              wheel: str | os.PathLike[str] | None = None) -> Path:
    """Write the environment ``name:version`` under ``out_dir``; returns its YAML file.

    Example:
        >>> write_runtime_environment("build/env", "defect-cpu", "5")
        PosixPath('build/env/environment.yml')
    """
    out = Path(out_dir)
    context = out / "context"
    context.mkdir(parents=True, exist_ok=True)
    for old in context.glob("mlpipe-*.whl"):
        old.unlink()
    if wheel is None:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--quiet", "--disable-pip-version-check", "-w", str(context), str(source_tree())],
            capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise UsageError(f"cannot build the mlpipe wheel: {last}",
                             hint="pip wheel --no-deps . in the checkout shows the whole error")
        built = sorted(context.glob("mlpipe-*.whl"))
    else:
        given = Path(wheel)
        if not given.is_file() or not given.name.startswith("mlpipe-"):
            raise UsageError(f"{given} is not an mlpipe wheel", hint="pass mlpipe-*.whl")
        (context / given.name).write_bytes(given.read_bytes())
        built = [context / given.name]
    if len(built) != 1:
        raise UsageError(f"expected one mlpipe wheel in {context}, found {len(built)}",
                         hint="remove the others and run again")
    digest = sha256_file(built[0])
    client = " ".join(f'"{r}"' for r in MLFLOW_CLIENT)
    (context / "Dockerfile").write_text(
        f"FROM {image}\n"
        f"COPY {built[0].name} /tmp/mlpipe/\n"
        f"RUN python -m pip install --no-cache-dir /tmp/mlpipe/{built[0].name} {client} "
        f"&& rm -rf /tmp/mlpipe\n", encoding="utf-8")
    doc = {"$schema": SCHEMA, "name": name, "version": str(version),
           "description": f"mlpipe {__version__} runtime on {image}",
           "build": {"path": "context"},
           "tags": {RUNTIME_TAG: built[0].name.split("-")[1], WHEEL_TAG: digest,
                    "mlpipe.mlflow": " ".join(MLFLOW_CLIENT)}}
    return yamlfile.write(out / "environment.yml", doc)


__all__ = ["DEFAULT_IMAGE", "MLFLOW_CLIENT", "RUNTIME_TAG", "WHEEL_TAG", "source_tree",
           "write_runtime_environment"]
