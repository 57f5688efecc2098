"""Azure runs in the evidence store: what ``submit --target azure`` records before and after
Azure ML accepts the job, what a failed submission leaves, and what ``sync`` records from the
pipeline job and its child jobs (real SQLite and PostgreSQL; the real ``MLClientService`` on the
loopback Azure ML service).
"""
import json
import os
import re

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from backends.azure.azure_helpers import ROOT, WS, NoCredential
from mlpipe.backends.azure.ingest import find_azure_run, record_sync
from mlpipe.backends.azure.record import reference_mutable
from mlpipe.backends.azure.service import MLClientService
from mlpipe.backends.azure.submit import ChecksFailed, submit_to_azure
from mlpipe.backends.azure.sync import sync_run
from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main
from mlpipe.errors import AzureError, UsageError
from mlpipe.evidence.records.reader import Reader
from mlpipe.evidence.records.views import diff_runs, show_run
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store
from mlpipe.loader import load_spec
from store_urls import store_url  # noqa: F401  (the SQLite + PostgreSQL fixture)


@pytest.fixture
def store(store_url):  # noqa: F811
    opened = Store.open(store_url)
    yield opened
    opened.close()


@pytest.fixture
def spec(project_spec):
    return project_spec("flat")


def counts(store):
    with store.session() as s:
        return {model.__tablename__: s.scalar(select(func.count()).select_from(model))
                for model in (m.Run, m.StepRun, m.StepArtifact, m.Artifact, m.Metric,
                              m.CandidateRow, m.RunInput, m.Snapshot)}


def submit(store, service, spec, **inputs):
    return submit_to_azure(spec, WS, service, store=store,
                           inputs=inputs or {"raw": "azureml:defect-images:1"})


def sync(store, service, run):
    return record_sync(store, run.run_id, sync_run(run.job_name, service))


def complete(job, prepare_from=None):
    """The job, all steps done (prepare reused from ``prepare_from`` when given)."""
    if prepare_from is not None:
        job.child("prepare").reuse(prepare_from)
    else:
        job.child("prepare").start().log_metric("images", 300).complete()
    fit = job.child("fit").start()
    fit.log_metric("loss", 0.91, step=0).log_metric("loss", 0.42, step=9)
    fit.log_metric("train_accuracy", 0.87, step=9).log_metric("shard_accuracy", 0.85, step=9)
    fit.set_tag("mlpipe.scope.shard_accuracy", "partial")
    fit.set_tag("mlpipe.population.shard_accuracy", "rank 0's shard of the training split")
    fit.set_tag("mlpipe.population.train_accuracy", "training split, all ranks")
    fit.complete()
    job.child("evaluate").start().complete()
    return job.complete()


# --- submit -----------------------------------------------------------------------------------

@pytest.mark.parametrize("reference, mutable", [
    ("azureml:defect-images:1", False),
    ("azureml:defect-images@latest", True),
    ("azureml:defect-images:latest", True),
    ("azureml:defect-images", True),
    ("azureml://subscriptions/s/resourcegroups/g/workspaces/w/data/images/versions/3", False),
    ("azureml://registries/shared/data/images/versions/latest", True),
    ("azureml://datastores/workspaceblobstore/paths/images/", True),
    ("https://account.blob.core.windows.net/images/", True),
])
def test_azure_data_references_are_mutable_unless_a_version_is_pinned(reference, mutable):
    assert reference_mutable(reference) is mutable


