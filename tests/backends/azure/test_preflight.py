"""The pre-flight against the workspace (backends/azure/preflight.py): every finding, through
the real MLClient against the loopback Azure ML service, each with a triggering and a clean
case; throttling, an unreachable workspace, and the requests a 100-step pipeline costs."""
from __future__ import annotations

import json
import re
from urllib.parse import unquote

import pytest

from backends.azure.azure_helpers import ROOT, WS
from mlpipe.backends.azure.preflight import needs_of, registered, run_preflight
from mlpipe.backends.azure.service import MLClientService
from mlpipe.errors import AzureError
from mlpipe.loader import load_spec

PF = ROOT / "tests" / "fixtures" / "azure" / "preflight"
RAW = {"raw": "azureml:defect-images:1"}
WITH_MLPIPE = "dependencies:\n- python=3.11\n- pip:\n  - mlpipe-aml==0.1.0\n"
GOOD = WITH_MLPIPE + "  - mlflow-skinny==2.18.0\n  - azureml-mlflow==1.57.0\n"


def spec(name):
    path = PF / "registered.yml" if name == "registered" else f"{PF / 'pf.py'}:{name}"
    loaded, found = load_spec(str(path))
    assert not found
    return loaded


def preflight(service, name, inputs=RAW, **kw):
    return run_preflight(spec(name), service.workspace, service.client, inputs=inputs, **kw)


def found(result):
    return sorted((d.code, d.severity.value, d.step, d.message) for d in result.diagnostics)


@pytest.fixture
def workspace(azureml):
    azureml.add_environment("good-env", "1", conda_file=GOOD)
    azureml.add_environment("defect-cpu", "4", conda_file=GOOD)  # image-only by default: MP861
    return azureml


def test_a_pipeline_the_workspace_can_run_is_clean(workspace, service):
    result = preflight(service, "clean")
    assert found(result) == [] and result.resolved == {}


def test_each_compute_exists_has_the_declared_size_and_enough_nodes(workspace, service):
    assert found(preflight(service, "computes")) == [
        ("MP851", "error", "no_cluster", "compute 'cpu-clustr', which steps 'no_cluster' run on, "
                                         "does not exist in the workspace"),
        ("MP852", "error", "wrong_sku", "step 'wrong_sku' declares compute 'gpu-cluster' as "
                                        "Standard_NC6s_v3, but the workspace's 'gpu-cluster' is "
                                        "Standard_NC24rs_v3"),
        ("MP853", "error", "too_many", "step 'too_many' asks for 8 instances, but compute "
                                       "'cpu-cluster' scales to at most 4 node(s): the job would "
                                       "wait in the queue for nodes it can never get"),
    ]
    first = preflight(service, "computes").diagnostics[0]
    assert first.file.endswith("pf.py") and first.line and first.hint


def test_a_default_compute_that_does_not_exist(workspace, service):
    result = preflight(service, "clean", default_compute="big-cluster")
    assert [(d.code, d.message) for d in result.diagnostics] == [
        ("MP851", "compute 'big-cluster', the job's default compute, does not exist in the "
                  "workspace")]


def test_serverless_sizes_exist_and_their_family_has_quota(workspace, service):
    assert found(preflight(service, "serverless")) == [
        ("MP854", "error", "odd_size", "serverless steps 'odd_size' ask for VM size "
                                       "Standard_XYZ_v9, which the workspace's region does not "
                                       "offer"),
        ("MP855", "error", "no_quota", "step 'no_quota' needs 96 vCPUs of "
                                       "standardNDASv4_A100Family (1 x Standard_ND96asr_v4, 96 "
                                       "vCPUs each), but the subscription's quota for the family "
                                       "in this region is 0: the job can never start"),
    ]
    workspace.set_usage("standardNCSv3Family", 40, 48)
    assert [(d.code, d.severity.value, d.message) for d in
            preflight(service, "serverless").diagnostics if d.step == "busy_gpu"] == [
        ("MP856", "warning", "step 'busy_gpu' needs 24 vCPUs of standardNCSv3Family (1 x "
                             "Standard_NC24rs_v3), and 40 of the family's 48 are in use now: the "
                             "job waits until 16 more are free")]


