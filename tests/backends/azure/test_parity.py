"""Parity: a pipeline submitted to the loopback Azure ML service through the real MLClient,
its steps' exported command lines run as Azure ML runs them (its variables, the local launcher
for the ranks, MLflow on a real ``mlflow server`` on loopback), their outputs and MLflow runs
handed to the loopback workspace as the service would hold them, then synced: the same
evidence as a local run of the same pipeline (the same keys, the same findings); only
``ran_on`` (and the run's backend options) tell them apart.

Every call of the sync goes over the wire to the loopback, the output downloads included:
``jobs.download`` reads the job's outputs from run history, resolves them through the data and
model planes, and downloads the files from the storage account's blob host, reached through
the loopback's proxy (docs/azure.md, "How it is tested").
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure.command import RECORD_PORT
from mlpipe.backends.azure.export import export_pipeline
from mlpipe.backends.azure.ingest import outputs_to_fetch, record_sync
from mlpipe.backends.azure.service import MLClientService
from mlpipe.backends.azure.submit import submit_to_azure
from mlpipe.backends.azure.sync import sync_run
from mlpipe.backends.azure.workspace import Workspace
from mlpipe.backends.local.executor import LocalExecutor
from mlpipe.backends.local.launcher import launch
from mlpipe.backends.local.script import render_command
from mlpipe.errors import LaunchFailed, StepFailed
from mlpipe.evidence.bundles.bundle import build
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.config import StoreConfig
from mlpipe.evidence.storage.roots import ArtifactRoots
from mlpipe.evidence.storage.store import Store
from mlpipe.graph import FromInput, FromLiteral, FromStep, compile_pipeline

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "runtime"

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))
    for name in list(os.environ):
        if name.startswith(("MLFLOW_", "MLPIPE_")):
            monkeypatch.delenv(name)


def _location(tmp_path: Path) -> StoreConfig:
    return StoreConfig(f"sqlite:///{tmp_path / 'store.sqlite'}", tmp_path / "evidence")


def run_locally(spec, inputs, params, tmp_path, **options):
    location = _location(tmp_path)
    try:
        result = LocalExecutor(location, stream=None, **options).submit(
            compile_pipeline(spec), inputs=inputs, params=params)
    except StepFailed as exc:
        return location, None, exc.message
    return location, result.candidate_id, None


def _azure_env(job: str, mlflow_uri: str, workspace: str) -> dict[str, str]:
    """What Azure ML sets for a job's processes (the launcher adds the rank variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "MLPIPE_"))}
    env.update(MLFLOW_TRACKING_URI=mlflow_uri, MLFLOW_RUN_ID=job, AZUREML_RUN_ID=job,
               AZUREML_ARM_WORKSPACE_NAME=workspace, PYTHONUNBUFFERED="1")
    return env


def _hand_over(child, client, run_id: str, outputs: dict[str, str]) -> None:
    """What Azure ML holds for a finished job: its MLflow run (here: the real server's run the
    step logged to, copied into the workspace's) and its outputs in the datastore."""
    run = client.get_run(run_id)
    for key in run.data.metrics:
        for point in client.get_metric_history(run_id, key):
            child.log_metric(key, point.value, step=point.step, timestamp=point.timestamp)
    for key, value in run.data.tags.items():
        if key.startswith("mlpipe."):
            child.set_tag(key, value)
    for port, path in outputs.items():
        root = Path(path)
        if root.is_dir():
            files = {p.relative_to(root).as_posix(): p.read_bytes()
                     for p in root.rglob("*") if p.is_file()}
        elif root.exists():
            files = {root.name: root.read_bytes()}
        else:
            files = {}
        child.set_output(port, files=files)


