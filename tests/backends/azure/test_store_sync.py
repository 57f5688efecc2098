"""Azure runs in the evidence store: what ``submit --target azure`` records before and after
Azure ML accepts the job, what a failed submission leaves, and what ``sync`` records from the
pipeline job and its child jobs (real SQLite and PostgreSQL; ``FakeAzureML`` stands in for the
Azure ML service only).
"""
import os
import re

import pytest
from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError
from click.testing import CliRunner
from sqlalchemy import func, select

from backends.azure.fake_azureml import RESPONSES, WS, FakeAzureML
from mlpipe.backends.azure.ingest import find_azure_run, record_sync
from mlpipe.backends.azure.record import reference_mutable
from mlpipe.backends.azure.submit import ChecksFailed, submit_to_azure
from mlpipe.backends.azure.sync import sync_run
from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main
from mlpipe.errors import AzureError, UsageError
from mlpipe.evidence import models as m
from mlpipe.evidence.store import Store
from mlpipe.evidence.views import diff_runs, show_run
from mlpipe.loader import load_spec
from pipelines.defect_classifier import defect_classifier
from store_urls import store_url  # noqa: F401  (the SQLite + PostgreSQL fixture)

SPEC = defect_classifier.spec
STUDIO = "https://ml.azure.com/runs/sincere_lamp_7k2m9"


@pytest.fixture
def store(store_url):  # noqa: F811
    opened = Store.open(store_url)
    yield opened
    opened.close()


def counts(store):
    with store.session() as s:
        return {model.__tablename__: s.scalar(select(func.count()).select_from(model))
                for model in (m.Run, m.StepRun, m.StepArtifact, m.Artifact, m.Metric,
                              m.CandidateRow, m.RunInput, m.Snapshot)}


def submit(store, fake, **inputs):
    return submit_to_azure(SPEC, WS, fake, store=store,
                           inputs=inputs or {"raw": "azureml:defect-images:1"})


def sync(store, fake, run_id):
    return record_sync(store, run_id, sync_run(fake.pipeline["name"], fake))


def complete(fake):
    """The recorded job, all steps done: evaluate now completed with a report."""
    fake.set_status("Completed", train="Completed", evaluate="Completed")
    fake.child("evaluate")["properties"]["outputs"]["report"]["uri"] = (
        "azureml://datastores/workspaceblobstore/paths/azureml/9e4a7b2c-evaluate/report")


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


def test_submit_records_the_run_before_the_job_is_created_then_its_job_and_url(store):
    seen = {}

    class Watching(FakeAzureML):
        def create(self, job, experiment):
            with store.session() as s:
                run = s.get(m.Run, job.tags["mlpipe.run_id"])
                seen.update(status=run.status, pid=run.pid, job=run.options["job_name"])
            return super().create(job, experiment)

    fake = Watching()
    run = submit(store, fake, raw="azureml:defect-images@latest",
                 split="azureml:defect-split:2", epochs="12")
    assert seen == {"status": "running", "pid": os.getpid(), "job": None}
    (job, _), = fake.created
    assert job.tags["mlpipe.run_id"] == run.run_id and re.fullmatch(r"r-[0-9a-f]{10}",
                                                                    run.run_id)
    with store.session() as s:
        row = s.get(m.Run, run.run_id)
        assert (row.target, row.status, row.pid, row.finished_at) == ("azure", "running",
                                                                      None, None)
        assert row.options["job_name"] == "sincere_lamp_7k2m9"
        assert row.options["studio_url"].startswith(STUDIO)
        assert row.options["azure_status"] == "NotStarted"
        assert row.options["workspace"]["workspace_name"] == "ws-defects"
        assert row.params == {"epochs": 12}
        assert row.pipeline_digest == SPEC.digest and row.pipeline.spec == SPEC.to_dict()
        assert row.code_revision is not None and len(row.code_revision.commit) == 40
        inputs = {i.name: i.snapshot for i in row.inputs}
        assert (inputs["raw"].reference, inputs["raw"].mutable) == (
            "azureml:defect-images@latest", True)
        assert (inputs["split"].reference, inputs["split"].mutable) == (
            "azureml:defect-split:2", False)
        assert inputs["raw"].digest.startswith("ref:sha256:")
        planned = row.options["steps"]
        assert sorted(planned) == ["evaluate", "prepare", "train"]
        comp = s.get(m.ComponentVersion, planned["train"]["component_version_id"])
        assert (comp.name, comp.version, comp.spec_digest) == (
            "train", "2.1.0", SPEC.step("train").target.digest)
        env = s.get(m.EnvironmentRow, planned["train"]["environment_id"])
        assert (env.name, env.version, env.mutable) == ("defect-cpu", "4", False)
        assert planned["evaluate"]["inputs"] == {"examples": ["step", "prepare", "examples"],
                                                 "labels": ["step", "prepare", "labels"],
                                                 "model": ["step", "train", "model"]}
        assert row.options["candidate"]["model"] == ["step", "train", "model"]
    # the run is Azure ML's now: opening the store again does not mark it interrupted
    assert store.mark_interrupted() == []


