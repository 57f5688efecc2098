"""Issue 10's acceptance, end to end through the CLI: ``mlpipe submit --target azure --wait``,
``mlpipe sync``, ``mlpipe evidence C --format json`` and ``--verify [--fetch]``, through the real
``MLClientService`` and the real ``azure.ai.ml.MLClient`` against the loopback Azure ML service.

Nothing is handed to the service by hand: each step runs as an Azure ML node runs it
(``loopback.azureml.run_node``: the code snapshot azure-ai-ml uploaded, the exported command
through mlpipe's step runtime, inputs from the datastore, outputs back to it, metrics to the
workspace's MLflow), and ``sync`` downloads the step records and the report with azure-ai-ml's
``jobs.download`` from the storage account's host. The first run's training diverges (a failed
child inside a nested pipeline); the second reuses its ``prepare`` (Azure ML reuses a step of a
failed pipeline run), is throttled once on the way (429, retried) and yields the candidate.
"""
import json
import re
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from loopback.azureml import run_node

from backends.azure.azure_helpers import NoCredential, stage
from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main
from mlpipe.digests import file_digests
from mlpipe.digests.snapshot import snapshot

pytestmark = pytest.mark.slow

WORKSPACE = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]
IMAGES = "azureml://datastores/workspaceblobstore/paths/data/defect-images/1/"


@pytest.fixture
def mlpipe(azureml, azureml_project, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "evidence"))
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)

    def run(*args, epochs=None):
        argv = list(args)
        if argv[0] == "submit":
            argv[1:1] = [f"{azureml_project / 'lbflow.py'}:nested", "--target", "azure",
                         *WORKSPACE, "--input", "raw=azureml:defect-images:1",
                         "--input", f"epochs={epochs}", "--wait", "--poll-interval", "0"]
        return CliRunner().invoke(main, argv, catch_exceptions=False)

    return run


def on_node(step, folder):
    """A staged step of the job's life: Azure ML runs node ``step``."""
    return lambda p: run_node(p.child(step), folder)


def digest_of(files, *, one_file=False):
    """The content digest mlpipe gives these files as a folder (or, ``one_file``, the digest of
    the one file a ``uri_file`` output is)."""
    with tempfile.TemporaryDirectory() as tmp:
        for rel, data in files.items():
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / rel).write_bytes(data)
        if one_file:
            [only] = files
            return snapshot(Path(tmp) / only).digest
        return snapshot(tmp).digest


def verify(mlpipe, candidate, *extra):
    result = mlpipe("evidence", candidate, "--verify", "--format", "json", *extra)
    return result.exit_code, json.loads(result.stdout)