def run_as_azure(spec, inputs, params, tmp_path, mlflow_uri, azureml, scale=None):
    """Submit to the loopback (recorded), run every step's exported command line in order,
    hand each finished job's outputs and MLflow run to the loopback, then sync. Returns
    (location, candidate id, sync outcome, {step: stderr})."""
    from mlflow.tracking import MlflowClient

    location = _location(tmp_path)
    store = Store.open(location.url)
    service = MLClientService(Workspace(azureml.subscription_id, azureml.resource_group,
                                        azureml.workspace_name), credential=azureml.credential())
    values = {**inputs, **{k: str(v) for k, v in params.items()}}
    azureml.add_environment("parity-env", "1")
    # the data is a registered asset in the workspace; the steps here read its local copy
    references = {}
    for name, path in inputs.items():
        kind = "uri_folder" if Path(path).is_dir() else "uri_file"
        azureml.add_data(f"parity-{name}", "1", kind)
        references[name] = f"azureml:parity-{name}:1"
    submitted = submit_to_azure(spec, service.workspace, service,
                                inputs={**values, **references}, store=store)
    pipeline_job = azureml.job(submitted.job_name)
    graph = compile_pipeline(spec)
    export = export_pipeline(spec, out_dir=tmp_path / "build", inputs={**values, **references})
    client = MlflowClient(mlflow_uri)
    experiment = client.get_experiment_by_name(spec.name)
    experiment_id = (experiment.experiment_id if experiment
                     else client.create_experiment(spec.name))
    produced: dict[tuple[str, str], str] = {}
    errors, failed = {}, False
    for sid in (s for s in nx.topological_sort(graph.dag) if s in graph.steps):
        if failed:
            break
        node = graph.steps[sid]
        comp = node.component
        child = pipeline_job.child(sid).start()
        job = client.create_run(experiment_id, run_name=sid).info.run_id  # the step's MLflow run
        doc = export.files[export.pipeline["jobs"][sid]["component"].removeprefix("./")]
        given_in, given_params = {}, {}
        for key, endpoint in node.bindings.items():
            if isinstance(endpoint, FromStep):
                given_in[key] = produced[(endpoint.node, endpoint.port)]
            elif isinstance(endpoint, FromInput):
                target = given_in if endpoint.name in inputs else given_params
                target[key] = values.get(endpoint.name, spec.input(endpoint.name).default)
            elif isinstance(endpoint, FromLiteral):
                given_params[key] = endpoint.value
        for param in comp.params:
            given_params.setdefault(param.name, param.default)
        outputs = {}
        for name, kind in [(p.name, p.kind) for p in comp.outputs] + [
                (RECORD_PORT, AssetType.URI_FOLDER)]:
            path = tmp_path / "datastore" / job / name
            if kind is AssetType.URI_FILE:
                path.parent.mkdir(parents=True, exist_ok=True)
            else:
                path.mkdir(parents=True)   # Azure ML mounts an output folder before the job
            outputs[name] = str(path)
        command = render_command(doc["command"], inputs=given_in, outputs=outputs,
                                 params=given_params)
        argv = [sys.executable, *shlex.split(command)[1:]]    # `python ...`
        cwd = (tmp_path / "build" / "components" / doc["code"]).resolve()
        env = _azure_env(job, mlflow_uri, azureml.workspace_name)
        if comp.distribution is not None:
            dist, instances = comp.distribution, comp.instances
            if scale is not None and sid in scale:
                instances, per_node = scale[sid]
                dist = type(dist)(**{**{f: getattr(dist, f) for f in dist.__slots__},
                                     "processes_per_node": per_node})
            try:
                launch(argv, distribution=dist, instances=instances, env=env, cwd=str(cwd),
                       log_dir=tmp_path / "logs" / sid, timeout=900,
                       require_coordination=False)
                ok = True
            except LaunchFailed as exc:
                ok, errors[sid] = False, exc.log_tail
        else:
            done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=900)
            ok, errors[sid] = done.returncode == 0, done.stderr
        client.set_terminated(job, "FINISHED" if ok else "FAILED")
        failed = not ok
        for name, path in outputs.items():
            produced[(sid, name)] = path
        _hand_over(child, client, job, outputs)
        if ok:
            child.complete()
        else:
            child.fail()
    if failed:
        pipeline_job.fail()
    else:
        pipeline_job.complete()
    with store.session() as s:
        options = dict(s.get(m.Run, submitted.run_id).options)
    synced = sync_run(submitted.job_name, service, fetch=outputs_to_fetch(options),
                      into=tmp_path / "downloads")
    outcome = record_sync(store, submitted.run_id, synced)
    store.close()
    return location, outcome.candidate_id, outcome, errors