def test_environment_versions_exist_and_latest_is_resolved_and_said(workspace, service):
    workspace.add_environment("defect-cpu", "5")
    workspace.add_environment("train-env", "2", conda_file="dependencies:\n- pip:\n  - numpy\n")
    workspace.add_environment("track-env", "1", conda_file=WITH_MLPIPE + "  - mlflow>=2.16\n")
    result = preflight(service, "environments")
    assert result.resolved == {"azureml:defect-cpu@latest": "azureml:defect-cpu:5"}
    got = found(result)
    assert got[0] == ("MP857", "error", "no_env",
                      "environment azureml:defect-cpu:40 (steps 'no_env') does not exist in the "
                      "workspace: it has no 'defect-cpu' with version 40")
    assert ("MP858", "info", "latest_env",
            "environment azureml:defect-cpu@latest names version 5 today (recorded with the "
            "run); a later submission may get another") in got
    assert ("MP859", "error", "bare_env",
            "environment azureml:train-env:2, which steps 'bare_env' run their bodies in with "
            "`python -m mlpipe.runtime.step`, has a conda file that lists no mlpipe-aml "
            "(mlpipe's distribution): the job would fail with 'No module named mlpipe'") in got
    mlflow = [m for c, _, s, m in got if c == "MP860"]
    assert mlflow == [
        "environment azureml:track-env:1 (steps 'mlflow_env') lists 'mlflow>=2.16', which "
        "allows MLflow 2.19.0: the Azure ML tracking server rejected MLflow 2.19 and later "
        "(azureml-examples PR #3888), so the steps' metrics would not reach the workspace",
        "environment azureml:track-env:1 (steps 'mlflow_env') lists an MLflow client but not "
        "azureml-mlflow: MLflow cannot open the workspace's azureml:// tracking URI without "
        "that plugin, so the steps' metrics would not reach the workspace"]
    # image-only environments: their contents cannot be read, said once per environment
    assert [(c, s) for c, _, s, _ in got if c == "MP861"] == [("MP861", "latest_env")]


@pytest.mark.parametrize("conda, codes", [
    (GOOD, []),
    (WITH_MLPIPE + "  - mlflow-skinny<2.19\n  - azureml-mlflow\n", []),
    (WITH_MLPIPE + "  - mlflow==2.21.0\n  - azureml-mlflow\n", ["MP860"]),
    (WITH_MLPIPE + "  - mlflow\n  - azureml-mlflow\n", ["MP860"]),
    (WITH_MLPIPE.replace("- python=3.11\n", "- mlflow=2.20\n") + "  - azureml-mlflow\n",
     ["MP860"]),
    ("dependencies:\n- pip:\n  - ./dist/mlpipe_aml-0.1.0-py3-none-any.whl\n", []),
    ("dependencies:\n- pip:\n  - mlpipe-extras\n", ["MP859"]),
    # the package index gives "mlpipe" to another project
    ("dependencies:\n- pip:\n  - mlpipe==0.1.0\n", ["MP859"]),
])
def test_the_environment_rule_read_from_its_conda_file(workspace, service, conda, codes):
    workspace.add_environment("good-env", "1", conda_file=conda)
    assert [d.code for d in preflight(service, "clean").diagnostics] == codes


def test_data_asset_versions_exist_and_latest_is_resolved(workspace, service):
    assert found(preflight(service, "data", inputs={"raw": "azureml:defect-images:9"})) == [
        ("MP857", "error", None, "data asset azureml:defect-images:9 (pipeline input 'raw') "
                                 "does not exist in the workspace: it has no 'defect-images' "
                                 "with version 9")]
    result = preflight(service, "data", inputs={"raw": "azureml:defect-split@latest"})
    assert result.resolved == {"azureml:defect-split@latest": "azureml:defect-split:2"}
    assert [d.code for d in result.diagnostics] == ["MP858"]
    assert preflight(service, "data", inputs={"raw": "azureml:defect-split:1"}).diagnostics == []
    assert preflight(service, "data", inputs={"raw": "data/raw"}).diagnostics == []


