"""`mlpipe environment`: an Azure ML environment that installs the wheel built from this
checkout (runtime_env.py), loaded and validated by azure-ai-ml, and accepted by the pre-flight."""
from __future__ import annotations

import hashlib
import zipfile

import pytest
from click.testing import CliRunner

from mlpipe.backends.azure.runtime_env import MLFLOW_CLIENT, write_runtime_environment
from mlpipe.cli import main
from mlpipe.errors import UsageError
from mlpipe.version import __version__


@pytest.mark.slow
def test_the_environment_installs_the_wheel_of_this_checkout(tmp_path):
    from azure.ai.ml import load_environment

    done = CliRunner().invoke(main, ["environment", "defect-cpu", "--version", "5", "-o",
                                     str(tmp_path / "env")])
    assert done.exit_code == 0, done.output
    assert "register it with: az ml environment create --file" in done.output
    wheels = list((tmp_path / "env" / "context").glob("mlpipe-*.whl"))
    assert [w.name.split("-")[1] for w in wheels] == [__version__]
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "mlpipe/runtime/step.py" in names and not any(n.startswith("tests/") for n in names)
    dockerfile = (tmp_path / "env" / "context" / "Dockerfile").read_text()
    assert f"/tmp/mlpipe/{wheels[0].name}" in dockerfile
    assert all(r in dockerfile for r in MLFLOW_CLIENT)
    env = load_environment(tmp_path / "env" / "environment.yml")  # azure-ai-ml's own reading
    assert (env.name, env.version) == ("defect-cpu", "5")
    assert env.build.path.endswith("context")
    assert env.tags["mlpipe.wheel_sha256"] == hashlib.sha256(wheels[0].read_bytes()).hexdigest()


def test_a_given_wheel_is_used_and_a_file_that_is_not_one_refused(tmp_path):
    wheel = tmp_path / f"mlpipe-{__version__}-py3-none-any.whl"
    wheel.write_bytes(b"PK not really")
    path = write_runtime_environment(tmp_path / "env", "e", "1", image="base:1", wheel=wheel)
    assert "FROM base:1" in (path.parent / "context" / "Dockerfile").read_text()
    with pytest.raises(UsageError, match=r"is not an mlpipe wheel"):
        write_runtime_environment(tmp_path / "env", "e", "1", wheel=tmp_path / "env" /
                                  "environment.yml")


def test_the_preflight_accepts_an_environment_it_built(azureml, service):
    from backends.azure.azure_helpers import ROOT
    from mlpipe.backends.azure.preflight import run_preflight
    from mlpipe.loader import load_spec

    spec, _ = load_spec(f"{ROOT / 'tests/fixtures/azure/preflight/pf.py'}:data")
    azureml.add_environment("defect-cpu", "4", build="azureml://datastores/x/paths/env/")
    found = run_preflight(spec, service.workspace, service.client,
                          inputs={"raw": "data/raw"}).diagnostics
    assert [(d.code, "built from a Docker context" in d.message) for d in found] == [
        ("MP861", True)]
    azureml.add_environment("defect-cpu", "4", build="azureml://datastores/x/paths/env/",
                            tags={"mlpipe.runtime": __version__})
    assert run_preflight(spec, service.workspace, service.client,
                         inputs={"raw": "data/raw"}).diagnostics == []