def bundle(location, candidate):
    store = Store.open(location.url)
    try:
        with store.session() as s:
            # the model is read from this test's own artifact root, as its executor wrote it
            return build(s, s.get(m.CandidateRow, candidate),
                         roots=ArtifactRoots(location.artifacts))
    finally:
        store.close()


def shape(value, at=""):
    """Every key path of a JSON value, all the way down (``steps[].topology.ran``), with
    the kind found there (lists: the union of their items')."""
    if isinstance(value, dict):
        found = {(at, "object")}
        for key, item in value.items():
            found |= shape(item, f"{at}.{key}")
        return found
    if isinstance(value, list):
        found = {(at, "array")}
        for item in value:
            found |= shape(item, f"{at}[]")
        return found
    return {(at, "value")}   # null where a backend cannot know it (a rank's join time)


def same_shape(azure, local):
    a, b = shape(_comparable(azure)), shape(_comparable(local))
    assert (sorted(a - b), sorted(b - a)) == ([], [])


def _comparable(statement):
    """The bundle without what is the backend's own business: the run's options (executor,
    workspace, job names), the local scale-down note, and the compute each step ran on."""
    p = json.loads(json.dumps(statement["predicate"]))
    p["run"].pop("options")
    for step in p["steps"]:
        step["topology"].pop("local_scale", None)
        step["compute"].pop("ran_on")
    return p


def findings(statement):
    return [(f["code"], f["step"], f["message"]) for f in statement["predicate"]["findings"]]


def _data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(7):
        (data / f"e{i}.txt").write_text(str(i))
    return {"data": str(data)}


def test_the_same_evidence_both_ways(tmp_path, mlflow_server, azureml):
    from parity_steps import parity

    inputs = _data(tmp_path)
    here, local_candidate, problem = run_locally(parity.spec, inputs, {}, tmp_path / "local")
    assert problem is None
    there, azure_candidate, outcome, errors = run_as_azure(
        parity.spec, inputs, {}, tmp_path / "azure", mlflow_server, azureml)
    assert outcome.status == "succeeded", (outcome.notes, errors)
    # the step records and the report came down from the storage account's blob host
    assert set(azureml.tunnels) == {azureml.storage_host}
    local, azure = bundle(here, local_candidate), bundle(there, azure_candidate)
    same_shape(azure, local)
    assert findings(azure) == findings(local)
    assert azure["subject"] == local["subject"]
    assert azure["predicate"]["candidate"]["model"] == local["predicate"]["candidate"]["model"]
    [coordination] = azure["predicate"]["coordination"]
    assert coordination == local["predicate"]["coordination"][0] and coordination["ok"]
    train = next(st for st in azure["predicate"]["steps"] if st["step"] == "tiny_train")
    assert train["compute"]["ran_on"] == "cpu-cluster"
    assert {(x["name"], x["rank"]) for x in train["metrics"]} == {("shard_share", 0),
                                                                  ("shard_share", 1)}
    # the interpreter that ran each step: the executor saw it here, the step record says it
    # there (the loopback service runs the exported command on this machine's Python)
    for st, mine in zip(azure["predicate"]["steps"], local["predicate"]["steps"]):
        there, here = st["interpreter"], mine["interpreter"]
        assert there["built_with"] == "azure-ml" and there["isolated"] is False
        assert there["in_declared_environment"] is (True if here["declared_environment"]
                                                     else None)
        assert there["declared_environment"] == here["declared_environment"]
        assert [there[k] for k in ("python", "version", "packages_digest", "packages")] == [
            here[k] for k in ("python", "version", "packages_digest", "packages")]


def _step_row(location, step):
    store = Store.open(location.url)
    try:
        with store.session() as s:
            row = s.query(m.StepRun).filter_by(step=step).one()
            return row.status, row.message, row.topology, row.record
    finally:
        store.close()