def test_a_model_input_is_asked_of_the_model_registry(workspace, service):
    """``azureml:NAME:V`` bound to a model input names a registered model, not a data asset
    (recordings.MODEL_LATEST: a label through ``models/NAME/versions``, newest first)."""
    from loopback.azureml.service import Asset

    given = {"raw": "azureml:defect-images:1", "model": "azureml:defect:2"}
    assert found(preflight(service, "scoring", inputs=given)) == [
        ("MP857", "error", None, "model azureml:defect:2 (pipeline input 'model') does not "
                                 "exist in the workspace: it has no 'defect' with version 2")]
    for version in ("1", "2"):
        workspace.assets[("models", "defect", version)] = Asset("models", "defect", version, {
            "properties": {"modelType": "mlflow_model", "modelUri": "azureml://datastores/"
                           f"workspaceblobstore/paths/models/defect/{version}"}})
    assert found(preflight(service, "scoring", inputs=given)) == []
    before = len(workspace.requests)
    result = preflight(service, "scoring", inputs={**given, "model": "azureml:defect@latest"})
    assert result.resolved == {"azureml:defect@latest": "azureml:defect:2"}
    assert [r.path.rsplit("/", 2)[-2:] for r in workspace.requests[before:]
            if "/models/" in r.path] == [["defect", "versions"]]
    assert not any("/data/defect/" in r.path for r in workspace.requests[before:])


def test_registered_component_versions_exist(workspace, service):
    workspace.add_component("score", "2")
    workspace.add_component("score", "3")
    result = preflight(service, "registered", inputs={})
    assert result.resolved == {"azureml:score@latest": "azureml:score:3"}
    assert [(d.code, d.step) for d in result.diagnostics] == [("MP858", "rescore"),
                                                            ("MP857", "missing"),
                                                            ("MP862", "shared")]
    assert "component azureml:score:9 (steps 'missing') does not exist" in \
        result.diagnostics[1].message
    # a registry component is said, not asked of the workspace
    assert result.diagnostics[2].message.startswith(
        "azureml://registries/azureml/components/score_step/labels/latest (step 'shared') is a "
        "registry asset: not checked")
    assert "az ml component show --registry-name azureml --name score_step --label latest" in \
        result.diagnostics[2].hint


def test_an_environment_by_label_is_resolved_through_the_versions_list(workspace, service):
    """azure-ai-ml resolves a label through the versions list, newest first, one of them
    (recordings.ENVIRONMENT_LATEST: ``GET .../environments/NAME/versions?$orderBy=createdtime
    desc&$top=1``); never ``.../versions/@latest``, which the service does not receive."""
    workspace.add_environment("defect-cpu", "5", conda_file=GOOD)
    before = len(workspace.requests)
    result = preflight(service, "labels")
    sent = workspace.requests[before:]
    assert result.resolved == {"azureml:defect-cpu@latest": "azureml:defect-cpu:5"}
    assert [(d.code, d.step) for d in result.diagnostics] == [("MP858", "label_env")]
    envs = [(r.path.rsplit("/workspaces/ws-defects/", 1)[1], r.query) for r in sent
            if "/environments/" in r.path]
    assert [(path, unquote(query).split("&", 1)[1]) for path, query in envs] == [
        ("environments/defect-cpu/versions", "$orderBy=createdtime desc&$top=1")]
    assert not any("@" in r.path or "azureml:" in r.path for r in sent)
    asked = [r for r in sent if not r.path.startswith("/metadata/")]
    assert result.requests == len(asked), [r.path for r in asked]


REGISTRY = "azureml://registries/azureml/environments/sklearn-1.5"


