"""Fixtures every test folder may use: the loopback Azure ML service.

``azureml`` is a fresh loopback Azure ML workspace (``loopback/azureml``: the real
``azure.ai.ml.MLClient`` talks to it over HTTPS on 127.0.0.1) with the environment pointing
azure-ai-ml at it; one server serves the whole session and is reset for each test.
``azureml_project`` is a folder with the small project ``tests/fixtures/azure/remote`` (its
pipelines: ``lbflow.py:flat``, ``:nested``, ``:on_gpu``), so that the code azure-ai-ml hashes
and uploads on submission is that folder only.
"""
from __future__ import annotations

import compileall
import os
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, settings

ROOT = pathlib.Path(__file__).resolve().parents[1]

# With PYTHONDONTWRITEBYTECODE set (this project's CI image sets it), each of the suite's
# thousands of `mlpipe` processes compiled mlpipe's modules anew, about 0.1 s each: compile
# mlpipe and the loopback services once, before the workers start (the processes read bytecode
# that exists; they still write none). Not the example's `components` and `pipelines`, nor a
# test's throw-away project: the user's own modules are always compiled from their source
# (`mlpipe.localimport`: a file rewritten within the same second at the same size would
# otherwise run its stale .pyc while mlpipe digests the new source; docs/performance.md, "The
# suite").
if os.environ.get("PYTHONDONTWRITEBYTECODE") and "PYTEST_XDIST_WORKER" not in os.environ:
    for package in ("mlpipe", "loopback"):
        compileall.compile_dir(ROOT / package, quiet=1)

# The suite runs in parallel (pytest-xdist, `make test`) on machines other jobs share: a
# property's examples are judged on what they prove, not on how fast a loaded core ran them
# (hypothesis's 200 ms deadline and its too-slow health check would fail a correct run there).
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


@pytest.fixture(scope="session")
def azureml_service(tmp_path_factory):
    from loopback.azureml import AzureMLLoopback

    service = AzureMLLoopback(folder=tmp_path_factory.mktemp("loopback-azureml")).start()
    yield service
    service.stop()


@pytest.fixture
def azureml(azureml_service, monkeypatch):
    """The loopback Azure ML workspace, reset, with ARM_CLOUD_METADATA_URL and the CA bundle
    set for this test (azure-ai-ml's AZUREML_CURRENT_CLOUD is restored afterwards)."""
    azureml_service.reset()
    for key, value in azureml_service.environ().items():
        monkeypatch.setenv(key, value)
    # azure-ai-ml sets AZUREML_CURRENT_CLOUD itself once it read the cloud's metadata: set it
    # through monkeypatch first, so that its deletion is recorded and the value azure-ai-ml
    # writes during the test is removed afterwards (a later subprocess would inherit it)
    monkeypatch.setenv("AZUREML_CURRENT_CLOUD", "")
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD")
    yield azureml_service
    errors = list(azureml_service.errors)
    azureml_service.reset()
    assert not errors, f"the loopback Azure ML service failed while answering: {errors}"


@pytest.fixture(scope="session")
def azureml_project(tmp_path_factory):
    folder = tmp_path_factory.mktemp("azureml-project")
    for name in ("lbsteps.py", "lbflow.py"):
        shutil.copy(ROOT / "tests" / "fixtures" / "azure" / "remote" / name, folder / name)
    return folder


@pytest.fixture(autouse=True)
def _not_under_ci(monkeypatch):
    """The suite records no CI provenance, whichever CI runs it (tests that want some set the
    variables themselves)."""
    from mlpipe.evidence.storage.ci import PROVIDERS

    for flag, _ in PROVIDERS:
        monkeypatch.delenv(flag, raising=False)