def test_every_rank_logging_its_shard_as_global_is_mp526_both_ways(tmp_path, mlflow_server,
                                                                    azureml):
    from parity_steps import parity

    inputs = _data(tmp_path)
    here, _, problem = run_locally(parity.spec, inputs, {"seeded": True}, tmp_path / "local")
    there, candidate, outcome, _ = run_as_azure(parity.spec, inputs, {"seeded": True},
                                                tmp_path / "azure", mlflow_server, azureml)
    assert outcome.status == "failed" and candidate is None
    local, azure = _step_row(here, "tiny_train"), _step_row(there, "tiny_train")
    assert local[0] == azure[0] == "failed"
    assert local[1] == azure[1] and problem.endswith(local[1])
    assert "error[MP526] partial-metric-logged-as-global: metric 'shard_share' was logged as " \
           "global by 2 ranks (0, 1)" in azure[1]
    assert ([f["code"] for f in azure[2]["coordination"]["findings"]]
            == [f["code"] for f in local[2]["coordination"]["findings"]] == ["MP526"])
    # MLflow heard only rank 0's "global" value; the record kept rank 1's for the check
    assert [p["tracking"]["not_logged_global_from_rank"] for p in azure[3]["ranks"]] == [0, 1]


def test_a_contract_violation_fails_the_azure_step_with_the_local_message(tmp_path,
                                                                          mlflow_server,
                                                                          azureml):
    from parity_steps import parity_contract

    inputs = _data(tmp_path)
    _, _, local_problem = run_locally(parity_contract.spec, inputs, {"split": "train"},
                                      tmp_path / "local")
    there, candidate, outcome, errors = run_as_azure(
        parity_contract.spec, inputs, {"split": "train"}, tmp_path / "azure", mlflow_server,
        azureml)
    message = ("output 'report' does not match its contract: metric 'accuracy' was computed "
               "on split 'train' but metrics-report:parity-report requires split 'test'")
    assert local_problem.endswith(f"step 'tiny_report': {message}")
    assert errors["tiny_report"].endswith(f"mlpipe: {message}\n")   # the job's own log
    assert outcome.status == "failed" and candidate is None
    store = Store.open(there.url)
    with store.session() as s:
        row = s.query(m.StepRun).filter_by(step="tiny_report").one()
        assert row.message == f"step 'tiny_report': {message}"
        assert row.record["step"]["failure"]["layer"] == "output-contract"
    store.close()


def test_the_ddp_example_leaves_the_same_evidence_both_ways(tmp_path, mlflow_server, azureml):
    pytest.importorskip("torch")
    from components.synthetic import make_dataset
    from pipelines.defect_classifier_ddp import defect_classifier_ddp

    raw, split = make_dataset(tmp_path / "data", per_class=10)
    inputs = {"raw": str(raw), "split": str(split)}
    here, local_candidate, problem = run_locally(
        defect_classifier_ddp.spec, inputs, {"epochs": 2}, tmp_path / "local",
        local_scale={"train_cnn": (1, 2)})
    assert problem is None
    there, azure_candidate, outcome, errors = run_as_azure(
        defect_classifier_ddp.spec, inputs, {"epochs": 2}, tmp_path / "azure", mlflow_server,
        azureml, scale={"train_cnn": (1, 2)})
    assert outcome.status == "succeeded", (outcome.notes, errors)
    local, azure = bundle(here, local_candidate), bundle(there, azure_candidate)
    same_shape(azure, local)
    assert findings(azure) == findings(local)
    steps = {st["step"]: st for st in azure["predicate"]["steps"]}
    assert steps["train_cnn"]["topology"]["coordination"]["ok"] is True
    assert {x["reduced_over"] for x in steps["train_cnn"]["metrics"]} == {2}
    # prepare is deterministic: the same bytes, so the same digests, both ways
    assert steps["prepare"]["outputs"] == next(
        st["outputs"] for st in local["predicate"]["steps"] if st["step"] == "prepare")