@pytest.mark.parametrize("case, pipeline, fault, expected", [
    # MP862: a registry asset is said, not asked of the workspace
    ("trigger", "registries", None, [
        ("MP862", "info", "registry_env",
         f"{REGISTRY}/labels/latest (step 'registry_env') is a registry asset: not checked, as "
         "it does not live in the workspace the pre-flight asks"),
        ("MP862", "info", "registry_pinned",
         f"{REGISTRY}/versions/3 (step 'registry_pinned') is a registry asset: not checked, as "
         "it does not live in the workspace the pre-flight asks")]),
    ("clean", "clean", None, []),
    # MP863: a VM sizes lookup that fails is "could not check", never MP854 "not offered"
    ("trigger", "serverless", r"GET .*/vmSizes$", [
        ("MP863", "info", "odd_size", "could not check the region's VM sizes for steps "
                                      "'odd_size', 'no_quota', 'busy_gpu': the workspace did "
                                      "not answer (404 ResourceNotFound: The resource was not "
                                      "found.); whether it offers each size and the quota "
                                      "they need are unknown")]),
    ("trigger", "serverless", r"GET .*/usages$", [
        ("MP854", "error", "odd_size", "serverless steps 'odd_size' ask for VM size "
                                       "Standard_XYZ_v9, which the workspace's region does not "
                                       "offer"),
        ("MP863", "info", "odd_size", "could not check the subscription's quota for steps "
                                      "'odd_size', 'no_quota', 'busy_gpu': the workspace did "
                                      "not answer (404 ResourceNotFound: The resource was not "
                                      "found.); whether the VM families have room is "
                                      "unknown")]),
])
def test_what_the_preflight_could_not_check_is_said_not_guessed(workspace, service, case,
                                                                pipeline, fault, expected):
    if fault:
        workspace.fail(404, fault, times=None)
    before = len(workspace.requests)
    result = preflight(service, pipeline)
    assert found(result) == expected
    for d in result.diagnostics:
        assert d.hint
    if pipeline == "registries":
        assert [d.hint for d in result.diagnostics] == [
            "check it with `az ml environment show --registry-name azureml --name sklearn-1.5 "
            "--label latest`; Azure ML resolves it when the job is submitted",
            "check it with `az ml environment show --registry-name azureml --name sklearn-1.5 "
            "--version 3`; Azure ML resolves it when the job is submitted"]
    assert not any("registries" in r.path or "azureml:" in r.path
                   for r in workspace.requests[before:])


def test_a_missing_compute_with_an_empty_404_body_is_compute_not_found(workspace, service):
    """The service answers a missing compute 404 with an empty body (docs/azure.md): the
    pre-flight's MP851, not a failed lookup."""
    before = len(workspace.requests)
    result = preflight(service, "computes")
    gone = [r for r in workspace.requests[before:] if r.path.endswith("/computes/cpu-clustr")]
    assert [r.status for r in gone] == [404]
    assert ("MP851", "no_cluster") in [(d.code, d.step) for d in result.diagnostics]


def test_throttling_is_waited_out_with_retry_after(workspace, service):
    workspace.fail(429, r"GET .*/computes/", times=2, retry_after=0)
    assert found(preflight(service, "clean")) == []
    assert [r.status for r in workspace.requests if "/computes/" in r.path] == [429, 429, 200]


def test_throttling_past_the_retries_is_one_line(workspace, service):
    workspace.fail(429, r"GET .*/computes/", times=None, retry_after=0)
    with pytest.raises(AzureError, match=r"^throttled: Azure ML kept answering 429 Too Many "
                                         r"Requests while mlpipe tried to look up the compute"):
        preflight(service, "clean")


def test_an_unreachable_or_missing_workspace_is_one_line(azureml, monkeypatch):
    from mlpipe.backends.azure.workspace import Workspace

    other = Workspace(azureml.subscription_id, azureml.resource_group, "ws-other")
    gone = MLClientService(other, credential=azureml.credential())
    with pytest.raises(AzureError, match=r"^no workspace: workspace 'ws-other' .* was not found"):
        run_preflight(spec("clean"), other, gone.client, inputs=RAW)
    monkeypatch.setenv("ARM_CLOUD_METADATA_URL", "https://127.0.0.1:9/metadata/endpoints")
    with pytest.raises(AzureError, match=r"^no network: "):
        far = MLClientService(WS, credential=azureml.credential())
        run_preflight(spec("clean"), WS, far.client, inputs=RAW)


def test_a_100_step_pipeline_costs_one_request_per_distinct_name(workspace, service):
    before = len(workspace.requests)
    result = preflight(service, "many", inputs={"raw": "azureml:defect-images@latest"})
    sent = [r for r in workspace.requests[before:] if not r.path.startswith("/metadata/")]
    # the workspace, its one compute, its one environment, the data asset's latest (2)
    assert len(sent) == 5, [r.path for r in sent]
    assert result.requests == len(sent)
    assert [d.code for d in result.diagnostics] == ["MP858"]


