"""``mlpipe evidence`` of an Azure ML candidate whose steps left no step record (a script
component, an older export, an environment without mlpipe): the bundle is built and sealed
from what sync recorded, what cannot be known is ``null``/empty and said so (MP660), and
``--verify`` checks what it can and lists what it could not (MP661), never a crash. The
candidate with records, and ``--fetch``, are in ``test_acceptance.py``.
"""
import json
import re

import pytest
from click.testing import CliRunner

from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main

WORKSPACE = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]


@pytest.fixture
def mlpipe(azureml, azureml_project, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "evidence"))
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)

    def run(*args):
        argv = list(args)
        if argv[0] == "submit":
            argv[1:1] = [f"{azureml_project / 'lbflow.py'}:flat", "--target", "azure",
                         *WORKSPACE, "--input", "raw=azureml:defect-images:1"]
        return CliRunner().invoke(main, argv, catch_exceptions=False)

    return run


@pytest.fixture
def candidate(mlpipe, azureml):
    """An Azure candidate whose jobs completed without writing anything (no step record)."""
    submitted = mlpipe("submit")
    assert submitted.exit_code == 0, submitted.output
    run_id = re.search(r"^submitted run (r-[0-9a-f]{10})", submitted.output, re.M).group(1)
    job = azureml.last_job
    for node in ("prepare", "fit", "evaluate"):
        job.child(node).start().complete()
    job.complete()
    synced = mlpipe("sync", run_id)
    assert synced.exit_code == 0, synced.output
    assert (f"note: step 'fit': job {job.child('fit').name} left no step record in its "
            f"'mlpipe_record' output; its checks, digests and observations are unknown"
            in synced.output)
    return re.search(r"^candidate (c-[0-9a-f]{10})$", synced.output, re.M).group(1), job


def test_a_candidate_whose_steps_left_no_record(mlpipe, candidate, azureml):
    cand, job = candidate
    shown = mlpipe("evidence", cand, "--format", "json")
    assert shown.exit_code == 1, shown.output   # MP660 is an error: the findings gate
    assert shown.stderr == (f"error: candidate {cand} has 2 error-severity findings (MP660): "
                            f"it is not ready for review\n")
    bundle = json.loads(shown.stdout)
    p = bundle["predicate"]
    model_uri = azureml.output_asset_id(job.child("fit"), "model")   # where rundata says it is
    assert bundle["subject"] == []   # the model's files are unknown: none is named
    model = next(a for a in p["artifacts"] if a["digest"] == p["candidate"]["model"])
    assert model == {"digest": model["digest"], "kind": "mlflow_model", "size": None,
                     "file_count": None, "location": model_uri, "remote": True,
                     "digest_by": None}
    assert model["digest"].startswith("ref:sha256:")
    # (MP717 too where the tests run in a git checkout: the project's files are outside it)
    assert [(f["code"], f["severity"], f["step"]) for f in p["findings"]
            if f["code"] != "MP717"] == [("MP660", "error", "evaluate"), ("MP660", "error", "fit"),
                                         ("MP870", "warning", "evaluate"),
                                         ("MP870", "warning", "fit"),
                                         ("MP870", "warning", "prepare")]
    # each completed step without a step record: its facts are unknown, never a clean bundle
    unknown = next(f for f in p["findings"] if f["code"] == "MP870" and f["step"] == "fit")
    assert unknown["message"] == (
        f"step 'fit' ran on Azure ML, but its step record is unknown (step record: job "
        f"{job.child('fit').name} left no step record in its 'mlpipe_record' output)")
    assert p["findings"][1]["message"] == (
        f"the candidate's model (fit.model) has no content digest: only where it is was "
        f"recorded ({model_uri}), so nothing in this bundle names the bytes a reviewer would "
        f"approve")
    assert p["evaluation"]["report"]["readable"] is False
    # what the steps' runtime would have observed is unknown, not "none"
    assert sorted((st["step"], st["step_record"], st["metrics"]) for st in p["steps"]) == [
        ("evaluate", False, []), ("fit", False, []), ("prepare", False, [])]
    text = mlpipe("evidence", cand).output
    assert "ERROR [MP660 content-unknown] (evidence) the candidate's model (fit.model)" in text
    assert f"(content unknown: only its location {model_uri} was recorded)" in text
    assert "  files: unknown (no digest of them was recorded)" in text
    assert "    no step record: what its runtime would have observed" in text
    assert ("data raw = azureml:defect-images:1  ref:sha256:" in text
            and "(a reference: its content was not recorded)" in text)


def test_verify_checks_what_it_can_and_lists_what_it_cannot(mlpipe, candidate, azureml):
    cand, _ = candidate
    tunnels = len(azureml.tunnels)   # sync looked for the step records there
    # sealed first (--verify never seals); MP660 is an error, so the findings gate says 1
    assert mlpipe("evidence", cand).exit_code == 1
    for extra in ([], ["--fetch"]):   # nothing to download can be checked without a digest
        done = mlpipe("evidence", cand, "--verify", "--format", "json", *extra)
        assert done.exit_code == 0, done.output
        v = json.loads(done.stdout)
        assert (v["ok"], v["complete"], v["fetched"], v["bundles_checked"]) == (
            True, False, 0, 1)
        assert sorted(x["artifact"] for x in v["not_rehashed"]) == [
            "artifact evaluate.report", "artifact fit.model", "artifact prepare.examples",
            "data snapshot 'raw'"]
        assert {x["code"] for x in v["not_rehashed"]} == {"MP661"}
    assert len(azureml.tunnels) == tunnels   # nothing was downloaded
    text = mlpipe("evidence", cand, "--verify").output
    assert re.search(r"info\[MP661\] artifact-not-rehashed: artifact fit\.model was not "
                     r"re-hashed: only its location \(azureml://\S+\) was recorded, no content "
                     r"digest to re-hash it against", text)
    assert "4 artifact(s) and snapshot(s) NOT re-hashed" in text


def test_fetch_is_for_verify_only(mlpipe, candidate):
    cand, _ = candidate
    done = mlpipe("evidence", cand, "--fetch")
    assert done.exit_code == 2
    assert done.output == (f"error: --fetch applies to --verify only\n  help: run `mlpipe "
                           f"evidence {cand} --verify --fetch`\n")
