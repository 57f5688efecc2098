"""The loopback Azure ML service's job and run routes held against what the real service
answered (``recorded.py``: each fact names its recording): status codes, headers, field names
and types, where a job's outputs live, 404 bodies, long-running-operation headers, paging.

Each route is called over the wire (HTTPS to the loopback, with the credential azure-ai-ml
uses), so what is checked is the bytes a client reads; jobs are created by the real
``MLClient`` (``submit_to_azure``). The last tests show that the check bites: the loopback
answering one field as it used to (``services`` with a Studio entry, an output's ``uri``
filled in) is reported by name.
"""
from __future__ import annotations

import json

import pytest
import requests
from loopback.azureml import payloads

from backends.azure import recorded
from backends.azure.recorded import differences
from mlpipe.backends.azure.submit import submit_to_azure

pytestmark = pytest.mark.slow


@pytest.fixture
def wire(azureml):
    """``wire(method, path, body=None)`` -> the loopback's response to an authorized request
    (``path`` from ``/subscriptions/...``, or a route of the workspace: ``history/...``)."""
    token = azureml.credential().get_token("https://management.azure.com/.default").token
    session = requests.Session()
    session.trust_env = False  # straight to 127.0.0.1, the certificate from the environment
    session.verify = azureml.cert_path

    def call(method, path, body=None, *, plane=""):
        url = f"{azureml.url}{plane}{path}"
        return session.request(method, url, json=body,
                               headers={"Authorization": f"Bearer {token}"})

    return call


@pytest.fixture
def run(azureml, service, project_spec):
    """A pipeline job created by the real MLClient, and its workspace path."""
    submitted = submit_to_azure(project_spec("flat"), recorded_ws(azureml), service,
                                inputs={"raw": "azureml:x:1"})
    return azureml.last_job, submitted


def recorded_ws(azureml):
    from mlpipe.backends.azure.workspace import Workspace

    return Workspace(azureml.subscription_id, azureml.resource_group, azureml.workspace_name)


def history(azureml, rest):
    return f"/history/v1.0{azureml.workspace_id_arm}/{rest}"


def mlflow(azureml, rest):
    return f"/mlflow/v2.0{azureml.workspace_id_arm}/api/2.0/mlflow/{rest}"


def jobs(azureml, rest=""):
    return f"{azureml.workspace_id_arm}/jobs{rest}?api-version=2024-01-01-preview"


# --- management: jobs --------------------------------------------------------------------------

def test_put_creates_a_pipeline_job_as_the_service_answers(azureml, wire, run):
    job, _ = run
    sent = json.loads(next(r.body for r in azureml.requests
                           if r.method == "PUT" and r.path.endswith(f"/jobs/{job.name}")))
    again = wire("PUT", jobs(azureml, "/second-job"), sent)
    # recorded.CHILD_RUN_DOWNLOAD, the PUT entry: 201, Location, NotStarted, outputs uri null
    assert again.status_code == recorded.CREATED["status"]
    assert all(h in again.headers for h in recorded.CREATED["headers"])
    body = again.json()
    assert differences(body, recorded.PIPELINE_JOB, "PUT") == []
    assert body["properties"]["status"] == recorded.RECORDED_STATUSES[0]
    for port, out in body["properties"]["outputs"].items():
        assert differences(out, recorded.PIPELINE_OUTPUT, f"outputs.{port}") == []


def test_get_follows_the_recorded_statuses_with_outputs_never_given_a_uri(azureml, wire, run):
    job, _ = run
    seen = []
    for move in (lambda: None, job.start, lambda: job.fail("a child job failed")):
        move()
        got = wire("GET", jobs(azureml, f"/{job.name}"))
        assert got.status_code == 200
        body = got.json()
        assert differences(body, recorded.PIPELINE_JOB, "GET") == []
        for port, out in body["properties"]["outputs"].items():
            assert differences(out, recorded.PIPELINE_OUTPUT, f"outputs.{port}") == []
        seen.append(body["properties"]["status"])
    assert tuple(seen) == recorded.RECORDED_STATUSES   # recorded.CHILD_RUN_DOWNLOAD's GETs
    job.status = "Running"
    job.complete()   # a completed pipeline job's outputs are still uri null; rundata names them
    body = wire("GET", jobs(azureml, f"/{job.name}")).json()
    assert {o["uri"] for o in body["properties"]["outputs"].values()} == {None}