def test_registered_references_are_read_as_azure_ml_spells_them():
    assert registered("azureml:env:3") == ("env", "3", None)
    assert registered("azureml:env@prod") == ("env", None, "prod")
    assert registered("azureml:env") == ("env", None, "latest")
    assert registered("azureml://registries/azureml/environments/x/versions/1") is None
    assert registered("data/raw") is None and registered(3) is None
    assert needs_of(spec("many")).computes.keys() == {"cpu-cluster"}


def test_submit_runs_the_preflight_first_and_records_what_latest_named(workspace, monkeypatch,
                                                                       tmp_path):
    from click.testing import CliRunner

    from mlpipe.cli import azure as cli_azure
    from mlpipe.cli import main

    monkeypatch.setattr(cli_azure, "_credential", lambda: workspace.credential())
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    flags = ["--workspace", WS.workspace_name, "--resource-group", WS.resource_group,
             "--subscription", WS.subscription_id]
    target = f"{PF / 'pf.py'}:computes"
    done = CliRunner().invoke(main, ["submit", target, "--target", "azure", "--input",
                                     "raw=azureml:defect-images:1", *flags])
    assert done.exit_code == 1, done.output
    assert "error[MP851] compute-not-found" in done.output
    assert workspace.pipelines == []  # nothing was sent
    checked = CliRunner().invoke(main, ["check", target, "--input", "raw=azureml:defect-images:1",
                                        *flags])
    assert checked.exit_code == 1 and "MP853" in checked.output
    offline = CliRunner().invoke(main, ["check", target])
    assert "MP851" not in offline.output
    workspace.add_environment("defect-cpu", "5")
    latest = f"{PF / 'pf.py'}:resolving"
    done = CliRunner().invoke(main, ["submit", latest, "--target", "azure", "--input",
                                     "raw=azureml:defect-images:1", *flags])
    assert done.exit_code == 0, done.output
    tags = workspace.last_job.tags
    assert json.loads(tags["mlpipe.resolved"]) == {
        "azureml:defect-cpu@latest": "azureml:defect-cpu:5"}
    run_id = re.search(r"submitted run (\S+)", done.output).group(1)
    from mlpipe.evidence import open_store
    from mlpipe.evidence.storage import models as m

    store = open_store()
    with store.session() as s:
        options = s.get(m.Run, run_id).options
    store.close()
    assert options["preflight"]["resolved"] == {
        "azureml:defect-cpu@latest": "azureml:defect-cpu:5"}


def test_submit_offline_skips_the_preflight(workspace, monkeypatch, tmp_path):
    from click.testing import CliRunner

    from mlpipe.cli import azure as cli_azure
    from mlpipe.cli import main

    monkeypatch.setattr(cli_azure, "_credential", lambda: workspace.credential())
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, [
        "submit", f"{PF / 'pf.py'}:data", "--target", "azure", "--offline",
        "--input", "raw=azureml:defect-images:1", "--workspace", WS.workspace_name,
        "--resource-group", WS.resource_group, "--subscription", WS.subscription_id])
    assert done.exit_code == 0, done.output
    assert not any("/computes/" in r.path or "/vmSizes" in r.path for r in workspace.requests)


@pytest.mark.parametrize("pipeline, step, written, loaded", [
    ("labels", "label_env", "azureml:defect-cpu@latest", "defect-cpu@latest"),
    ("labels", "label_version", "azureml:defect-cpu@latest", "defect-cpu@latest"),
    ("registries", "registry_env", f"{REGISTRY}/labels/latest", f"{REGISTRY}/labels/latest"),
    ("registries", "registry_pinned", f"{REGISTRY}/versions/3", f"{REGISTRY}/versions/3"),
])
def test_compile_writes_each_reference_as_azure_ml_reads_it(tmp_path, pipeline, step, written,
                                                            loaded):
    """The export spells the reference the pre-flight asked about, once (never
    ``azureml:defect-cpu@latest@latest`` or ``.../labels/latest/labels/latest``), and
    azure-ai-ml loads it back as that reference."""
    from azure.ai.ml import load_component

    from mlpipe.backends.azure.export import write_export

    write_export(spec(pipeline), tmp_path, inputs=RAW)
    component = tmp_path / "components" / f"{step}.yml"
    assert f"environment: {written}\n" in component.read_text()
    assert load_component(component).environment == loaded
