"""``--format json`` of runs, show, candidates, diff and sync: the documented shapes
(docs/json.md), pinned key by key, on two Azure runs recorded through the loopback Azure ML
service (the second reuses a step of the first)."""
import json
import re

import pytest
from click.testing import CliRunner

from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main
from mlpipe.evidence.storage.ci import PROVIDERS

RUN_KEYS = {"run_id", "pipeline", "pipeline_digest", "status", "target", "started_at",
            "finished_at", "duration_s", "job_name", "studio_url", "azure_status", "message",
            "ci"}
STEP_KEYS = {"step", "status", "step_run_id", "reused_from", "component", "started_at",
             "finished_at", "duration_s", "message", "job_name", "studio_url", "metrics",
             "log", "diagnosis"}
SECTIONS = {"pipeline", "code_revision", "data_snapshots", "parameters", "components", "code",
            "environment", "interpreter", "steps_and_reuse", "metrics"}


@pytest.fixture(scope="module")
def recorded(azureml_service, azureml_project, tmp_path_factory):
    """Two synced Azure runs of the flat pipeline: the second reuses the first's prepare and
    runs with epochs=5."""
    mp = pytest.MonkeyPatch()
    azureml_service.reset()
    for key, value in azureml_service.environ().items():
        mp.setenv(key, value)
    # azure-ai-ml sets AZUREML_CURRENT_CLOUD to the loopback's cloud once it read its metadata:
    # set it first, so that its removal is recorded and undone (a leaked value fails every
    # later `import azure.ai.ml` of this worker's subprocesses: "Unknown cloud environment")
    mp.setenv("AZUREML_CURRENT_CLOUD", "")
    mp.delenv("AZUREML_CURRENT_CLOUD")
    for flag, _ in PROVIDERS:  # module-scoped: before the autouse _not_under_ci
        mp.delenv(flag, raising=False)
    mp.setenv("MLPIPE_STORE_URL",
              f"sqlite:///{tmp_path_factory.mktemp('json') / 'store.sqlite'}")
    mp.setattr(cli_azure, "_credential", azureml_service.credential)
    runs = []
    original = None
    for epochs in ("3", "5"):
        result = CliRunner().invoke(main, [
            "submit", f"{azureml_project / 'lbflow.py'}:flat", "--target", "azure",
            "--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
            "00000000-0000-0000-0000-000000000000", "--input", "raw=azureml:defect-images:1",
            "--param", f"epochs={epochs}"])
        assert result.exit_code == 0, result.output
        run_id = re.search(r"submitted run (r-[0-9a-f]{10})", result.output).group(1)
        job = azureml_service.last_job
        if original is None:
            original = job.child("prepare").start().complete()
        else:
            job.child("prepare").reuse(original)
        job.child("fit").start().log_metric("loss", 0.5 if epochs == "3" else 0.3).complete()
        job.child("evaluate").start().complete()
        job.complete()
        assert CliRunner().invoke(main, ["sync", run_id]).exit_code == 0
        runs.append(run_id)
    yield runs
    mp.undo()
    azureml_service.reset()


def cli_json(*args, exit_code=0):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout)


def test_runs_json(recorded):
    document = cli_json("runs", "--format", "json")
    assert document["format"] == "mlpipe.runs/1"
    assert [r["run_id"] for r in document["runs"]] == recorded[::-1]  # newest first
    for run in document["runs"]:
        assert set(run) == RUN_KEYS
        assert (run["status"], run["target"], run["azure_status"]) == (
            "succeeded", "azure", "Completed")
        assert run["studio_url"].startswith(f"https://ml.azure.test/runs/{run['job_name']}")
        assert run["started_at"].endswith("Z") and run["duration_s"] >= 0
        assert run["ci"] is None


def test_show_json(recorded):
    document = cli_json("show", recorded[1], "--format", "json")
    assert document["format"] == "mlpipe.run/1"
    assert set(document) == RUN_KEYS | {"format", "params", "inputs", "code", "steps",
                                        "candidates"}
    assert document["params"] == {"epochs": 5}
    assert document["inputs"] == [{"name": "raw", "reference": "azureml:defect-images:1",
                                   "digest": document["inputs"][0]["digest"],
                                   "mutable": False}]
    steps = {s["step"]: s for s in document["steps"]}
    assert all(set(s) == STEP_KEYS for s in steps.values())
    assert steps["prepare"]["status"] == "reused" and steps["fit"]["status"] == "executed"
    assert steps["fit"]["metrics"] == [{"name": "loss", "value": 0.3, "scope": "global",
                                        "rank": None, "population": None}]
    assert steps["fit"]["job_name"] and steps["fit"]["component"] == "fit@1.0.0"
    assert len(document["candidates"]) == 1


def test_candidates_json(recorded):
    document = cli_json("candidates", "--format", "json")
    assert document["format"] == "mlpipe.candidates/1"
    assert [c["run_id"] for c in document["candidates"]] == recorded[::-1]
    assert set(document["candidates"][0]) == {"candidate_id", "name", "pipeline", "run_id",
                                              "created_at", "model_digest", "metrics",
                                              "findings", "findings_by_source",
                                              "productions", "review", "signature"}
    assert document["candidates"][0]["review"] == {"status": "unreviewed", "by": None,
                                                   "decided_at": None, "bundle": None}
    assert document["candidates"][0]["findings"] is None   # no bundle sealed yet
    assert document["candidates"][0]["model_digest"].startswith("ref:sha256:")


def test_diff_json(recorded):
    document = cli_json("diff", *recorded, "--format", "json", exit_code=1)  # as diff(1)
    assert document["format"] == "mlpipe.diff/1"
    assert set(document) == {"format", "run_a", "run_b", "differences", "identical"}
    assert set(document["differences"]) == SECTIONS and document["identical"] is False
    assert document["differences"]["parameters"] == [
        {"what": "epochs", "before": 3, "after": 5}]
    assert {d["what"] for d in document["differences"]["steps_and_reuse"]} == {"prepare"}
    assert document["differences"]["metrics"] == [
        {"what": "fit.loss[global]", "before": 0.5, "after": 0.3}]
    same = cli_json("diff", recorded[0], recorded[0], "--format", "json")
    assert same["identical"] is True and not any(same["differences"].values())


def test_sync_json(recorded):
    document = cli_json("sync", recorded[0], "--format", "json")
    assert document["format"] == "mlpipe.sync/1"
    assert set(document) == {"format", "run_id", "pipeline", "steps", "recorded"}
    assert document["run_id"] == recorded[0]
    assert set(document["recorded"]) == {"status", "steps", "candidate", "notes"}
    assert {s["node"] for s in document["steps"]} == {"prepare", "fit", "evaluate"}
    assert {"name", "status", "node", "reused", "reused_from", "outputs", "metrics",
            "message", "started_at", "finished_at", "studio_url"} <= set(document["steps"][0])


def test_show_json_refuses_why():
    result = CliRunner().invoke(main, ["show", "r-1", "--why", "fit", "--format", "json"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --why has no JSON form")