def test_a_missing_job_is_a_404_with_the_arm_error_envelope(azureml, wire):
    got = wire("GET", jobs(azureml, "/no-such-job"))
    assert got.status_code == recorded.ARM_NOT_FOUND["status"]
    assert differences(got.json(), recorded.ARM_NOT_FOUND, "404") == []


def test_cancel_is_a_long_running_operation_polled_through_location(azureml, wire, run, service):
    job, _ = run
    got = wire("POST", jobs(azureml, f"/{job.name}/cancel"))
    assert got.status_code == recorded.CANCELED["status"]
    assert all(h in got.headers for h in recorded.CANCELED["headers"])
    polled = wire("GET", got.headers["Location"].removeprefix(azureml.url))
    assert polled.status_code == 200 and polled.json()["name"] == job.name
    # and the real client's poller follows it to the end
    service.client.jobs.begin_cancel(job.name).result()
    assert job.status == "CancelRequested"


def test_jobs_list_is_an_arm_page(azureml, wire, run):
    got = wire("GET", jobs(azureml))
    assert got.status_code == 200
    body = got.json()
    assert set(body) <= {"value", "nextLink"} and isinstance(body["value"], list)
    for item in body["value"]:
        assert differences(item, recorded.PIPELINE_JOB, "list") == []


# --- run history ------------------------------------------------------------------------------

def test_children_are_runs_without_outputs_or_services_in_no_fixed_order(azureml, wire, run):
    job, _ = run
    job.child("prepare").start().complete()
    job.child("fit").fail("UserError: boom")
    job.child("evaluate").start().complete()
    got = wire("GET", history(azureml, f"runs/{job.name}/children"))
    assert got.status_code == 200
    page = got.json()
    assert differences(page, recorded.CHILDREN_PAGE, "children") == []
    by_node = {r["displayName"]: r for r in page["value"]}
    for node, child in by_node.items():
        shape = recorded.FAILED_CHILD_RUN if child["status"] == "Failed" else recorded.CHILD_RUN
        assert differences(child, shape, f"children[{node}]") == []
        assert child["parentRunId"] == child["rootRunId"] == job.name
    # listed by run id (GUIDs), not in the pipeline's or the creation order
    assert [r["runId"] for r in page["value"]] == sorted(r["runId"] for r in page["value"])
    one = wire("GET", history(azureml, f"runs/{by_node['prepare']['runId']}"))
    assert one.status_code == 200
    assert differences(one.json(), recorded.CHILD_RUN, "runs/{id}") == []


def test_children_page_with_a_continuation_token(azureml, wire, run):
    job, _ = run
    for node in ("prepare", "fit", "evaluate"):
        job.child(node).start()
    azureml.page_size = 2
    try:
        first = wire("GET", history(azureml, f"runs/{job.name}/children")).json()
        assert isinstance(first["continuationToken"], str) and len(first["value"]) == 2
        rest = wire("GET", history(azureml, f"runs/{job.name}/children?$continuationtoken="
                                            f"{first['continuationToken']}")).json()
    finally:
        azureml.page_size = None
    assert differences(rest, recorded.CHILDREN_PAGE, "last page") == []
    assert len({r["runId"] for r in first["value"] + rest["value"]}) == 3


def test_rundata_is_where_a_runs_outputs_are(azureml, wire, run):
    job, _ = run
    prepare = job.child("prepare").start().complete()
    body = {"runId": prepare.name, "selectRunMetadata": True, "selectRunDefinition": True,
            "selectJobSpecification": True}   # what jobs.download sends (recorded.DOWNLOAD)
    got = wire("POST", history(azureml, "rundata"), body)
    assert got.status_code == 200
    data = got.json()
    assert differences(data, recorded.RUN_DATA, "rundata") == []
    outputs = data["runMetadata"]["outputs"]
    assert set(outputs) == set(prepare.declared_outputs())
    for port, ref in outputs.items():
        assert differences(ref, recorded.RUN_DATA_OUTPUT, f"outputs.{port}") == []
        assert f"azureml_{prepare.name}_output_" in ref["assetId"]
    # the failed pipeline run's own run data: outputs null (recorded.DOWNLOAD)
    job.fail("a child job failed")
    failed = wire("POST", history(azureml, "rundata"), {**body, "runId": job.name}).json()
    assert differences(failed, recorded.FAILED_RUN_DATA, "rundata") == []
    missing = wire("POST", history(azureml, "rundata"), {**body, "runId": "no-such-run"})
    assert missing.status_code == 404


