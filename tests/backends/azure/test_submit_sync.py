"""Submit and sync on mlpipe's side of the Azure boundary: workspace resolution, the job
azure-ai-ml builds from the export and sends, the mapping of Azure's failures to one line each,
and parsing of the service's payloads. The service is the loopback Azure ML
(``loopback/azureml``) behind the real ``MLClientService``; recording in the evidence store is
tested in ``test_store_sync.py``.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from backends.azure.azure_helpers import ROOT, WS, NoCredential
from mlpipe.backends.azure.service import MLClientService, azure_failure
from mlpipe.backends.azure.submit import ChecksFailed, submit_to_azure
from mlpipe.backends.azure.sync import (
    parse_job,
    parse_metrics,
    parse_run,
    parse_run_outputs,
    sync_run,
)
from mlpipe.backends.azure.workspace import Workspace, resolve_workspace
from mlpipe.errors import AzureError
from mlpipe.loader import load_spec

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


# --- access: credentials, network, workspace ------------------------------------------------

def test_no_credentials_is_one_line(azureml):
    with pytest.raises(AzureError, match=r"^no credentials: DefaultAzureCredential found none "
                                         r"that works \(DefaultAzureCredential failed .*\n  "
                                         r"help: run `az login`"):
        MLClientService(WS, credential=NoCredential()).check_access()
    assert [r for r in azureml.requests if not r.path.startswith("/metadata/")] == []


def test_no_network_is_one_line(azureml, monkeypatch):
    # Nothing listens on port 9 of 127.0.0.1: the cloud metadata is unreachable, so azure-ai-ml
    # falls back to the public cloud, which cannot be resolved here either.
    monkeypatch.setenv("ARM_CLOUD_METADATA_URL", "https://127.0.0.1:9/metadata/endpoints")
    with pytest.raises(AzureError, match=r"^no network: Azure ML cannot be reached \("):
        MLClientService(WS, credential=azureml.credential()).check_access()


@pytest.mark.parametrize("workspace, message", [
    (Workspace("00000000-0000-0000-0000-000000000000", "rg-ml", "ws-other"),
     r"^no workspace: workspace 'ws-other' \(resource group 'rg-ml', subscription "
     r"'0{8}-0{4}-0{4}-0{4}-0{12}'\) was not found \(404 ResourceNotFound: The Resource "
     r"'Microsoft.MachineLearningServices/workspaces/ws-other'"),
    (Workspace("11111111-0000-0000-0000-000000000000", "rg-ml", "ws-defects"),
     r"^no workspace: .* was not found \(404 SubscriptionNotFound: The subscription "),
    (Workspace("00000000-0000-0000-0000-000000000000", "rg-x", "ws-defects"),
     r"^no workspace: .* was not found \(404 ResourceGroupNotFound: Resource group 'rg-x'"),
])
def test_a_workspace_that_does_not_exist_is_one_line(azureml, workspace, message):
    with pytest.raises(AzureError, match=message) as info:
        MLClientService(workspace, credential=azureml.credential()).check_access()
    assert info.value.hint == "check --workspace, --resource-group and --subscription"


def test_a_refused_token_is_one_line(azureml, service):
    azureml.fail(401, r"GET .*/workspaces/ws-defects$", times=None)
    with pytest.raises(AzureError, match=r"^not authenticated: Azure ML refused the "
                                         r"credentials' token \(401 InvalidAuthenticationToken"):
        service.check_access()


def test_forbidden_is_one_line_naming_what_was_refused(azureml, service):
    azureml.fail(403, r"GET .*/workspaces/ws-defects$", times=None)
    with pytest.raises(AzureError, match=r"^not authorized: the signed-in identity may not "
                                         r"read the workspace in workspace 'ws-defects' .*"
                                         r"\(403 AuthorizationFailed"):
        service.check_access()


# --- submit -----------------------------------------------------------------------------------

def test_submit_checks_exports_and_sends_the_job_azure_ai_ml_built(azureml, service,
                                                                    project_spec):
    spec = project_spec("flat")
    run = submit_to_azure(spec, WS, service, inputs={"raw": "azureml:defect-images:1"},
                          run_id="r-1")
    job = azureml.last_job
    sent = next(json.loads(r.body) for r in azureml.requests
                if r.method == "PUT" and r.path.endswith(f"/jobs/{job.name}"))
    props = sent["properties"]
    assert props["jobType"] == "Pipeline" and props["experimentName"] == "lb-flat"
    assert props["tags"]["mlpipe.run_id"] == "r-1"
    assert props["tags"]["mlpipe.pipeline_digest"] == spec.digest
    assert sorted(props["jobs"]) == ["evaluate", "fit", "prepare"]
    assert props["jobs"]["fit"]["componentId"].startswith(
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-ml/providers/"
        "Microsoft.MachineLearningServices/workspaces/ws-defects/components/")
    assert (run.job_name, run.status) == (job.name, "NotStarted")
    assert run.studio_url.startswith(f"https://ml.azure.test/runs/{job.name}?wsid=")
    assert run.to_dict()["workspace"].endswith("/workspaces/ws-defects")


def test_submit_stops_on_check_errors_before_touching_azure(azureml, service):
    spec, found = load_spec(str(ROOT / "tests" / "fixtures" / "azure" / "yaml" / "cycle.yml"))
    before = len(azureml.requests)
    with pytest.raises(ChecksFailed, match=r"the pipeline has 1 error\(s\); nothing was "
                                           r"submitted") as info:
        submit_to_azure(spec, WS, service, extra_diagnostics=found)
    assert "MP101" in {d.code for d in info.value.diagnostics}
    assert len(azureml.requests) == before and azureml.pipelines == []


def test_submit_without_credentials_creates_nothing(azureml, project_spec):
    with pytest.raises(AzureError, match=r"^no credentials"):
        submit_to_azure(project_spec("flat"), WS, MLClientService(WS, credential=NoCredential()),
                        inputs={"raw": "azureml:x:1"})
    assert azureml.pipelines == []


@pytest.mark.parametrize("drop, message, hint", [
    # a missing compute answers 404 with an empty body (recordings.COMPUTE_NOT_FOUND), which
    # azure-ai-ml words "Not found compute with name ..."
    ("compute", r"^no compute: workspace 'ws-defects' .* has no compute 'gpu-cluster' "
                r"\(jobs\.fit_gpu\.compute: Operation returned an invalid status 'Not found "
                r"compute with name gpu-cluster'\)",
     r"az ml compute create --type amlcompute --name gpu-cluster"),
    ("environment", r"^no environment: .* \(400 UserError: Environment defect-cpu:4 was not "
                    r"found", r"register the environment version"),
])
def test_a_compute_or_environment_the_workspace_lacks_is_one_line(azureml, service,
                                                                   project_spec, drop, message,
                                                                   hint):
    if drop == "compute":
        del azureml.computes["gpu-cluster"]
    else:
        del azureml.environments[("defect-cpu", "4")]
    with pytest.raises(AzureError, match=message) as info:
        submit_to_azure(project_spec("on_gpu"), WS, service, inputs={"raw": "azureml:x:1"})
    assert hint in info.value.hint
    assert azureml.pipelines == []


def test_throttling_is_retried_with_the_wait_the_service_asks_for(azureml, service,
                                                                  project_spec):
    azureml.fail(429, r"PUT .*/jobs/", times=2, retry_after=0)
    run = submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})
    puts = [r.status for r in azureml.requests if r.method == "PUT" and "/jobs/" in r.path]
    assert puts == [429, 429, 201] and run.job_name == azureml.last_job.name


def test_throttling_that_does_not_end_is_one_line_after_bounded_retries(azureml, service,
                                                                       project_spec):
    azureml.fail(429, r"PUT .*/jobs/", times=None, retry_after=0)
    with pytest.raises(AzureError, match=r"^throttled: Azure ML kept answering 429 Too Many "
                                         r"Requests while mlpipe tried to submit the pipeline "
                                         r"job \(5 tries, waits up to 30 s between them\)"):
        submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})
    assert [r.status for r in azureml.requests if "/jobs/" in r.path] == [429] * 5


def test_a_service_error_is_one_line_after_bounded_retries(azureml, service, project_spec):
    azureml.fail(500, r"PUT .*/jobs/", times=None)
    with pytest.raises(AzureError, match=r"^Azure ML service error while trying to submit the "
                                         r"pipeline job: 500 InternalServerError: The service "
                                         r"encountered an internal error\. \(5 tries\)"):
        submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})


# --- sync -------------------------------------------------------------------------------------

def test_parse_pipeline_job_payload(azureml, service, project_spec):
    run = submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"},
                          run_id="r-5")
    azureml.last_job.complete()
    job = parse_job(service.get(run.job_name))
    assert (job.name, job.job_type, job.status, job.finished) == (
        run.job_name, "Pipeline", "Completed", True)
    assert job.tags["mlpipe.run_id"] == "r-5" and not job.reused
    # a pipeline job's outputs read "uri": null (recorded: test_pipeline_job_child_run_download,
    # every JobBase read); its run data names them, as a data asset of this run
    assert job.outputs == {"model": None, "evaluation": None}
    assert parse_run_outputs(service.run_data(run.job_name))[0]["model"] == (
        azureml.output_asset_id(azureml.last_job, "model"))
    assert "azureml_" + run.job_name + "_output_model_model" in str(
        azureml.output_asset_id(azureml.last_job, "model"))
    assert job.created_at.startswith(azureml.last_job.created_at.strftime("%Y-%m-%dT%H:%M"))


def test_child_runs_carry_reuse_status_message_and_times(azureml, service, project_spec):
    first = submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})
    original = azureml.last_job.child("prepare").start().complete()
    second = submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})
    job = azureml.last_job
    job.child("prepare").reuse(original)
    job.child("fit").fail("UserError: Execution failed. User process 'python' exited with "
                          "status code 1.")
    runs = {r["displayName"]: parse_run(r) for r in service.children(second.job_name)}
    prepare, fit = runs["prepare"], runs["fit"]
    assert prepare.reused and prepare.reused_from == original.name
    assert prepare.reused_pipeline == first.job_name and prepare.status == "Completed"
    # run history's children carry "outputs": null (recorded: test_pipeline_job_child_run_download);
    # a reused job's run data names the outputs of the run it reused
    assert prepare.outputs == {}
    assert parse_run_outputs(service.run_data(prepare.name))[0]["examples"] == (
        f"azureml://locations/{azureml.location}/workspaces/{azureml.workspace_id}/data/"
        f"azureml_{original.name}_output_data_examples/versions/1")
    assert fit.status == "Failed" and fit.message.startswith("UserError: Execution failed.")
    assert fit.started_at and fit.finished_at and fit.compute == "cpu-cluster"


def test_children_are_read_across_pages(azureml, service, project_spec):
    run = submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})
    for node in ("prepare", "fit", "evaluate"):
        azureml.last_job.child(node).start()
    azureml.page_size = 2
    try:
        # every child once, across the pages, in run history's order: by run id (a GUID), not
        # the pipeline's (recorded: test_pipeline_job_child_run_download, the children entry)
        children = service.children(run.job_name)
        assert [r["runId"] for r in children] == sorted(c.name for c in
                                                        azureml.last_job.children)
        assert sorted(r["displayName"] for r in children) == ["evaluate", "fit", "prepare"]
    finally:
        azureml.page_size = None
    pages = [r.query for r in azureml.requests if r.path.endswith("/children")]
    assert pages == ["", "$continuationtoken=2"]


def test_metrics_come_from_the_workspace_mlflow_server(azureml, service, project_spec):
    run = submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})
    fit = azureml.last_job.child("fit").start()
    fit.log_metric("loss", 0.9, step=0).log_metric("loss", 0.4, step=5)
    fit.set_tag("mlpipe.scope.loss", "partial")
    synced = sync_run(run.job_name, service)
    step, = synced.steps
    assert step.metrics == {"loss": 0.4}
    assert step.metric_info == {"loss": {"scope": "partial", "population": None}}
    assert any(r.path.endswith("/mlflow/v2.0" + azureml.workspace_id_arm
                               + "/api/2.0/mlflow/runs/get") and r.query == f"run_id={fit.name}"
               for r in azureml.requests)


def test_a_job_that_does_not_exist_is_one_line(azureml, service):
    with pytest.raises(AzureError, match=r"^no job: Azure ML has no job 'nope' in workspace "
                                         r"'ws-defects'"):
        sync_run("nope", service)


def test_a_payload_that_is_not_a_job_is_one_clear_error():
    with pytest.raises(AzureError, match=r"Azure ML returned a job without 'properties'"):
        parse_job({"name": "x"})
    with pytest.raises(AzureError, match=r"Azure ML returned a child job without 'runId'\n"
                                         r"  help: the service answer is not a run history Run"):
        parse_run({"name": "x"})
    assert parse_metrics({}) == {}


def test_an_unexpected_exception_is_still_one_line():
    failure = azure_failure(RuntimeError("boom\nsecond line"), WS, "submit the pipeline job")
    assert failure.message == ("Azure ML call failed while trying to submit the pipeline job: "
                               "RuntimeError: boom")


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
    # the pre-flight asks the workspace first: the store is not even opened
    assert not (tmp_path / "store.sqlite").exists()