def test_submit_records_the_run_before_the_job_is_created_then_its_job_and_url(
        store, azureml, service, spec):
    seen = {}

    def watch(method, path):
        with store.session() as s:
            run, = s.scalars(select(m.Run)).all()
            seen.update(status=run.status, pid=run.pid, job=run.options["job_name"])

    azureml.on(r"^PUT .*/jobs/", watch)
    run = submit(store, service, spec, raw="azureml:defect-images@latest", epochs="12")
    job = azureml.last_job
    assert seen == {"status": "running", "pid": os.getpid(), "job": None}
    assert job.tags["mlpipe.run_id"] == run.run_id and re.fullmatch(r"r-[0-9a-f]{10}",
                                                                    run.run_id)
    with store.session() as s:
        row = s.get(m.Run, run.run_id)
        assert (row.target, row.status, row.pid, row.finished_at) == ("azure", "running",
                                                                      None, None)
        assert row.options["job_name"] == job.name
        assert row.options["studio_url"].startswith(f"https://ml.azure.test/runs/{job.name}")
        assert row.options["azure_status"] == "NotStarted"
        assert row.options["workspace"]["workspace_name"] == "ws-defects"
        assert row.params == {"epochs": 12}
        assert row.pipeline_digest == spec.digest and row.pipeline.spec == spec.to_dict()
        inputs = {i.name: i.snapshot for i in row.inputs}
        assert (inputs["raw"].reference, inputs["raw"].mutable) == (
            "azureml:defect-images@latest", True)
        assert inputs["raw"].digest.startswith("ref:sha256:")
        planned = row.options["steps"]
        assert sorted(planned) == ["evaluate", "fit", "prepare"]
        comp = s.get(m.ComponentVersion, planned["fit"]["component_version_id"])
        assert (comp.name, comp.version, comp.spec_digest) == (
            "fit", "1.0.0", spec.step("fit").target.digest)
        env = s.get(m.EnvironmentRow, planned["fit"]["environment_id"])
        assert (env.name, env.version, env.mutable) == ("defect-cpu", "4", False)
        assert planned["evaluate"]["inputs"] == {"examples": ["step", "prepare", "examples"],
                                                 "model": ["step", "fit", "model"]}
        assert row.options["candidate"]["model"] == ["step", "fit", "model"]
    # the run is Azure ML's now: opening the store again does not mark it interrupted
    assert store.mark_interrupted() == []


def test_nothing_is_recorded_when_checks_credentials_or_network_stop_the_submission(
        store, azureml, spec, monkeypatch):
    before = counts(store)
    with pytest.raises(AzureError, match=r"^no credentials: DefaultAzureCredential"):
        submit(store, MLClientService(WS, credential=NoCredential()), spec)
    bad, found = load_spec(str(ROOT / "tests" / "fixtures" / "azure" / "yaml" / "cycle.yml"))
    with pytest.raises(ChecksFailed, match=r"nothing was submitted"):
        submit_to_azure(bad, WS, MLClientService(WS, credential=azureml.credential()),
                        store=store, extra_diagnostics=found)
    monkeypatch.setenv("ARM_CLOUD_METADATA_URL", "https://127.0.0.1:9/metadata/endpoints")
    with pytest.raises(AzureError, match=r"^no network: azure-ai-ml cannot read the cloud's "
                                         r"endpoints from ARM_CLOUD_METADATA_URL \(https://"
                                         r"127\.0\.0\.1:9/metadata/endpoints\) \(Unknown "
                                         r"cloud environment supplied: \"LoopbackCloud\"\.\)"):
        # azure-ai-ml remembers the cloud of the last MLClient in AZUREML_CURRENT_CLOUD
        submit(store, MLClientService(WS, credential=azureml.credential()), spec)
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with pytest.raises(AzureError, match=r"^no network: Azure ML cannot be reached"):
        submit(store, MLClientService(WS, credential=azureml.credential()), spec)
    assert counts(store) == before and azureml.pipelines == []