def test_a_reused_runs_outputs_name_the_run_it_reused(azureml, wire, run, service,
                                                      project_spec):
    job, _ = run
    original = job.child("prepare").start().complete()
    submit_to_azure(project_spec("flat"), recorded_ws(azureml), service,
                    inputs={"raw": "azureml:x:1"})
    reused = azureml.last_job.child("prepare").reuse(original)
    data = wire("POST", history(azureml, "rundata"), {"runId": reused.name,
                                                       "selectRunMetadata": True}).json()
    assert {ref["assetId"] for ref in data["runMetadata"]["outputs"].values()} == {
        azureml.output_asset_id(original, port) for port in original.outputs}


# --- the workspace's MLflow (no recording: MLflow's REST API) ----------------------------------

def test_mlflow_runs_get_and_its_404(azureml, wire, run):
    job, _ = run
    fit = job.child("fit").start().log_metric("loss", 0.5)
    got = wire("GET", mlflow(azureml, f"runs/get?run_id={fit.name}"))
    assert got.status_code == 200
    assert differences(got.json(), recorded.MLFLOW_RUN, "runs/get") == []
    never = job.child("evaluate")   # created, never started: no MLflow run yet (issue 35)
    skipped = job.child("prepare").end_unstarted("Canceled", "upstream failed")
    for run_id in ("no-such-run", never.name, skipped.name):
        missing = wire("GET", mlflow(azureml, f"runs/get?run_id={run_id}"))
        assert missing.status_code == recorded.MLFLOW_NOT_FOUND["status"]
        assert differences(missing.json(), recorded.MLFLOW_NOT_FOUND, "404") == []


def test_mlflow_metric_history_artifacts_and_log_batch(azureml, wire, run):
    job, _ = run
    fit = job.child("fit").start().log_metric("loss", 0.5, step=1)
    fit.log_artifact("outputs/report.json", b"{}")
    history_ = wire("GET", mlflow(azureml, f"metrics/get-history?run_id={fit.name}"
                                           f"&metric_key=loss")).json()
    assert [differences(x, recorded.MLFLOW_METRIC, "metric") for x in history_["metrics"]] == [[]]
    listed = wire("GET", mlflow(azureml, f"artifacts/list?run_id={fit.name}")).json()
    assert differences(listed, recorded.MLFLOW_ARTIFACTS, "artifacts") == []
    assert [differences(f, recorded.MLFLOW_FILE, "file") for f in listed["files"]] == [[]]
    logged = wire("POST", mlflow(azureml, "runs/log-batch"), {
        "run_id": fit.name, "metrics": [{"key": "acc", "value": 0.9, "timestamp": 1,
                                         "step": 0}], "params": [], "tags": []})
    assert (logged.status_code, logged.json()) == (200, {})   # LogBatch answers an empty object
    assert [x.key for x in fit.mlflow.metrics] == ["loss", "acc"]


# --- the check bites ----------------------------------------------------------------------------

def test_a_child_run_with_the_old_studio_service_is_reported(azureml, wire, run, monkeypatch):
    job, _ = run
    job.child("prepare").start()
    real = payloads.run

    def old(svc, j, **kw):   # as the loopback answered before: a Studio service on each run
        out = real(svc, j, **kw)
        out["services"] = {"Studio": {"type": "Studio", "endpoint": svc.studio_url(j)}}
        return out

    monkeypatch.setattr(payloads, "run", old)
    child = wire("GET", history(azureml, f"runs/{job.name}/children")).json()["value"][0]
    assert differences(child, recorded.CHILD_RUN, "children[0]") == [
        f"children[0].services is {child['services']!r}, the service answers {{}}"]


def test_a_pipeline_output_with_a_uri_is_reported(azureml, wire, run):
    job, _ = run
    body = wire("GET", jobs(azureml, f"/{job.name}")).json()
    out = dict(body["properties"]["outputs"]["model"], uri="azureml://datastores/x/paths/y/")
    assert differences(out, recorded.PIPELINE_OUTPUT, "outputs.model") == [
        "outputs.model.uri is 'azureml://datastores/x/paths/y/', the service answers null"]


def test_a_child_run_with_outputs_is_reported(azureml, wire, run):
    job, _ = run
    prepare = job.child("prepare").start().complete()
    child = wire("GET", history(azureml, f"runs/{prepare.name}")).json()
    child["outputs"] = {"examples": {"assetId": "x", "type": "UriFolder"}}
    assert differences(child, recorded.CHILD_RUN, "run") == [
        "run.outputs is {'examples': {'assetId': 'x', 'type': 'UriFolder'}}, the service "
        "answers null"]
