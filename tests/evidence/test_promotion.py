"""From an accepted candidate to a registered model that traces back: `mlpipe promote` into a
real MLflow tracking server's Model Registry (loopback), gated on the recorded decision; `mlpipe
trace` from the registry back to the candidate; the model card and its CycloneDX ML-BOM.
Real submits, a real store, the CLI as a process."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bundle_project import PROMOTION_POLICY, BundleProject
from mlflow_server import mlflow_server  # noqa: F401  (a real tracking server, per session)

pytestmark = pytest.mark.slow

POLICY = PROMOTION_POLICY  # the bundle project meets it
SERVED = Path(__file__).parents[1] / "fixtures" / "evidence" / "served.py"


@pytest.fixture
def accepted(tmp_path, mlflow_server):  # noqa: F811
    """A candidate accepted against a policy, and the CLI pointed at the tracking server."""
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    (proj.root / "policy.yml").write_text(POLICY)
    done = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "meets it",
                    "--policy", "policy.yml")
    assert done.returncode == 0, done.stderr
    cited = re.search(r"citing bundle (sha256:[0-9a-f]{64})", done.stdout).group(1)
    return proj, cand, cited, {"MLFLOW_TRACKING_URI": mlflow_server}


def _name(tmp_path: Path) -> str:
    return "m-" + re.sub(r"[^a-z0-9]", "-", tmp_path.name.lower())[-40:]


def test_promote_registers_the_model_with_its_lineage_and_trace_finds_it(accepted, tmp_path):
    from mlflow import MlflowClient

    proj, cand, cited, env = accepted
    name = _name(tmp_path)
    done = proj.cli("promote", cand, "--name", name, "--alias", "champion", "--by", "ci",
                    env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (f"promoted {cand}: registered models:/{name}/1 "
                                           f"(alias champion) at {env['MLFLOW_TRACKING_URI']}")
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    mv = client.get_model_version_by_alias(name, "champion")
    bundle = proj.bundle(cand)
    p = bundle["predicate"]
    decision = p["review"]["decisions"][0]
    assert mv.version == "1"
    tags = mv.tags
    assert tags["mlpipe.candidate"] == cand
    assert tags["mlpipe.model"] == p["candidate"]["model"]
    assert tags["mlpipe.bundle"] == cited == decision["bundle"]
    assert tags["mlpipe.decided_by"] == "dana"
    assert tags["mlpipe.decision"].startswith("sha256:")
    assert tags["mlpipe.policy"] == decision["policy"]["digest"]
    assert tags["mlpipe.run"] == p["run"]["id"]
    assert tags["mlpipe.data.data"] == p["snapshots"][0]["digest"]
    assert "mlpipe.signature" not in tags   # no model signature is stored yet: no location
    # the model card and ML-BOM are attached to the version
    assert mv.description.startswith(f"# Model card: review ({cand})")
    assert tags["mlpipe.model_card"].endswith("/evidence/model-card.md")
    assert tags["mlpipe.ml_bom"].endswith("/evidence/model-card.cdx.json")
    # recorded in the store and sealed into the next bundle
    [promotion] = p["promotions"]
    assert (promotion["registry"], promotion["name"], promotion["version"], promotion["alias"],
            promotion["uri"], promotion["bundle"], promotion["by"]) == (
        "mlflow", name, "1", "champion", f"models:/{name}/1", cited, "ci")
    assert promotion["tags"]["mlpipe.candidate"] == cand
    # idempotent: the same candidate promoted again is the same version
    again = proj.cli("promote", cand, "--name", name, "--alias", "champion", "--format",
                     "json", env=env)
    assert again.returncode == 0, again.stderr
    shown = json.loads(again.stdout)
    assert (shown["version"], shown["new"]) == ("1", False)
    assert [v.version for v in client.search_model_versions(f"name = '{name}'")] == ["1"]
    assert len(proj.bundle(cand)["predicate"]["promotions"]) == 1
    # trace: by alias and by version
    for ref in (f"models:/{name}@champion", f"models:/{name}/1"):
        traced = proj.cli("trace", ref, env=env)
        assert traced.returncode == 0, traced.stderr + traced.stdout
        lines = traced.stdout.splitlines()
        assert lines[1] == f"  bytes    {p['candidate']['model']}"
        assert f"candidate  {cand}" in lines
        assert any(line.startswith("decision   accepted by dana at ") for line in lines)
        assert any(line.startswith(f"promotion  models:/{name}/1@champion at ") for line in lines)
        assert "verify     ok: the bundle and the files it names are unchanged" in lines
        assert lines[-1] == "traced: the registered bytes are the candidate's model"


def test_a_model_replaced_in_the_registry_after_promotion_does_not_trace(accepted, tmp_path):
    from mlflow import MlflowClient

    proj, cand, _, env = accepted
    name = _name(tmp_path)
    assert proj.cli("promote", cand, "--name", name, env=env).returncode == 0
    source = MlflowClient(env["MLFLOW_TRACKING_URI"]).get_model_version_download_uri(name, "1")
    weights = Path(source.removeprefix("file://")) / "weights.txt"
    weights.write_text("999")   # someone swaps the registered files
    traced = proj.cli("trace", f"models:/{name}/1", "--format", "json", env=env)
    assert traced.returncode == 1
    found = json.loads(traced.stdout)
    assert [x["code"] for x in found["problems"]] == ["MP754", "MP755"]
    assert found["problems"][0]["message"].startswith(
        f"models:/{name}/1 holds model bytes blake3:")
    assert f"but it was promoted from {cand} with model blake3:" in found["problems"][0][
        "message"]
    assert found["candidate"] == cand and found["ok"] is False
    text = proj.cli("trace", f"models:/{name}/1", env=env)
    assert text.returncode == 1
    assert "error[MP754] " in text.stdout and text.stdout.endswith(
        "NOT TRACED: see the errors above\n")


def test_a_model_no_candidate_has_is_not_traced(accepted, tmp_path):
    from mlflow import MlflowClient

    proj, _, _, env = accepted
    name = _name(tmp_path)
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "weights.txt").write_text("42")
    # through the client, not mlflow's process-wide tracking URI (a later test's forked steps
    # would inherit it and log to this server)
    run = client.create_run("0")
    client.log_artifacts(run.info.run_id, str(folder), "model")
    client.set_terminated(run.info.run_id)
    client.create_registered_model(name)
    client.create_model_version(name, f"{run.info.artifact_uri}/model", run.info.run_id)
    traced = proj.cli("trace", f"models:/{name}/1", env=env)
    assert traced.returncode == 1
    assert re.search(r"^error\[MP755\] no candidate in the evidence store has the model bytes "
                     rf"blake3:[0-9a-f]{{64}} of models:/{name}/1$", traced.stdout, re.M)
    unknown = proj.cli("trace", f"models:/{name}/7", env=env)
    assert unknown.returncode == 2
    assert unknown.stderr.startswith(f"error: the MLflow registry at "
                                     f"{env['MLFLOW_TRACKING_URI']} has no models:/{name}/7 "
                                     f"to trace: ")
    bad = proj.cli("trace", f"{name}:1", env=env)
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"error: '{name}:1' is not a registered model: expected "
                                 f"models:/NAME/VERSION, models:/NAME@ALIAS or "
                                 f"azureml:NAME:VERSION")


def _refused(proj, cand, env, name, *extra):
    done = proj.cli("promote", cand, "--name", name, *extra, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stderr


def _nothing_registered(env, name):
    from mlflow import MlflowClient

    return MlflowClient(env["MLFLOW_TRACKING_URI"]).search_model_versions(
        f"name = '{name}'") == []


def test_the_refusals_say_which_is_missing(tmp_path, mlflow_server):  # noqa: F811
    env = {"MLFLOW_TRACKING_URI": mlflow_server}
    name = _name(tmp_path)
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    # no decision
    assert _refused(proj, cand, env, name) == (
        f"error: [MP750 promotion-without-decision] candidate {cand} has no recorded decision; "
        f"only a candidate a reviewer accepted is promoted\n  help: read `mlpipe evidence "
        f"{cand}`, then record `mlpipe review {cand} --accept --by NAME --note TEXT --policy "
        f"FILE`\n")
    # accepted without a policy: nothing says which criteria it met
    (proj.root / "policy.yml").write_text(POLICY)
    assert proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok").returncode == 0
    assert _refused(proj, cand, env, name).startswith(
        f"error: [MP753 promotion-policy-not-met] the accepted decision on {cand} cites no "
        f"policy, so nothing says which criteria it met\n")
    # accepted against a policy, but the promotion requires another one
    assert proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok", "--policy",
                    "policy.yml").returncode == 0
    (proj.root / "strict.yml").write_text(POLICY.replace("0.8", "0.95").replace(
        "promotion-policy", "strict"))
    assert re.match(r"error: \[MP753 promotion-policy-not-met\] the accepted decision was "
                    r"judged against policy promotion-policy sha256:[0-9a-f]{64}, not strict "
                    r"sha256:[0-9a-f]{64} \(strict.yml\)\n",
                    _refused(proj, cand, env, name, "--policy", "strict.yml"))
    # the policy file the decision cites was edited since
    (proj.root / "policy.yml").write_text(POLICY.replace("0.8", "0.5"))
    assert re.match(r"error: \[MP753 promotion-policy-not-met\] the accepted decision was "
                    r"judged against policy promotion-policy sha256:", _refused(proj, cand, env,
                                                                                  name))
    (proj.root / "policy.yml").write_text(POLICY)
    # the store changed after the decision: stale
    proj.sql("UPDATE metrics SET value = 0.99 WHERE name = 'accuracy'")
    assert re.match(r"error: \[MP752 promotion-on-stale-decision\] the accepted decision cites "
                    r"bundle sha256:[0-9a-f]{64}, but the store or the model's files changed "
                    r"since \(\d+ differences?, first: .*accuracy.*\)\n  help: run `mlpipe "
                    rf"evidence {cand} --rebuild`", _refused(proj, cand, env, name))
    proj.sql("UPDATE metrics SET value = 0.875 WHERE name = 'accuracy'")
    # rejected, after all
    assert proj.cli("review", cand, "--reject", "--by", "lee", "--note",
                    "drifts").returncode == 0
    assert re.match(rf"error: \[MP751 promotion-of-rejected-candidate\] candidate {cand} was "
                    r"rejected by lee \(\d{4}-\d\d-\d\d \d\d:\d\d UTC: drifts\)\n",
                    _refused(proj, cand, env, name))
    assert _nothing_registered(env, name)
    assert "promotions" not in proj.bundle(cand)["predicate"]


def test_a_stale_model_is_refused(accepted, tmp_path):
    proj, cand, _, env = accepted
    weights = next((proj.root / "evidence" / "artifacts").rglob("weights.txt"))
    weights.chmod(0o644)
    weights.write_text("999")
    stderr = _refused(proj, cand, env, _name(tmp_path))
    assert stderr.startswith("error: [MP752 promotion-on-stale-decision] the accepted decision "
                             "cites bundle sha256:")
    assert "but the model's files changed since" in stderr
    assert _nothing_registered(env, _name(tmp_path))


def test_the_model_card_and_its_ml_bom_cite_the_bundle(accepted):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    proj, cand, cited, _ = accepted
    done = proj.cli("evidence", cand, "--format", "model-card", "-o", "card/model-card.md")
    assert done.returncode == 0, done.stderr
    bundle = proj.bundle(cand)
    digest = "sha256:" + __import__("hashlib").sha256(
        proj.evidence(cand, "--format", "json").stdout.encode()).hexdigest()
    assert done.stdout == (f"wrote card/model-card.md and card/model-card.cdx.json (CycloneDX "
                           f"1.7 ML-BOM), citing bundle {digest}\n")
    card = (proj.root / "card" / "model-card.md").read_text()
    assert card.startswith(f"# Model card: review ({cand})\n\nBound to evidence bundle "
                           f"`{digest}`")
    assert "accuracy on the held-out test split" in card   # the policy's description
    p = bundle["predicate"]
    snap = p["snapshots"][0]
    assert f"| data | `{snap['reference']}` | `{snap['digest']}` | 1 | {snap['size']} |" in card
    assert "| accuracy | 0.875 | global | test, 8 examples |" in card
    assert "- **accepted** by dana at " in card and f"citing bundle `{cited}`" in card
    for f in p["findings"]:
        assert f"**{f['severity']} {f['code']} {f['name']}**" in card
    text = (proj.root / "card" / "model-card.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_7).validate_str(text) is None
    bom = json.loads(text)
    model = bom["metadata"]["component"]
    assert model["type"] == "machine-learning-model"
    assert {"name": "mlpipe:bundle", "value": digest} in model["properties"]
    assert {"name": "mlpipe:bundle", "value": digest} in bom["metadata"]["properties"]
    metrics = model["modelCard"]["quantitativeAnalysis"]["performanceMetrics"]
    assert {"type": "accuracy", "value": "0.875", "slice": "global on test, 8 examples"} in metrics
    files = {c["name"]: {h["alg"]: h["content"] for h in c["hashes"]}
             for c in model["components"]}
    assert files == {s["name"]: {"SHA-256": s["digest"]["sha256"].removeprefix("sha256:"),
                                 "BLAKE3": s["digest"]["blake3"].removeprefix("blake3:")}
                     for s in bundle["subject"]}
    assert model["modelCard"]["modelParameters"]["datasets"] == [{"ref": "data-data"}]
    # a corrupted ML-BOM is caught by the same validator
    model["modelCard"]["quantitativeAnalysis"]["performanceMetrics"][0]["value"] = 0.875
    assert JsonStrictValidator(SchemaVersion.V1_7).validate_str(json.dumps(bom)) is not None
    missing = proj.cli("evidence", cand, "--format", "model-card")
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: --format model-card writes two files")


def test_a_signed_model_s_signature_is_attached_and_tagged(tmp_path, mlflow_server):  # noqa: F811
    pytest.importorskip("model_signing")
    from mlflow import MlflowClient

    env = {"MLFLOW_TRACKING_URI": mlflow_server, "MLPIPE_SIGNING_KEY": "ci.pem"}
    proj = BundleProject(tmp_path / "proj")
    assert proj.cli("keys", "generate", "ci.pem").returncode == 0
    cand = proj.submit()
    assert proj.cli("evidence", cand, env=env).returncode == 0   # the first seal signs the model
    (proj.root / "policy.yml").write_text(POLICY)
    assert proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok", "--policy",
                    "policy.yml", env=env).returncode == 0
    name = _name(tmp_path)
    done = proj.cli("promote", cand, "--name", name, env=env)
    assert done.returncode == 0, done.stderr
    signed = proj.bundle(cand)["predicate"]["model_signature"]
    client = MlflowClient(mlflow_server)
    tags = client.get_model_version(name, "1").tags
    assert tags["mlpipe.model_signature_digest"] == signed["digest"]
    assert tags["mlpipe.model_signature_keyid"] == signed["keyid"]
    location = tags["mlpipe.model_signature"]
    assert location.endswith("/evidence/model.sig")
    import hashlib

    import mlflow

    got = Path(mlflow.artifacts.download_artifacts(location, dst_path=str(tmp_path / "sig"),
                                                   tracking_uri=mlflow_server)).read_bytes()
    assert "sha256:" + hashlib.sha256(got).hexdigest() == signed["digest"]


@pytest.fixture
def served(tmp_path, mlflow_server):  # noqa: F811
    """A candidate whose model is a real MLflow pyfunc model, accepted and promoted."""
    proj = BundleProject(tmp_path / "proj")
    shutil.copy(SERVED, proj.root / "served.py")
    done = proj.cli("submit", "served.py:served", "--input", "data=data.txt")
    assert done.returncode == 0, done.stderr
    cand = re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1)
    assert proj.evidence(cand).returncode == 0
    (proj.root / "policy.yml").write_text(POLICY)
    done = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "meets it",
                    "--policy", "policy.yml")
    assert done.returncode == 0, done.stderr
    env = {"MLFLOW_TRACKING_URI": mlflow_server}
    name = _name(tmp_path)
    done = proj.cli("promote", cand, "--name", name, "--alias", "champion", env=env)
    assert done.returncode == 0, done.stderr
    return proj, cand, env, name


def test_trace_weighs_the_sealed_files_not_those_a_loader_adds(served):
    import mlflow
    import mlflow.pyfunc
    from mlflow import MlflowClient

    proj, cand, env, name = served
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    loaded = mlflow.pyfunc.load_model(f"models:/{name}@champion")   # as a server would
    assert loaded.predict([3, 4]) == [3, 4]
    source = Path(MlflowClient(env["MLFLOW_TRACKING_URI"]).get_model_version_download_uri(
        name, "1").removeprefix("file://"))
    assert (source / "registered_model_meta").is_file()   # MLflow wrote it beside the model
    model = proj.bundle(cand)["predicate"]["candidate"]["model"]
    traced = proj.cli("trace", f"models:/{name}@champion", env=env)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    lines = traced.stdout.splitlines()
    assert lines[1] == f"  bytes    {model}"   # the sealed files' digest, not the folder's
    assert lines[2] == ("  extra    registered_model_meta (not sealed with the model: added by "
                        "the registry or a loader, not part of its bytes)")
    assert lines[-1] == "traced: the registered bytes are the candidate's model"
    shown = json.loads(proj.cli("trace", f"models:/{name}/1", "--format", "json",
                                env=env).stdout)
    assert (shown["ok"], shown["extra_files"], shown["candidate"]) == (
        True, ["registered_model_meta"], cand)
    # one sealed file replaced: tampering, whatever else the folder holds
    (source / "weights.txt").write_text("999")
    traced = proj.cli("trace", f"models:/{name}@champion", "--format", "json", env=env)
    assert traced.returncode == 1, traced.stdout + traced.stderr
    found = json.loads(traced.stdout)
    assert [x["code"] for x in found["problems"]] == ["MP754", "MP755"]
    assert found["problems"][0]["message"].endswith(
        "; of the files its bundle sealed: weights.txt changed")
    # and one sealed file gone
    (source / "weights.txt").unlink()
    traced = proj.cli("trace", f"models:/{name}@champion", "--format", "json", env=env)
    assert traced.returncode == 1
    assert json.loads(traced.stdout)["problems"][0]["message"].endswith(
        "; of the files its bundle sealed: weights.txt missing")