def test_submit_wait_sync_evidence_and_verify_through_the_real_mlclient(mlpipe, azureml,
                                                                        tmp_path):
    for i in range(4):
        azureml.put_datastore_file(IMAGES, f"img{i}.png", f"png-{i}".encode())
    nodes = tmp_path / "nodes"

    # 1. the training diverges: a failed child in the nested pipeline, the job fails
    stage(azureml, on_node("prepare", nodes), on_node("lb_train.fit", nodes),
          lambda p: (p.child("lb_train").fail("a child job failed"),
                     p.fail("a child job failed")))
    first = mlpipe("submit", epochs=60)
    assert first.exit_code == 1, first.output
    first_job = azureml.last_job
    first_run = re.search(r"^submitted run (r-[0-9a-f]{10})", first.output, re.M).group(1)
    fit = first_job.child("lb_train.fit")
    assert (f"  step lb_train.fit Failed: UserError: Execution failed. User process 'python' "
            f"exited with status code 1. Please check log file 'user_logs/std_log.txt' for "
            f"error details. Error: ValueError: the loss diverged (NaN) at epoch 51 of 60: "
            f"lower the epochs\n    logs: "
            f"https://ml.azure.test/runs/{fit.name}?wsid=") in first.output, first.output
    shown = json.loads(mlpipe("show", first_run, "--format", "json").stdout)
    steps = {st["step"]: st for st in shown["steps"]}
    assert (steps["prepare"]["status"], steps["lb_train.fit"]["status"]) == ("executed",
                                                                             "failed")
    # the message the step record gave, as a local run words it, not Azure ML's status line
    assert steps["lb_train.fit"]["message"] == ("step 'lb_train.fit' failed: ValueError: the loss "
                                                "diverged (NaN) at epoch 51 of 60: lower the "
                                                "epochs")
    # diagnosed at its layer as a local run is: the step's own code raised
    diagnosis = steps["lb_train.fit"]["diagnosis"]
    assert (diagnosis["code"], diagnosis["layer"], diagnosis["logs"]) == (
        "MP926", "step-code", {"step": None, "ranks": {}})
    assert steps["prepare"]["diagnosis"] is None

    # 2. fixed: prepare reused from the failed run, throttled once, a candidate
    original = first_job.child("prepare")
    azureml.fail(429, r"^POST .*/rundata$", times=1, retry_after=0)
    stage(azureml, lambda p: p.child("prepare").reuse(original), on_node("lb_train.fit", nodes),
          lambda p: p.child("lb_train").complete(), on_node("evaluate", nodes),
          lambda p: p.complete())
    mark = len(azureml.requests)
    second = mlpipe("submit", epochs=3)
    assert second.exit_code == 0, second.output
    job = azureml.last_job
    run_id = re.search(r"^submitted run (r-[0-9a-f]{10})", second.output, re.M).group(1)
    candidate = re.search(r"^candidate (c-[0-9a-f]{10})$", second.output, re.M).group(1)
    rundata = [r.status for r in azureml.requests[mark:] if r.path.endswith("/rundata")]
    assert rundata[:2] == [429, 200] and 429 not in rundata[2:]   # retried, then downloaded
    assert set(azureml.tunnels) == {azureml.storage_host}

    # sync again: the same rows, the same candidate
    synced = mlpipe("sync", run_id, "--format", "json")
    assert synced.exit_code == 0, synced.output
    recorded = json.loads(synced.stdout)["recorded"]
    assert (recorded["status"], recorded["candidate"], recorded["notes"]) == (
        "succeeded", candidate, [])
    assert recorded["steps"] == {"prepare": "reused", "lb_train.fit": "executed",
                                 "evaluate": "executed"}

    # 3. the evidence, from what sync recorded
    shown = mlpipe("evidence", candidate, "--format", "json")
    assert shown.exit_code == 0, shown.output
    bundle = json.loads(shown.stdout)
    p = bundle["predicate"]
    # (MP717 only, where the tests run in a git checkout: the project's files are outside it)
    assert [f for f in p["findings"] if f["code"] != "MP717"] == []
    assert p["run"]["target"] == "azure"
    assert {st["step"]: st["step_record"] for st in p["steps"]} == {
        "prepare": True, "lb_train.fit": True, "evaluate": True}
    steps = {st["step"]: st for st in p["steps"]}
    arts = {a["digest"]: a for a in p["artifacts"]}
    # reuse, with its origin: the executed step of the failed run
    prepare = steps["prepare"]
    assert prepare["status"] == "reused"
    assert (prepare["reused_from"]["run"], prepare["reused_from"]["executed_run"]) == (
        first_run, first_run)
    assert [(x["name"], x["value"], x["scope"], x["recorded_by"]) for x in prepare["metrics"]] \
        == [("images", 4.0, "global", prepare["reused_from"]["executed_step_run"])]
    # metrics with their scope and population, from the step record and MLflow
    fit_metrics = [(x["name"], x["value"], x["scope"], x["rank"], x["population"])
                   for x in steps["lb_train.fit"]["metrics"]]
    assert fit_metrics == [("loss", 0.5, "global", None, "train, 4 examples"),
                           ("loss", 0.3333, "global", None, "train, 4 examples"),
                           ("loss", 0.25, "global", None, "train, 4 examples"),
                           ("shard_accuracy", 0.85, "partial", None, "rank 0's shard of train")]
    fit_job = job.child("lb_train.fit")
    # the step's MLflow run in the workspace, as the runtime logged it (mlpipe's tags)
    assert [(x.key, x.value, x.step) for x in fit_job.mlflow.metrics] == [
        ("loss", 0.5, 0), ("loss", 0.3333, 1), ("loss", 0.25, 2), ("shard_accuracy", 0.85, 0)]
    assert fit_job.mlflow.tags["mlpipe.scope.shard_accuracy"] == "partial"
    assert [(x["name"], x["value"], x["scope"]) for x in p["evaluation"]["metrics"]] == [
        ("accuracy", 0.8, "global")]
    # output digests: the content of what the steps wrote, as the step runtime hashed it
    examples = azureml.datastore_files(original.outputs["examples"].uri)
    model_files = azureml.datastore_files(fit_job.outputs["model"].uri)
    report_files = azureml.datastore_files(job.child("evaluate").outputs["report"].uri)
    assert prepare["outputs"] == [{"port": "examples", "digest": digest_of(examples)}]
    model = p["candidate"]["model"]
    assert steps["lb_train.fit"]["outputs"] == [{"port": "model", "digest": model}]
    assert model == digest_of(model_files)
    # where it is: the asset id run history's rundata names (its runs carry "outputs": null)
    model_at = azureml.output_asset_id(fit_job, "model")
    assert (arts[model]["remote"], arts[model]["digest_by"], arts[model]["location"]) == (
        True, "step-runtime", model_at)
    assert bundle["subject"] == [{"name": f"model/{name}", "digest": file_digests_of(data)}
                                 for name, data in sorted(model_files.items())]
    # the report came down with sync, was checked against its recorded digest, and is read
    report = p["evaluation"]["report"]
    assert report["digest"] == p["candidate"]["evaluation"] == digest_of(report_files,
                                                                         one_file=True)
    assert report["readable"] and report["population"] == {"split": "test", "examples": 4}
    assert (arts[report["digest"]]["remote"], arts[report["digest"]]["digest_by"]) == (
        False, "mlpipe")
    raw = p["snapshots"][0]
    assert (raw["reference"], raw["size"], raw["file_count"]) == (
        "azureml:defect-images:1", None, None)

    # 4. --verify: what is here is re-hashed; what lives only on Azure ML is said to be not
    code, v = verify(mlpipe, candidate)
    assert code == 0 and v["ok"] and not v["complete"] and v["fetched"] == 0
    assert sorted((x["code"], x["artifact"]) for x in v["not_rehashed"]) == [
        ("MP661", "artifact lb_train.fit.model"), ("MP661", "artifact prepare.examples"),
        ("MP661", "data snapshot 'raw'")]
    text = mlpipe("evidence", candidate, "--verify").output
    assert (f"info[MP661] artifact-not-rehashed: artifact lb_train.fit.model was not "
            f"re-hashed: it lives only on Azure ML ({model_at}); its digest "
            f"was recorded by the step that wrote it, and no copy is here") in text
    assert "help: run `mlpipe evidence CANDIDATE --verify --fetch`" in text
    assert text.rstrip().endswith("NOT re-hashed (listed above): the verification is incomplete")

    # --fetch: downloaded from the storage account and re-hashed against the recorded digests
    code, v = verify(mlpipe, candidate, "--fetch")
    assert code == 0 and v["ok"] and v["fetched"] == 2, v
    assert [x["artifact"] for x in v["not_rehashed"]] == ["data snapshot 'raw'"]
    assert v["files_hashed"] == len(examples) + len(model_files) + 1

    # without credentials: one line, exit 2, and no verdict
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_azure, "_credential", NoCredential)
        refused = mlpipe("evidence", candidate, "--verify", "--fetch")
    assert refused.exit_code == 2
    assert refused.output.startswith("error: no credentials: DefaultAzureCredential found none "
                                     "that works (")
    assert "verified bundle" not in refused.output

    # the model changed in the datastore behind the bundle's back: found, and named
    azureml.put_datastore_file(fit_job.outputs["model"].uri, "weights.json", b'{"epochs": 99}')
    code, v = verify(mlpipe, candidate, "--fetch")
    assert code == 1 and not v["ok"]
    found = [(x["code"], x["message"].split(" changed")[0]) for x in v["mismatches"]]
    assert found == [
        ("MP711", f"artifact lb_train.fit.model downloaded from {model_at}"),
        ("MP711", "model file model/weights.json")]

    # and deleted from it: missing, not crashed on
    for key in [k for k in azureml.blobs
                if k[1].startswith(fit_job.outputs["model"].uri.split("/paths/", 1)[1])]:
        del azureml.blobs[key]
    code, v = verify(mlpipe, candidate, "--fetch")
    assert code == 1
    assert [(x["code"], x["message"]) for x in v["mismatches"]] == [
        ("MP712", f"artifact lb_train.fit.model is missing: Azure ML has nothing at "
                  f"{model_at}")]


def file_digests_of(data):
    with tempfile.NamedTemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        return file_digests(fh.name)
