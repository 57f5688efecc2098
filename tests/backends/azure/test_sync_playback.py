"""The playback tier for jobs and runs: mlpipe's Azure commands (``submit --target azure
--wait``, ``sync``, ``evidence``) through the real ``MLClient`` against the loopback service
answering in the recorded shapes (``recorded.py`` names each recording; the conformance test
holds the loopback to them). What the recordings taught, and each test leans on:

- a pipeline job moves NotStarted -> Running -> Failed (CHILD_RUN_DOWNLOAD's PUT and GETs), or
  on to Completed, and its outputs read ``uri: null`` in every state;
- run history's runs and children carry ``outputs: null`` and ``services: {}``; a step's
  outputs are in ``POST .../rundata`` (``runMetadata.outputs``, DOWNLOAD's rundata entry), a
  reused step's naming the run it reused;
- a child that never started has no MLflow run: the workspace's ``runs/get`` answers 404 (no
  recording of the MLflow routes; issue 35's report of the real service).

A step record and a model fetched through these shapes, and the same evidence as a local run,
are ``test_acceptance.py`` and ``test_parity.py``, which run on the same conforming loopback.
"""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from loopback.azureml import payloads, run_node

from backends.azure import recorded
from backends.azure.azure_helpers import stage
from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

pytestmark = pytest.mark.slow

WORKSPACE = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]
IMAGES = "azureml://datastores/workspaceblobstore/paths/data/defect-images/1/"


@pytest.fixture
def mlpipe(azureml, azureml_project, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "evidence"))
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)
    for i in range(4):
        azureml.put_datastore_file(IMAGES, f"img{i}.png", f"png-{i}".encode())

    def run(*args):
        argv = list(args)
        if argv[0] == "submit":
            argv[1:1] = [f"{azureml_project / 'lbflow.py'}:flat", "--target", "azure",
                         *WORKSPACE, "--input", "raw=azureml:defect-images:1", "--wait",
                         "--poll-interval", "0"]
        return CliRunner().invoke(main, argv, catch_exceptions=False)

    run.store_url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    return run


def node(step, folder):
    return lambda p: run_node(p.child(step), folder)


def unknown_of(store_url, run_id):
    store = Store.open(store_url)
    try:
        with store.session() as s:
            return {sr.step: (sr.topology or {}).get("unknown") or {}
                    for sr in s.get(m.Run, run_id).steps}
    finally:
        store.close()


