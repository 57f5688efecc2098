"""The playback tier for assets: mlpipe's Azure commands through the real azure-ai-ml
``MLClient`` against the loopback, whose asset answers hold the recorded facts
(test_conformance_assets.py). Each test names the recording (``loopback.azureml.recordings``)
its wire facts come from, and asserts the requests azure-ai-ml really sent.
"""
from __future__ import annotations

import json
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from loopback.azureml import recordings

from backends.azure.azure_helpers import ROOT, WS
from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main

PF = ROOT / "tests" / "fixtures" / "azure" / "preflight" / "pf.py"
FLAGS = ["--workspace", WS.workspace_name, "--resource-group", WS.resource_group,
         "--subscription", WS.subscription_id, "--input", "raw=azureml:defect-images:1"]
GOOD = ("dependencies:\n- python=3.11\n- pip:\n  - mlpipe-aml==0.1.0\n  - mlflow-skinny==2.18.0\n"
        "  - azureml-mlflow==1.57.0\n")


@pytest.fixture
def run(azureml, monkeypatch, tmp_path):
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)

    def invoke(*args: str):
        return CliRunner().invoke(main, [str(a) for a in args])

    return invoke


def _sent(azureml, since: int, part: str) -> list[tuple[str, str, int]]:
    return [(r.method, unquote(r.path.split("/workspaces/ws-defects/", 1)[-1]) + (
        "?" + unquote(r.query).split("&", 1)[1] if "&" in r.query else ""), r.status)
        for r in azureml.requests[since:] if part in r.path]


def test_an_environment_by_label_is_checked_and_submitted(azureml, run):
    """recordings.ENVIRONMENT_LATEST: azure-ai-ml asks the versions list, newest first, for
    one; the run records the version the label named."""
    azureml.add_environment("defect-cpu", "5", conda_file=GOOD)
    before = len(azureml.requests)
    checked = run("check", f"{PF}:labels", *FLAGS)
    assert checked.exit_code == 0, checked.output
    assert "info[MP858] reference-resolved: environment azureml:defect-cpu@latest names " \
           "version 5 today" in checked.output
    assert _sent(azureml, before, "/environments/") == [
        ("GET", "environments/defect-cpu/versions?$orderBy=createdtime desc&$top=1", 200)]
    done = run("submit", f"{PF}:labels", "--target", "azure", *FLAGS)
    assert done.exit_code == 0, done.output
    assert json.loads(azureml.last_job.tags["mlpipe.resolved"]) == {
        "azureml:defect-cpu@latest": "azureml:defect-cpu:5"}
    assert not any("@" in r.path for r in azureml.requests)


def test_a_registry_environment_is_said_not_checked_and_submitted_as_written(azureml, run):
    """Registry assets live in the registry, not the workspace: the pre-flight asks nothing
    of the workspace about them (no recording shows a workspace answering for one: the
    registry's own, recordings.REGISTRY_ENVIRONMENT, goes to the registry's endpoint)."""
    before = len(azureml.requests)
    done = run("submit", f"{PF}:registries", "--target", "azure", *FLAGS)
    assert done.exit_code == 0, done.output
    # said with the run: the pre-flight's findings are recorded with its compile-time checks
    assert "info[MP862] registry-asset-not-checked (compile-time, step registry_env): " \
           "azureml://registries/" \
           "azureml/environments/sklearn-1.5/labels/latest (step 'registry_env') is a " \
           "registry asset" in done.output
    assert not any("registries" in r.path or "sklearn" in r.path
                   for r in azureml.requests[before:])
    sent = {node: azureml._component_spec(body.get("componentId")).get("environment")
            for node, body in azureml.last_job.definition["jobs"].items()}
    assert sent["registry_env"] == ("azureml://registries/azureml/environments/sklearn-1.5/"
                                    "labels/latest")
    assert sent["registry_pinned"] == "azureml://registries/azureml/environments/sklearn-1.5/" \
                                      "versions/3"


def test_a_missing_compute_is_one_clear_line(azureml, run):
    """A missing compute answers 404 with an empty body (docs/azure.md: no recording holds
    one; azure-ai-ml rewords it "Not found compute with name ..."): before the pre-flight
    (--offline), azure-ai-ml's own lookup meets it and mlpipe names the compute."""
    done = run("submit", f"{PF}:gone_compute", "--target", "azure", "--offline", *FLAGS)
    assert done.exit_code != 0
    assert "no compute: workspace 'ws-defects' (resource group 'rg-ml', subscription " \
           "'00000000-0000-0000-0000-000000000000') has no compute 'cpu-clustr'" in done.output
    assert "az ml compute create --type amlcompute --name cpu-clustr" in done.output
    assert "Traceback" not in done.output and azureml.pipelines == []
    gone = [r for r in azureml.requests if r.path.endswith("/computes/cpu-clustr")]
    assert gone and {(r.status, r.body) for r in gone} == {(404, b"")}


def test_a_model_registered_and_fetched(azureml, service, tmp_path):
    """recordings.MODEL_CRUD: the versions list of a model that has none answers 404
    ModelNotFound (a first version, not a failure); the upload's listSecrets asks an
    expirable secret and gets a SAS token; the version PUT answers 201; the fetch reads it."""
    from mlpipe.backends.azure.models import fetch, register

    model = tmp_path / "model"
    model.mkdir()
    (model / "MLmodel").write_text("flavors: {python_function: {loader_module: m}}\n")
    (model / "model.pkl").write_bytes(b"weights")
    tags = {"mlpipe.candidate": "c-1", "mlpipe.model": "sha256:" + "0" * 64}
    before = len(azureml.requests)
    made = register(service, "defect", str(model), tags)
    assert (made.uri, made.new) == ("azureml:defect:1", True)
    models = _sent(azureml, before, "/models/")
    assert models[0][::2] == ("GET", 404) and models[0][1].startswith("models/defect/versions")
    assert models[-1] == ("PUT", "models/defect/versions/1", 201)
    secrets = [r for r in azureml.requests[before:] if r.path.endswith("/listSecrets")]
    assert [json.loads(r.body) for r in secrets] == [{"expirableSecret": True,
                                                      "expireAfterHours": 1}]
    name, version, got_tags, path = fetch(service, "azureml:defect:1", tmp_path / "fetched")
    assert (name, version, got_tags["mlpipe.candidate"]) == ("defect", "1", "c-1")
    assert (path / "model.pkl").read_bytes() == b"weights"
    again = register(service, "defect", str(model), tags)
    assert (again.uri, again.new) == ("azureml:defect:1", False)
    assert recordings.MODEL_CRUD.endswith("test_crud_file.json")


def test_a_failed_vm_sizes_lookup_does_not_block_submit(azureml, run):
    """Unknown is not absent: the region's VM sizes answering 404 is MP863 (info), and the
    job is submitted; before, it was MP854 "region does not offer", an error that refused it.
    (No recording holds this route: docs/azure.md.)"""
    azureml.fail(404, r"GET .*/vmSizes$", times=None)
    done = run("submit", f"{PF}:serverless", "--target", "azure", *FLAGS)
    assert done.exit_code == 0, done.output
    assert "info[MP863] could-not-check (compile-time, step odd_size): could not check the " \
           "region's VM sizes" in done.output
    assert "MP854" not in done.output and len(azureml.pipelines) == 1
    azureml.clear_faults()
    refused = run("submit", f"{PF}:serverless", "--target", "azure", *FLAGS)
    assert refused.exit_code == 1 and "error[MP854] vm-size-not-offered" in refused.output