@pytest.mark.parametrize("status, message", [
    (500, r"^Azure ML service error while trying to submit the pipeline job: 500 "
          r"InternalServerError: .* \(5 tries\)"),
    (429, r"^throttled: Azure ML kept answering 429 Too Many Requests"),
    (401, r"^not authenticated: Azure ML refused the credentials' token"),
])
def test_a_job_azure_did_not_confirm_is_recorded_failed_never_left_running(
        store, azureml, service, spec, status, message):
    azureml.fail(status, r"^PUT .*/jobs/", times=None, retry_after=0)
    with pytest.raises(AzureError, match=message) as info:
        submit(store, service, spec)
    with store.session() as s:
        run, = s.scalars(select(m.Run)).all()
        assert (run.status, run.pid, run.options["job_name"]) == ("failed", None, None)
        assert run.finished_at is not None
        assert run.message == f"not submitted: {info.value.message}"
        assert s.scalar(select(func.count()).select_from(m.StepRun)) == 0
        with pytest.raises(UsageError, match=rf"run {run.id} was never submitted to Azure ML: "
                                             r"not submitted: "):
            find_azure_run(s, run.id)


# --- sync -------------------------------------------------------------------------------------

def test_sync_records_steps_reuse_outputs_metrics_times_and_the_candidate(store, azureml,
                                                                         service, spec):
    earlier = azureml.job(submit(store, service, spec).job_name)
    original = earlier.child("prepare").start().log_metric("images", 300).complete()
    run = submit(store, service, spec)
    job = azureml.last_job
    job.child("prepare").reuse(original)
    job.child("fit").start()
    early = sync(store, service, run)
    assert early.status == "running" and early.candidate_id is None
    assert early.steps == {"prepare": "reused", "fit": "running"}

    complete(job, prepare_from=original)
    done = sync(store, service, run)
    assert done.status == "succeeded"
    assert done.steps == {"prepare": "reused", "fit": "executed", "evaluate": "executed"}
    fit = job.child("fit")
    with store.session() as s:
        row = s.get(m.Run, run.run_id)
        assert row.finished_at is not None and row.started_at <= row.finished_at
        assert row.options["azure_status"] == "Completed" and row.message is None
        assert row.options["steps"]["fit"]["job_name"] == fit.name
        steps = {sr.step: sr for sr in row.steps}
        prepare, fit_row, evaluate = steps["prepare"], steps["fit"], steps["evaluate"]
        assert prepare.reused_from_id is None  # that run's prepare was never synced
        assert prepare.message == (f"reused Azure ML job {original.name} (pipeline job "
                                   f"{earlier.name}); that run is not in this store")
        assert {x.name: x.value for x in prepare.metrics} == {"images": 300.0}
        assert fit_row.compute == {"declared": spec.step("fit").target.compute.to_dict(),
                                   "ran_on": "cpu-cluster"}
        assert fit_row.started_at is not None and fit_row.finished_at is not None
        assert fit_row.cacheable is False and fit_row.cache_key is None
        metrics = {x.name: (x.value, x.scope, x.population) for x in fit_row.metrics}
        assert metrics == {"loss": (0.42, "global", None),
                           "train_accuracy": (0.87, "global", "training split, all ranks"),
                           "shard_accuracy": (0.85, "partial",
                                              "rank 0's shard of the training split")}
        model = next(a.artifact for a in fit_row.artifacts
                     if a.direction == "output" and a.port == "model")
        # outputs are where rundata says: asset ids (run history's runs carry "outputs": null)
        assert model.location == azureml.output_asset_id(fit, "model")
        assert model.kind == "mlflow_model"
        assert model.digest.startswith("ref:sha256:")
        inputs = {a.port: a.artifact.location for a in evaluate.artifacts if a.direction == "input"}
        assert inputs == {"model": model.location,
                          "examples": azureml.output_asset_id(original, "examples")}
        assert {a.port for a in prepare.artifacts if a.direction == "input"} == {"raw"}
        cand, = s.scalars(select(m.CandidateRow).where(m.CandidateRow.run_id == run.run_id))
        assert cand.id == done.candidate_id and cand.model.id == model.id
        assert cand.evaluation.location == azureml.output_asset_id(job.child("evaluate"),
                                                                   "report")
    with Reader.open(store.engine.url.render_as_string(hide_password=False)) as r:
        shown = show_run(r, r.get_run(run.run_id))
    assert f"azure job {job.name} (Completed)  https://ml.azure.test/runs/{job.name}" in shown
    assert "input raw = azureml:defect-images:1  (reference; content not hashed)" in shown
    assert f"prepare: reused Azure ML job {original.name}" in shown
    assert f"candidate {done.candidate_id}" in shown

    before = counts(store)
    again = sync(store, service, run)
    assert counts(store) == before  # syncing twice duplicates nothing
    assert (again.status, again.candidate_id, again.steps) == (done.status, done.candidate_id,
                                                               done.steps)


