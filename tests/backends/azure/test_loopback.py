"""``mlpipe submit --target azure`` and ``mlpipe sync`` end to end: the real ``MLClientService``
and the real ``azure.ai.ml.MLClient`` against the loopback Azure ML service
(``loopback/azureml``), with nothing of the service replaced but azure-identity's credential.
"""
import re

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

WORKSPACE = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]


@pytest.fixture
def cli(azureml, azureml_project, tmp_path, monkeypatch):
    """Runs ``mlpipe`` in-process against the loopback service with a fresh SQLite store."""
    store = tmp_path / "store.sqlite"
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{store}")
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)

    def run(*args):
        return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)

    run.project = azureml_project
    run.store_url = f"sqlite:///{store}"
    return run


def submit(cli, target="lbflow.py:flat", *extra):
    result = cli("submit", cli.project / target, "--target", "azure", *WORKSPACE,
                 "--input", "raw=azureml:defect-images:1", *extra)
    assert result.exit_code == 0, result.output
    return re.search(r"^submitted run (r-[0-9a-f]{10}) ", result.output, re.M).group(1), result


def test_submit_creates_the_job_through_the_real_mlclient_and_sync_records_it(cli, azureml):
    run_id, result = submit(cli)
    job = azureml.last_job
    assert f"as Azure ML job {job.name} (NotStarted)" in result.output
    assert f"studio: https://ml.azure.test/runs/{job.name}?wsid=" in result.output
    assert job.tags["mlpipe.run_id"] == run_id and job.kind == "Pipeline"
    assert sorted(job.nodes()) == ["evaluate", "fit", "prepare"]
    # azure-ai-ml registered the three components and uploaded the project's code once
    assert sorted(a.name for a in azureml.assets.values() if a.kind == "codes").__len__() == 1
    # only what the steps import (the .amlignore mlpipe wrote): lbsteps.py, not the pipeline
    uploaded = {b.rsplit("/", 1)[-1] for (_, b) in azureml.blobs}
    assert "lbsteps.py" in uploaded and "lbflow.py" not in uploaded

    job.child("prepare").start()
    job.child("prepare").log_metric("images", 300).complete()
    fit = job.child("fit").start()
    fit.log_metric("loss", 0.9, step=0).log_metric("loss", 0.42, step=9)
    fit.log_metric("shard_accuracy", 0.85, step=9).set_tag("mlpipe.scope.shard_accuracy",
                                                             "partial")
    fit.complete()
    job.child("evaluate").start().complete()
    job.complete()

    result = cli("sync", run_id)
    assert result.exit_code == 0, result.output
    assert f"run {run_id} succeeded  (Azure ML job {job.name}: Completed)" in result.output
    assert re.search(r"^  fit +Completed +executed +\[loss=0\.42, shard_accuracy=0\.85\(partial\)\]$",
                     result.output, re.M)
    candidate = re.search(r"^candidate (c-[0-9a-f]{10})$", result.output, re.M).group(1)
    store = Store.open(cli.store_url)
    try:
        with store.session() as s:
            steps = {sr.step: sr for sr in s.get(m.Run, run_id).steps}
            assert {k: v.status for k, v in steps.items()} == {
                "prepare": "executed", "fit": "executed", "evaluate": "executed"}
            assert steps["fit"].compute["ran_on"] == "cpu-cluster"
            model = next(a.artifact for a in steps["fit"].artifacts
                         if a.direction == "output" and a.port == "model")
            # where the model is: the asset id run history's rundata gives the output (its
            # runs and children answers carry "outputs": null)
            assert model.location == (f"azureml://locations/{azureml.location}/workspaces/"
                                      f"{azureml.workspace_id}/models/azureml_{fit.name}_output_"
                                      f"model_model/versions/1")
            cand = s.scalars(select(m.CandidateRow)).one()
            assert cand.id == candidate and cand.model_artifact_id == model.id
    finally:
        store.close()


def test_sync_lists_a_nested_pipeline_the_way_the_service_does(cli, azureml):
    run_id, _ = submit(cli, "lbflow.py:nested")
    job = azureml.last_job
    inner = next(n for n, d in job.nodes().items() if d.get("type") == "pipeline")
    job.child("prepare").start().complete()
    job.child(f"{inner}.fit").start().log_metric("loss", 0.5).complete()
    job.child(inner).complete()
    job.child("evaluate").start().complete()
    job.complete()
    assert job.child(inner).properties["runSource"] == "SubGraphCloud"
    assert [c.display_name for c in job.children] == ["prepare", inner, "evaluate"]

    result = cli("sync", run_id, "--format", "json")
    assert result.exit_code == 0, result.output
    import json

    synced = json.loads(result.output)
    assert sorted(s["node"] for s in synced["steps"]) == ["evaluate", f"{inner}.fit", "prepare"]
    assert synced["recorded"]["status"] == "succeeded"
    assert synced["recorded"]["candidate"] is not None


def test_jobs_download_reaches_the_storage_host_through_the_proxy(azureml, service,
                                                                  project_spec, tmp_path):
    """MLClientService.fetch_output is azure-ai-ml's jobs.download over the wire: run history,
    the data plane (a folder), the model registry (a model output), the datastore's account
    host; a reused job's output comes from the job it reused; a missing output is None."""
    from mlpipe.backends.azure.submit import submit_to_azure

    submit_to_azure(project_spec("flat"), service.workspace, service,
                    inputs={"raw": "azureml:defect-images:1"})
    job = azureml.last_job
    prepare = job.child("prepare").start()
    prepare.set_output("examples", files={"a.txt": b"A", "sub/b.txt": b"B" * 70_000})
    prepare.complete()
    fit = job.child("fit").start().set_output("model", files={"MLmodel": b"flavors: {}\n"})
    fit.complete()
    reused = job.child("evaluate").reuse(prepare)   # a job reusing prepare (as the service marks)

    got = service.fetch_output(prepare.name, "examples", tmp_path / "a")
    assert {p.relative_to(got).as_posix(): p.read_bytes() for p in got.rglob("*")
            if p.is_file()} == {"a.txt": b"A", "sub/b.txt": b"B" * 70_000}
    model = service.fetch_output(fit.name, "model", tmp_path / "b")
    assert (model / "MLmodel").read_bytes() == b"flavors: {}\n"
    assert (service.fetch_output(reused.name, "examples", tmp_path / "c") / "a.txt").read_bytes() \
        == b"A"
    assert service.fetch_output(prepare.name, "no_such_output", tmp_path / "d") is None
    assert set(azureml.tunnels) == {azureml.storage_host}
    kinds = azureml.request_kinds()
    assert kinds["POST rundata"] >= 3 and kinds["POST dataversion"] >= 2
    assert kinds["POST models"] == 1   # the model output, resolved by the model registry


def test_the_proxy_tunnels_only_the_storage_host(azureml):
    import http.client
    from urllib.parse import urlsplit

    proxy = urlsplit(azureml.proxy_url)
    answers = []
    for method, target in (("CONNECT", "login.microsoftonline.com:443"),
                           ("CONNECT", f"{azureml.storage_host}:80"),
                           ("GET", "http://example.com/")):
        conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
        conn.request(method, target)
        answers.append(conn.getresponse().status)
        conn.close()
    assert answers == [403, 403, 405]
    assert azureml.tunnels == []