def test_a_local_input_path_is_hashed_by_content(store, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes(b"png")
    run = submit(store, FakeAzureML(), raw=str(images))
    with store.session() as s:
        snap = s.get(m.Run, run.run_id).inputs[0].snapshot
        assert (snap.reference, snap.mutable, snap.file_count) == (str(images), True, 1)
        assert not snap.digest.startswith("ref:")


def test_nothing_is_recorded_when_checks_credentials_or_network_stop_the_submission(store):
    before = counts(store)
    with pytest.raises(AzureError, match=r"^no credentials: DefaultAzureCredential"):
        submit(store, FakeAzureML(failure=ClientAuthenticationError("no token")))
    with pytest.raises(AzureError, match=r"^no network: Azure ML cannot be reached"):
        submit(store, FakeAzureML(failure=ServiceRequestError("no route to host")))
    spec, found = load_spec(str(RESPONSES.parent / "yaml" / "cycle.yml"))
    with pytest.raises(ChecksFailed, match=r"nothing was submitted"):
        submit_to_azure(spec, WS, FakeAzureML(), store=store, extra_diagnostics=found)
    assert counts(store) == before


def test_a_job_azure_did_not_confirm_is_recorded_failed_never_left_running(store):
    fake = FakeAzureML(create_failure=ServiceRequestError("connection reset"))
    with pytest.raises(AzureError, match=r"^no network: Azure ML cannot be reached "
                                         r"\(connection reset\)"):
        submit(store, fake)
    assert fake.calls == ["check_access", "create"]
    with store.session() as s:
        run, = s.scalars(select(m.Run)).all()
        assert (run.status, run.pid, run.options["job_name"]) == ("failed", None, None)
        assert run.finished_at is not None
        assert run.message == ("not submitted: no network: Azure ML cannot be reached "
                               "(connection reset)")
        with pytest.raises(UsageError, match=rf"run {run.id} was never submitted to Azure ML: "
                                             r"not submitted: no network"):
            find_azure_run(s, run.id)


# --- sync -------------------------------------------------------------------------------------

def test_sync_records_steps_reuse_outputs_metrics_times_and_the_candidate(store):
    fake = FakeAzureML()
    run = submit(store, fake)
    fake.set_status("Running", train="Running", evaluate="NotStarted")
    early = sync(store, fake, run.run_id)
    assert early.status == "running" and early.candidate_id is None
    assert early.steps == {"prepare": "reused", "train": "running", "evaluate": "running"}

    complete(fake)
    done = sync(store, fake, run.run_id)
    assert done.status == "succeeded"
    assert done.steps == {"prepare": "reused", "train": "executed", "evaluate": "executed"}
    with store.session() as s:
        row = s.get(m.Run, run.run_id)
        assert (str(row.started_at), str(row.finished_at)) == ("2026-10-20 09:14:10",
                                                               "2026-10-20 09:52:30")
        assert row.options["azure_status"] == "Completed" and row.message is None
        assert row.options["steps"]["train"]["job_name"] == "7c1d9e0b-train"
        steps = {sr.step: sr for sr in row.steps}
        prepare, train, evaluate = steps["prepare"], steps["train"], steps["evaluate"]
        assert prepare.reused_from_id is None  # the reused job's run is not in this store
        assert prepare.message == ("reused Azure ML job 0d9c41aa-prepare-old (pipeline job "
                                   "brave_kite_q8d1z); that run is not in this store")
        assert {x.name: x.value for x in prepare.metrics} == {"images": 300.0}
        assert train.compute == {"declared": SPEC.step("train").target.compute.to_dict(),
                                 "ran_on": "gpu-cluster"}
        assert (str(train.started_at), str(train.finished_at)) == ("2026-10-20 09:14:30",
                                                                   "2026-10-20 09:38:20")
        assert train.cacheable is False and train.cache_key is None
        metrics = {x.name: (x.value, x.scope, x.population) for x in train.metrics}
        assert metrics == {"loss": (0.42, "global", None),
                           "train_accuracy": (0.87, "global", "training split, all ranks"),
                           "shard_accuracy": (0.85, "partial",
                                              "rank 0's shard of the training split")}
        model = next(a.artifact for a in train.artifacts if a.direction == "output")
        assert model.location.endswith("/7c1d9e0b-train/model/") and model.kind == "mlflow_model"
        assert model.digest.startswith("ref:sha256:")
        inputs = {a.port: a.artifact.location for a in evaluate.artifacts if a.direction == "input"}
        assert inputs["model"] == model.location
        assert inputs["labels"].endswith("/0d9c41aa-prepare-old/labels")
        assert {a.port for a in prepare.artifacts if a.direction == "input"} == {"raw"}
        cand, = s.scalars(select(m.CandidateRow).where(m.CandidateRow.run_id == run.run_id))
        assert cand.id == done.candidate_id and cand.model.id == model.id
        assert cand.evaluation.location.endswith("/9e4a7b2c-evaluate/report")
        shown = show_run(s, row)
    assert "azure job sincere_lamp_7k2m9 (Completed)  " + STUDIO in shown
    assert "input raw = azureml:defect-images:1  (reference; content not hashed)" in shown
    assert "prepare: reused Azure ML job 0d9c41aa-prepare-old" in shown
    assert f"candidate {done.candidate_id}" in shown

    before = counts(store)
    again = sync(store, fake, run.run_id)
    assert counts(store) == before  # syncing twice duplicates nothing
    assert (again.status, again.candidate_id, again.steps) == (done.status, done.candidate_id,
                                                               done.steps)


def test_a_failed_pipeline_records_the_failed_step_and_no_candidate(store):
    fake = FakeAzureML()
    run = submit(store, fake)
    fake.set_status("Failed")  # the recorded evaluate job failed
    outcome = sync(store, fake, run.run_id)
    assert outcome.status == "failed" and outcome.candidate_id is None
    with store.session() as s:
        row = s.get(m.Run, run.run_id)
        assert row.message == "Azure ML job sincere_lamp_7k2m9 ended Failed: step evaluate failed"
        evaluate = next(sr for sr in row.steps if sr.step == "evaluate")
        assert (evaluate.status, evaluate.message) == (
            "failed", "Azure ML job 9e4a7b2c-evaluate ended Failed")
        assert [a for a in evaluate.artifacts if a.direction == "output"] == []


def test_a_step_azure_never_started_is_recorded_skipped_once_the_pipeline_ended(store):
    fake = FakeAzureML()
    run = submit(store, fake)
    fake.set_status("Canceled")
    fake.child_jobs = [c for c in fake.child_jobs if c["properties"]["displayName"] == "prepare"]
    outcome = sync(store, fake, run.run_id)
    assert outcome.status == "interrupted"
    assert outcome.steps == {"prepare": "reused", "train": "skipped", "evaluate": "skipped"}


def test_reuse_names_the_step_run_of_the_recorded_original(store):
    first = FakeAzureML(job_name="brave_kite_q8d1z")
    prepare = first.child("prepare")["properties"]
    prepare["properties"] = {"azureml.nodeid": "prepare"}
    first.child("prepare")["name"] = "0d9c41aa-prepare-old"
    run_a = submit(store, first)
    complete(first)
    assert sync(store, first, run_a.run_id).steps["prepare"] == "executed"

    second = FakeAzureML()  # its prepare job reused 0d9c41aa-prepare-old of brave_kite_q8d1z
    run_b = submit(store, second)
    complete(second)
    assert sync(store, second, run_b.run_id).steps["prepare"] == "reused"
    with store.session() as s:
        original = next(sr for sr in s.get(m.Run, run_a.run_id).steps if sr.step == "prepare")
        reused = next(sr for sr in s.get(m.Run, run_b.run_id).steps if sr.step == "prepare")
        assert reused.reused_from_id == original.id
        assert reused.message == ("reused Azure ML job 0d9c41aa-prepare-old (pipeline job "
                                  "brave_kite_q8d1z)")
        assert reused.metrics == [] and {x.name for x in original.metrics} == {"images"}
        assert f"prepare: executed -> reused from {original.id}" in diff_runs(
            s, s.get(m.Run, run_a.run_id), s.get(m.Run, run_b.run_id))


def test_sync_finds_the_run_by_id_prefix_or_job_name(store):
    run = submit(store, FakeAzureML())
    with store.session() as s:
        assert find_azure_run(s, run.run_id[:6]).id == run.run_id
        assert find_azure_run(s, "sincere_lamp_7k2m9").id == run.run_id
        with pytest.raises(UsageError, match=r"no run 'nope' in the evidence store \(neither an "
                                             r"mlpipe run id nor the Azure ML job of one\)"):
            find_azure_run(s, "nope")


# --- the commands -----------------------------------------------------------------------------

def test_submit_sync_runs_and_show_commands_through_the_fake_service(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    fake = FakeAzureML()
    monkeypatch.setattr(cli_azure, "_service", lambda factory, ws: fake)
    flags = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]
    result = CliRunner().invoke(main, ["submit", "pipelines/defect_classifier.py", "--target",
                                       "azure", "--input", "raw=azureml:x:1", *flags])
    assert result.exit_code == 0, result.output
    run_id = re.search(r"^submitted run (r-[0-9a-f]{10}) as Azure ML job sincere_lamp_7k2m9 "
                       r"\(NotStarted\)$", result.output, re.M).group(1)
    assert f"studio: {STUDIO}" in result.output
    assert f"follow it with: mlpipe sync {run_id}" in result.output

    complete(fake)
    result = CliRunner().invoke(main, ["sync", run_id[:5]])  # the recorded workspace
    assert result.exit_code == 0, result.output
    assert f"run {run_id} succeeded  (Azure ML job sincere_lamp_7k2m9: Completed)" in result.output
    assert "  prepare          Completed  reused 0d9c41aa-prepare-old  [images=300]" in result.output
    assert "shard_accuracy=0.85(partial)" in result.output
    assert re.search(r"^candidate c-[0-9a-f]{10}$", result.output, re.M)
    result = CliRunner().invoke(main, ["sync", "sincere_lamp_7k2m9", "--format", "json"])
    assert result.exit_code == 0 and '"status": "succeeded"' in result.output

    result = CliRunner().invoke(main, ["runs"])
    assert re.search(rf"^{run_id}\s+defect-classifier\s+succeeded\s+azure\s", result.output, re.M)
    result = CliRunner().invoke(main, ["show", run_id])
    assert "azure job sincere_lamp_7k2m9 (Completed)" in result.output
    result = CliRunner().invoke(main, ["sync", "nope"])
    assert result.exit_code == 2
    assert result.output.startswith("error: no run 'nope' in the evidence store")