def test_a_failed_pipeline_records_the_failed_step_and_no_candidate(store, azureml, service,
                                                                    spec):
    run = submit(store, service, spec)
    job = azureml.last_job
    job.child("prepare").start().complete()
    job.child("fit").start().complete()
    evaluate = job.child("evaluate").fail("UserError: evaluate.py exited with code 1")
    job.fail("A step failed")
    outcome = sync(store, service, run)
    assert outcome.status == "failed" and outcome.candidate_id is None
    with store.session() as s:
        row = s.get(m.Run, run.run_id)
        assert row.message == f"Azure ML job {job.name} ended Failed: step evaluate failed"
        step = next(sr for sr in row.steps if sr.step == "evaluate")
        assert (step.status, step.message) == (
            "failed", f"Azure ML job {evaluate.name} ended Failed")
        assert [a for a in step.artifacts if a.direction == "output"] == []  # nothing reported


def test_a_step_azure_never_started_is_recorded_skipped_once_the_pipeline_ended(
        store, azureml, service, spec):
    run = submit(store, service, spec)
    job = azureml.last_job
    job.child("prepare").start().complete()
    job.cancel()
    outcome = sync(store, service, run)
    assert outcome.status == "interrupted"
    assert outcome.steps == {"prepare": "executed", "fit": "skipped", "evaluate": "skipped"}


def test_reuse_names_the_step_run_of_the_recorded_original(store, azureml, service, spec):
    run_a = submit(store, service, spec)
    first = complete(azureml.last_job)
    assert sync(store, service, run_a).steps["prepare"] == "executed"

    run_b = submit(store, service, spec)
    complete(azureml.last_job, prepare_from=first.child("prepare"))
    assert sync(store, service, run_b).steps["prepare"] == "reused"
    with store.session() as s:
        original = next(sr for sr in s.get(m.Run, run_a.run_id).steps if sr.step == "prepare")
        reused = next(sr for sr in s.get(m.Run, run_b.run_id).steps if sr.step == "prepare")
        assert reused.reused_from_id == original.id
        assert reused.message == (f"reused Azure ML job {first.child('prepare').name} "
                                  f"(pipeline job {first.name})")
        assert reused.metrics == [] and {x.name for x in original.metrics} == {"images"}
    with Reader.open(store.engine.url.render_as_string(hide_password=False)) as r:
        assert f"prepare: executed -> reused from {original.id}" in diff_runs(
            r, r.get_run(run_a.run_id), r.get_run(run_b.run_id))


def test_sync_finds_the_run_by_id_prefix_or_job_name(store, azureml, service, spec):
    run = submit(store, service, spec)
    with store.session() as s:
        assert find_azure_run(s, run.run_id[:6]).id == run.run_id
        assert find_azure_run(s, run.job_name).id == run.run_id
        with pytest.raises(UsageError, match=r"no run 'nope' in the evidence store \(neither an "
                                             r"mlpipe run id nor the Azure ML job of one\)"):
            find_azure_run(s, "nope")


def test_a_sync_that_fails_records_nothing(store, azureml, service, spec):
    run = submit(store, service, spec)
    complete(azureml.last_job)
    before = counts(store)
    # what the whole sync needs (the pipeline's child jobs) fails: nothing is recorded. (One
    # run's MLflow run or run data failing is a note on that step: test_sync_playback.py.)
    azureml.fail(500, r"/children$", times=None)
    with pytest.raises(AzureError, match=r"^Azure ML service error while trying to list the "
                                         r"child jobs of '.*': 500 InternalServerError"):
        sync(store, service, run)
    assert counts(store) == before
    with store.session() as s:
        assert s.get(m.Run, run.run_id).status == "running"


