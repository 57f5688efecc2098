"""`mlpipe promote --registry azure` and `mlpipe trace azureml:NAME:VERSION`: the real
azure-ai-ml `MLClient` (`models.create_or_update`, the model's files uploaded by the client to
the workspace's default datastore; `models.download`) against the loopback Azure ML service,
with nothing of the service replaced but azure-identity's credential. Real submits, a real
store; the submits and reviews as processes, promote and trace in-process (the credential)."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from bundle_project import PROMOTION_POLICY, BundleProject
from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main

pytestmark = pytest.mark.slow

WORKSPACE = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]
TARGET = ("azureml://subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/rg-ml"
          "/workspaces/ws-defects")
POLICY = PROMOTION_POLICY  # the bundle project meets it


@pytest.fixture
def project(azureml, tmp_path, monkeypatch):
    """A submitted, sealed candidate; `run(...)` is mlpipe in-process in the project."""
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    (proj.root / "policy.yml").write_text(POLICY)
    monkeypatch.chdir(proj.root)
    for name in ("MLPIPE_HOME", "MLPIPE_STORE_URL", "MLPIPE_SIGNING_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)

    def run(*args: str):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)

    return proj, cand, run


def _accept(proj, cand) -> str:
    done = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "meets it",
                    "--policy", "policy.yml")
    assert done.returncode == 0, done.stderr
    return re.search(r"citing bundle (sha256:[0-9a-f]{64})", done.stdout).group(1)


def _versions(azureml, name: str) -> dict[str, dict]:
    return {v: a.body for (k, n, v), a in azureml.assets.items() if k == "models" and n == name}


def test_promote_into_the_workspace_then_trace_it_back(project, azureml):
    proj, cand, run = project
    cited = _accept(proj, cand)
    done = run("promote", cand, "--registry", "azure", "--name", "defect", "--by", "ci",
               *WORKSPACE)
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[0] == (f"promoted {cand}: registered azureml:defect:1 at "
                                           f"{TARGET}")
    [(version, body)] = _versions(azureml, "defect").items()
    assert version == "1"
    props = body["properties"]
    tags = props["tags"]
    bundle = proj.bundle(cand)
    p = bundle["predicate"]
    assert tags["mlpipe.candidate"] == cand and tags["mlpipe.bundle"] == cited
    assert tags["mlpipe.decided_by"] == "dana" and tags["mlpipe.run"] == p["run"]["id"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", tags["mlpipe.decision"])
    assert tags["mlpipe.policy_name"] == "promotion-policy"
    assert tags["mlpipe.data.data"] == p["snapshots"][0]["digest"]
    assert props["description"].startswith("# Model card")
    # the files went to the workspace's datastore by the client, and the version points there
    assert props["modelUri"].startswith("azureml://subscriptions/00000000-0000-0000-0000-"
                                        "000000000000/resourcegroups/rg-ml/workspaces/"
                                        "ws-defects/datastores/workspaceblobstore/paths/")
    assert any(b.endswith("/weights.txt") for (_, b) in azureml.blobs)
    # recorded and sealed into the next bundle
    [promotion] = p["promotions"]
    assert (promotion["registry"], promotion["target"], promotion["uri"]) == (
        "azure", TARGET, "azureml:defect:1")
    # idempotent: the same candidate is the same version
    again = run("promote", cand, "--registry", "azure", "--name", "defect", *WORKSPACE)
    assert again.exit_code == 0, again.output
    assert again.output.startswith(f"promoted {cand}: already registered as azureml:defect:1 ")
    assert list(_versions(azureml, "defect")) == ["1"]
    # trace: the registered bytes downloaded, hashed, found
    traced = run("trace", "azureml:defect:1", "--format", "json", *WORKSPACE)
    assert traced.exit_code == 0, traced.output
    found = json.loads(traced.output)
    assert found["candidate"] == cand and found["ok"] is True and found["problems"] == []
    assert found["model"]["digest"] == tags["mlpipe.model"]
    assert found["promotion"]["uri"] == "azureml:defect:1"
    text = run("trace", "azureml:defect:1", *WORKSPACE)
    assert text.exit_code == 0 and text.output.endswith(
        "traced: the registered bytes are the candidate's model\n")


def test_a_model_replaced_in_the_workspace_after_promotion_does_not_trace(project, azureml):
    proj, cand, run = project
    _accept(proj, cand)
    assert run("promote", cand, "--registry", "azure", "--name", "defect",
               *WORKSPACE).exit_code == 0
    [key] = [k for k in azureml.blobs if k[1].endswith("/weights.txt")]
    azureml.blobs[key] = b"999"   # someone overwrites the registered files in the datastore
    traced = run("trace", "azureml:defect:1", "--format", "json", *WORKSPACE)
    assert traced.exit_code == 1
    found = json.loads(traced.output)
    assert [x["code"] for x in found["problems"]] == ["MP754", "MP755"]
    assert found["problems"][0]["message"].startswith("azureml:defect:1 holds model bytes ")
    assert f"but it was promoted from {cand} with model " in found["problems"][0]["message"]


def test_the_refusals_register_nothing_in_the_workspace(project, azureml):
    proj, cand, run = project
    done = run("promote", cand, "--registry", "azure", "--name", "defect", *WORKSPACE)
    assert done.exit_code == 1
    assert f"[MP750 promotion-without-decision] candidate {cand} has no recorded decision" in (
        done.output)
    assert proj.cli("review", cand, "--reject", "--by", "lee", "--note", "drifts"
                    ).returncode == 0
    done = run("promote", cand, "--registry", "azure", "--name", "defect", *WORKSPACE)
    assert done.exit_code == 1 and "[MP751 promotion-of-rejected-candidate]" in done.output
    _accept(proj, cand)
    proj.sql("UPDATE metrics SET value = 0.99 WHERE name = 'accuracy'")
    done = run("promote", cand, "--registry", "azure", "--name", "defect", *WORKSPACE)
    assert done.exit_code == 1 and "[MP752 promotion-on-stale-decision]" in done.output
    assert _versions(azureml, "defect") == {}
    assert not [r for r in azureml.requests if "/models/" in r.path]   # gated before asking
    alias = run("promote", cand, "--registry", "azure", "--name", "defect", "--alias", "x",
                *WORKSPACE)
    assert alias.exit_code == 2 and "--alias is for an MLflow registry" in alias.output
    unknown = run("trace", "azureml:defect:7", *WORKSPACE)
    assert unknown.exit_code == 2 and unknown.output.startswith(
        "error: the Azure ML workspace 'ws-defects' has no model defect:7 to trace\n"), unknown.output
    bad = run("trace", "azureml:defect", *WORKSPACE)
    assert (bad.exit_code, bad.output) == (2, "error: 'azureml:defect' is not a registered "
                                              "Azure ML model: expected azureml:NAME:VERSION (a "
                                              "version number: trace one version)\n")
