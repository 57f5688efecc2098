"""Submit and sync on mlpipe's side of the Azure boundary: workspace resolution, the job
azure-ai-ml builds from the export, and parsing of recorded service payloads.

``FakeAzureML`` (``fake_azureml.py``) is a fake of the Azure ML service only (no test here
can reach Azure): it answers with recorded JSON payloads shaped as the service returns them.
Recording in the evidence store is tested in ``test_store_sync.py``.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError

from backends.azure.fake_azureml import WS, FakeAzureML, payload
from mlpipe.backends.azure.submit import ChecksFailed, submit_to_azure
from mlpipe.backends.azure.sync import parse_job, parse_metrics, sync_run
from mlpipe.backends.azure.workspace import resolve_workspace
from mlpipe.errors import AzureError
from mlpipe.loader import load_spec
from pipelines.defect_classifier import defect_classifier

ROOT = pathlib.Path(__file__).resolve().parents[3]


# --- workspace ------------------------------------------------------------------------------

def test_workspace_from_flags_env_and_config_field_by_field(tmp_path):
    (tmp_path / ".azureml").mkdir()
    (tmp_path / ".azureml" / "config.json").write_text(json.dumps(
        {"subscription_id": "sub-cfg", "resource_group": "rg-cfg", "workspace_name": "ws-cfg"}))
    deeper = tmp_path / "a" / "b"
    deeper.mkdir(parents=True)
    ws = resolve_workspace(workspace_name="ws-flag", env={"AZUREML_RESOURCE_GROUP": "rg-env"},
                           cwd=deeper)
    assert (ws.subscription_id, ws.resource_group, ws.workspace_name) == (
        "sub-cfg", "rg-env", "ws-flag")
    assert "resource_group=$AZUREML_RESOURCE_GROUP" in ws.source


def test_no_workspace_is_one_line_naming_the_missing_field(tmp_path):
    with pytest.raises(AzureError, match=r"^no workspace: the resource group is not given\n  "
                                         r"help: pass --resource-group, set "
                                         r"AZUREML_RESOURCE_GROUP, or put \"resource_group\""):
        resolve_workspace(subscription_id="s", workspace_name="w", env={}, cwd=tmp_path)
    bad = tmp_path / "config.json"
    bad.write_text("[1]")
    with pytest.raises(AzureError, match=r"no workspace: .*config.json holds a JSON list"):
        resolve_workspace(env={}, config=bad)


@pytest.mark.parametrize("exc, message", [
    (ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token"),
     r"^no credentials: DefaultAzureCredential found none that works .*\n  help: run `az login`"),
    (ServiceRequestError("Failed to resolve 'management.azure.com'"),
     r"^no network: Azure ML cannot be reached \(Failed to resolve"),
])
def test_no_credentials_and_no_network_are_one_line_each(exc, message):
    with pytest.raises(AzureError, match=message):
        FakeAzureML(failure=exc).check_access()


# --- submit -----------------------------------------------------------------------------------

def test_submit_checks_exports_and_sends_the_job_azure_ai_ml_built():
    service = FakeAzureML()
    run = submit_to_azure(defect_classifier.spec, WS, service,
                          inputs={"raw": "azureml:defect-images:1"}, run_id="r-1")
    (job, experiment), = service.created
    assert type(job).__name__ == "PipelineJob" and experiment == "defect-classifier"
    assert job.tags["mlpipe.run_id"] == "r-1"
    assert job.tags["mlpipe.pipeline_digest"] == defect_classifier.spec.digest
    assert sorted(job.jobs) == ["evaluate", "prepare", "train"]
    assert run.job_name == "sincere_lamp_7k2m9" and run.status == "NotStarted"
    assert run.studio_url.startswith("https://ml.azure.com/runs/sincere_lamp_7k2m9")
    assert run.to_dict()["workspace"].endswith("/workspaces/ws-defects")


def test_submit_stops_on_check_errors_before_touching_azure():
    spec, found = load_spec(str(ROOT / "tests" / "fixtures" / "azure" / "yaml" / "cycle.yml"))
    service = FakeAzureML()
    with pytest.raises(ChecksFailed, match=r"the pipeline has 3 error\(s\); nothing was "
                                           r"submitted") as info:
        submit_to_azure(spec, WS, service, extra_diagnostics=found)
    assert "MP101" in {d.code for d in info.value.diagnostics}
    assert service.created == []


def test_submit_without_credentials_creates_nothing():
    service = FakeAzureML(failure=ClientAuthenticationError("no token"))
    with pytest.raises(AzureError, match=r"^no credentials"):
        submit_to_azure(defect_classifier.spec, WS, service, inputs={"raw": "azureml:x:1"})
    assert service.created == []


# --- sync -------------------------------------------------------------------------------------

def test_parse_pipeline_job_payload():
    job = parse_job(payload("pipeline_job.json"))
    assert (job.name, job.job_type, job.status, job.finished) == (
        "sincere_lamp_7k2m9", "Pipeline", "Completed", True)
    assert job.tags["mlpipe.run_id"] == "5f1c0e4b2a9d4c7e8b3a6d2f1e0c9b8a"
    assert job.outputs["model"].endswith("/sincere_lamp_7k2m9/model/")
    assert job.created_at == "2026-10-20T09:14:03.551Z" and not job.reused


def test_sync_parses_children_reuse_outputs_and_metrics():
    synced = sync_run("sincere_lamp_7k2m9", FakeAzureML())
    assert synced.run_id == "5f1c0e4b2a9d4c7e8b3a6d2f1e0c9b8a"
    by_node = {s.node: s for s in synced.steps}
    prepare, train, evaluate = by_node["prepare"], by_node["train"], by_node["evaluate"]
    assert prepare.reused and prepare.reused_from == "0d9c41aa-prepare-old"
    assert prepare.reused_pipeline == "brave_kite_q8d1z"
    assert prepare.metrics == {"images": 300.0}  # read from the run it reused
    assert not train.reused and train.compute == "gpu-cluster"
    assert train.metrics == {"loss": 0.42, "shard_accuracy": 0.85, "train_accuracy": 0.87}
    assert train.metric_info["shard_accuracy"] == {
        "scope": "partial", "population": "rank 0's shard of the training split"}
    assert train.metric_info["loss"] == {"scope": "global", "population": None}
    assert (train.started_at, train.finished_at) == ("2026-10-20T09:14:30+00:00",
                                                     "2026-10-20T09:38:20+00:00")
    assert synced.pipeline.finished_at == "2026-10-20T09:52:30+00:00"
    assert evaluate.status == "Failed" and evaluate.outputs == {"report": None}


def test_a_payload_that_is_not_a_job_is_one_clear_error():
    with pytest.raises(AzureError, match=r"Azure ML returned a job without 'properties'"):
        parse_job({"name": "x"})
    assert parse_metrics({}) == {}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("az") is not None or "AZURE_CLIENT_ID" in os.environ,
                    reason="this machine may have Azure credentials")
def test_real_submit_without_credentials_prints_one_line_and_records_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE", "IDENTITY", "MSI"))}
    env["IDENTITY_ENDPOINT"] = ""  # no managed identity endpoint here
    env["MLPIPE_STORE_URL"] = f"sqlite:///{tmp_path / 'store.sqlite'}"
    result = subprocess.run(
        [sys.executable, "-m", "mlpipe.cli", "submit", "pipelines/defect_classifier.py",
         "--target", "azure", "--workspace", "w", "--resource-group", "g", "--subscription", "s",
         "--input", "raw=azureml:x:1"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("error: no credentials: DefaultAzureCredential found none")
    assert len(result.stderr.strip().splitlines()) == 2  # the line and its help
    import sqlite3
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        assert db.execute("select count(*) from runs").fetchone() == (0,)


def test_sync_lists_the_child_jobs_of_a_nested_pipeline_job_as_outer_dot_inner():
    import copy

    class Nested(FakeAzureML):
        def children(self, name):
            if name == "inner-job":
                return [leaf]
            return super().children(name) + [inner]

    fake = Nested()
    inner = copy.deepcopy(fake.child("train"))
    inner["name"], inner["properties"]["jobType"] = "inner-job", "Pipeline"
    inner["properties"]["displayName"] = "inner"
    inner["properties"]["properties"] = {"azureml.nodeid": "inner"}
    leaf = copy.deepcopy(fake.child("train"))
    leaf["name"], leaf["properties"]["properties"] = "fit-job", {"azureml.nodeid": "fit"}
    fake.runs["fit-job"] = fake.runs["7c1d9e0b-train"]
    synced = sync_run("sincere_lamp_7k2m9", fake)
    assert [s.node for s in synced.steps] == ["evaluate", "inner.fit", "prepare", "train"]
    assert "metrics inner-job" not in fake.calls  # a pipeline job is walked, not measured