# --- the commands -----------------------------------------------------------------------------

def test_submit_sync_runs_and_show_commands_on_the_loopback_service(tmp_path, monkeypatch,
                                                                   azureml, azureml_project):
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)
    azureml.add_data("x", "1", "uri_folder")  # the pre-flight finds the input's data asset
    flags = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]
    result = CliRunner().invoke(main, ["submit", f"{azureml_project / 'lbflow.py'}:flat",
                                       "--target", "azure", "--input", "raw=azureml:x:1",
                                       *flags])
    assert result.exit_code == 0, result.output
    job = azureml.last_job
    run_id = re.search(rf"^submitted run (r-[0-9a-f]{{10}}) as Azure ML job {job.name} "
                       r"\(NotStarted\)$", result.output, re.M).group(1)
    assert f"studio: https://ml.azure.test/runs/{job.name}" in result.output
    assert f"follow it with: mlpipe sync {run_id}" in result.output

    complete(job)
    result = CliRunner().invoke(main, ["sync", run_id[:5]])  # the recorded workspace
    assert result.exit_code == 0, result.output
    assert f"run {run_id} succeeded  (Azure ML job {job.name}: Completed)" in result.output
    assert re.search(r"^  prepare +Completed +executed +\[images=300\]$", result.output, re.M)
    assert "shard_accuracy=0.85(partial)" in result.output
    assert re.search(r"^candidate c-[0-9a-f]{10}$", result.output, re.M)
    result = CliRunner().invoke(main, ["sync", job.name, "--format", "json"])
    assert result.exit_code == 0 and '"status": "succeeded"' in result.output

    result = CliRunner().invoke(main, ["runs"])
    assert re.search(rf"^{run_id}\s+lb-flat\s+succeeded\s+azure\s", result.output, re.M)
    result = CliRunner().invoke(main, ["show", run_id])
    assert f"azure job {job.name} (Completed)" in result.output
    step = json.loads(CliRunner().invoke(main, ["show", run_id, "--format", "json"]).output)[
        "steps"][0]
    result = CliRunner().invoke(main, ["logs", run_id, step["step"]])
    assert result.exit_code == 2
    assert result.output == (f"error: step {step['step']!r} of run {run_id} ran on Azure ML: its "
                             f"logs are kept there, {step['studio_url']}\n  help: open the job's "
                             f"page in Azure ML studio (Outputs + logs), or `az ml job download "
                             f"--all`\n")
    result = CliRunner().invoke(main, ["sync", "nope"])
    assert result.exit_code == 2
    assert result.output.startswith("error: no run 'nope' in the evidence store")


def test_sync_of_a_job_the_workspace_lost_is_one_line(tmp_path, monkeypatch, azureml,
                                                      azureml_project):
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)
    azureml.add_data("x", "1", "uri_folder")  # the pre-flight finds the input's data asset
    result = CliRunner().invoke(main, ["submit", f"{azureml_project / 'lbflow.py'}:flat",
                                       "--target", "azure", "--input", "raw=azureml:x:1",
                                       "--workspace", "ws-defects", "--resource-group", "rg-ml",
                                       "--subscription", "00000000-0000-0000-0000-000000000000"])
    assert result.exit_code == 0, result.output
    name = azureml.last_job.name
    azureml.jobs.pop(name)
    result = CliRunner().invoke(main, ["sync", name])
    assert result.exit_code == 2
    assert result.output == (f"error: no job: Azure ML has no job {name!r} in workspace "
                             f"'ws-defects' (resource group 'rg-ml', subscription "
                             f"'00000000-0000-0000-0000-000000000000')\n  help: check the job "
                             f"name (`mlpipe runs` shows the runs and their jobs); a deleted "
                             f"job cannot be synced\n")