# Each case: how the pipeline's life is staged (given the folder its nodes run in), the
# statuses the client must see, the exit code of ``submit --wait``, and what sync records as
# unknown per step (fact -> the start of why); the clean case records nothing unknown.
CASES = {
    "clean: every step ran mlpipe's runtime": (
        lambda f: [node("prepare", f), node("fit", f), node("evaluate", f),
                   lambda p: p.complete()],
        ("NotStarted", "Running", "Completed"), 0, {}),
    "a completed step left no step record": (
        lambda f: [lambda p: p.child("prepare").start().set_output("examples", files={
                       "manifest.json": json.dumps({"seed": 13, "examples": ["img0.png"]}),
                       "img0.png": b"png-0"}).complete(),   # a script, no step runtime
                   node("fit", f), node("evaluate", f), lambda p: p.complete()],
        ("NotStarted", "Running", "Completed"), 0,
        {"prepare": {"step record": "job {prepare} left no step record"}}),
    "a child that never started: its MLflow run is a 404": (
        lambda f: [node("prepare", f), lambda p: p.child("fit").fail("UserError: boom"),
                   lambda p: p.child("evaluate").end_unstarted("Canceled", "upstream failed"),
                   lambda p: p.fail("Pipeline has failed child jobs.")],
        ("NotStarted", "Running", "Failed"), 1,
        {"evaluate": {"metrics": "no MLflow run: the workspace's MLflow has no run "
                              "'{evaluate}' (404 RESOURCE_DOES_NOT_EXIST: Run '{evaluate}' "
                              "not found.)"}}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_submit_wait_and_sync_on_the_recorded_shapes(case, mlpipe, azureml, tmp_path,
                                                     monkeypatch):
    staged, statuses, code, unknown = CASES[case]
    answered = []   # the status of each JobBase the service answered for the pipeline job
    real = payloads.job_base

    def job_base(svc, job):
        out = real(svc, job)
        answered.append(out["properties"]["status"])
        return out

    monkeypatch.setattr(payloads, "job_base", job_base)
    stage(azureml, lambda p: None, *staged(tmp_path / "nodes"))
    submitted = mlpipe("submit")
    assert submitted.exit_code == code, submitted.output
    job = azureml.last_job
    run_id = re.search(r"^submitted run (r-[0-9a-f]{10})", submitted.output, re.M).group(1)
    # the statuses the client saw, as the recorded job moved (CHILD_RUN_DOWNLOAD's PUT and GETs)
    moved = [st for i, st in enumerate(answered) if i == 0 or answered[i - 1] != st]
    assert tuple(moved) == statuses
    assert statuses[:2] == recorded.RECORDED_STATUSES[:2]

    synced = mlpipe("sync", run_id, "--format", "json")
    assert synced.exit_code == 0, synced.output   # one run's failure never aborts the sync
    document = json.loads(synced.stdout)["recorded"]
    names = {c.node: c.name for c in job.children}
    found = unknown_of(mlpipe.store_url, run_id)
    assert {k: sorted(v) for k, v in found.items() if v} == {
        k: sorted(v) for k, v in unknown.items()}
    for step, facts in unknown.items():
        for fact, why in facts.items():
            assert found[step][fact].startswith(why.format(**names)), found[step][fact]
            assert any(n.startswith(f"step {step!r}: ") and
                       (fact in n or "step record" in n) for n in document["notes"])
    # outputs were read from run data (run history's runs carry "outputs": null)
    rundata = [r for r in azureml.requests if r.path.endswith("/rundata")]
    assert rundata and all(r.status == 200 for r in rundata)
    runs = [r for r in azureml.requests if "/history/" in r.path and r.path.endswith(
        "/children")]
    assert runs and {r.status for r in runs} == {200}
    if document["status"] == "succeeded":
        cand = document["candidate"]
        bundle = json.loads(mlpipe("evidence", cand, "--format", "json").stdout)
        facts = [(f["code"], f["step"]) for f in bundle["predicate"]["findings"]
                 if f["code"] == "MP870"]
        assert facts == [("MP870", step) for step in sorted(unknown)]


def test_a_pipeline_job_reads_uri_null_and_its_outputs_come_from_rundata(mlpipe, azureml,
                                                                         tmp_path):
    nodes = tmp_path / "nodes"
    stage(azureml, node("prepare", nodes), node("fit", nodes), node("evaluate", nodes),
          lambda p: p.complete())
    submitted = mlpipe("submit")
    assert submitted.exit_code == 0, submitted.output
    run_id = re.search(r"^submitted run (r-[0-9a-f]{10})", submitted.output, re.M).group(1)
    job = azureml.last_job
    synced = json.loads(mlpipe("sync", run_id, "--format", "json").stdout)["recorded"]
    assert synced["status"] == "succeeded" and synced["notes"] == []
    store = Store.open(mlpipe.store_url)
    try:
        with store.session() as s:
            outputs = s.get(m.Run, run_id).options["outputs"]
    finally:
        store.close()
    # the pipeline job's JobBase says uri null (recorded.PIPELINE_OUTPUT); the run data names
    # each output as a data asset of the pipeline run
    assert outputs == {port: azureml.output_asset_id(job, port) for port in job.outputs}
    asked = [json.loads(r.body)["runId"] for r in azureml.requests
             if r.path.endswith("/rundata") and r.body]
    assert job.name in asked and {c.name for c in job.children} <= set(asked)
    assert recorded.RUN_DATA_REQUEST["selectRunMetadata"] is True


def test_run_data_that_cannot_be_read_is_a_note_per_run_never_the_end_of_the_sync(mlpipe,
                                                                                  azureml):
    stage(azureml, lambda p: [p.child(n).start().complete() for n in ("prepare", "fit",
                                                                      "evaluate")],
          lambda p: p.complete())
    submitted = mlpipe("submit")
    run_id = re.search(r"^submitted run (r-[0-9a-f]{10})", submitted.output, re.M).group(1)
    job = azureml.last_job
    # every run's run data answers 404 (not retried): the outputs of each run are unknown
    azureml.fail(404, r"^POST .*/rundata$", times=None, code="UserError",
                 message="Run was not found.")
    synced = mlpipe("sync", run_id, "--format", "json")
    assert synced.exit_code == 0, synced.output
    document = json.loads(synced.stdout)["recorded"]
    assert document["status"] == "succeeded"   # the job said so; what is unknown is noted
    said = ("could not be read from Azure ML (no resource: Azure ML could not find what the job "
            "names in workspace 'ws-defects' (resource group 'rg-ml', subscription "
            "'00000000-0000-0000-0000-000000000000') (404 UserError: Run was not found.)); "
            "recorded as unknown")
    assert f"pipeline job {job.name}: its outputs {said}" in document["notes"]
    for step in ("evaluate", "fit", "prepare"):
        assert f"step {step!r}: its outputs {said}" in document["notes"]
    found = unknown_of(mlpipe.store_url, run_id)
    assert {step: sorted(facts) for step, facts in found.items()} == {
        step: ["outputs", "step record"] for step in ("evaluate", "fit", "prepare")}
    assert found["fit"]["step record"] == (f"job {job.child('fit').name} completed but its run "
                                           f"data names no 'mlpipe_record' output")


def test_a_sync_that_cannot_read_a_run_keeps_what_an_earlier_sync_read(mlpipe, azureml,
                                                                       tmp_path):
    nodes = tmp_path / "nodes"
    stage(azureml, node("prepare", nodes), node("fit", nodes), node("evaluate", nodes),
          lambda p: p.complete())
    submitted = mlpipe("submit")   # --wait syncs once: every record read
    assert submitted.exit_code == 0, submitted.output
    run_id = re.search(r"^submitted run (r-[0-9a-f]{10})", submitted.output, re.M).group(1)
    store = Store.open(mlpipe.store_url)

    def recorded_steps():
        with store.session() as s:
            return {sr.step: (sr.record is not None, len(sr.metrics),
                              (sr.topology or {}).get("unknown"))
                    for sr in s.get(m.Run, run_id).steps}

    try:
        before = recorded_steps()
        assert before == {"prepare": (True, 1, None), "fit": (True, 4, None),
                          "evaluate": (True, 1, None)}
        azureml.fail(404, r"^POST .*/rundata$", times=None, code="UserError",
                     message="Run was not found.")
        azureml.fail(404, r"^GET .*/mlflow/.*/runs/get$", times=None,
                     code="RESOURCE_DOES_NOT_EXIST", message="Run not found.")
        again = mlpipe("sync", run_id, "--format", "json")
        assert again.exit_code == 0, again.output
        after = recorded_steps()
    finally:
        store.close()
    # the records and metrics stay; what this sync could not read is said, step by step
    assert {k: v[:2] for k, v in after.items()} == {k: v[:2] for k, v in before.items()}
    assert {k: sorted(v[2]) for k, v in after.items()} == {
        k: ["metrics", "outputs"] for k in before}
