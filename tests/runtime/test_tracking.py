"""MLflow as the metric channel: log_metric also reaches a real tracking server (started on
loopback by the tests) with mlpipe's tags; only rank 0 speaks for a global metric."""
import os
import sys
from pathlib import Path

import pytest

from mlpipe.backends.local.launcher import launch
from mlpipe.distribution import PyTorch
from mlpipe.runtime import record, tracking
from timing import limit

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "runtime"

pytestmark = pytest.mark.slow


def _client(uri):
    from mlflow.tracking import MlflowClient
    return MlflowClient(uri)


def _new_run(uri, name="mlpipe-tests"):
    client = _client(uri)
    found = client.get_experiment_by_name(name)
    experiment = found.experiment_id if found else client.create_experiment(name)
    return client.create_run(experiment).info.run_id


def _env(uri, run_id, tmp_path, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLPIPE_", "MLFLOW_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(FIXTURES), str(ROOT)]),
               MLFLOW_TRACKING_URI=uri, **extra)
    if run_id:
        env["MLFLOW_RUN_ID"] = run_id
    return env


def _argv(tmp_path):
    return [sys.executable, "-m", "mlpipe.runtime.step", "--component",
            "record_steps:logs_metrics", "--output", f"out={tmp_path / 'out'}",
            "--record", str(tmp_path / "record")]


def test_two_ranks_log_to_one_run_with_the_convention_sync_reads(mlflow_server, tmp_path):
    (tmp_path / "out").mkdir()
    run_id = _new_run(mlflow_server)
    launch(_argv(tmp_path), distribution=PyTorch(processes_per_node=2), instances=1,
           env=_env(mlflow_server, run_id, tmp_path), cwd=str(tmp_path),
           log_dir=tmp_path / "logs", timeout=limit(120), require_coordination=False)
    run = _client(mlflow_server).get_run(run_id)
    assert run.data.metrics == {"accuracy": 0.75, "shard_loss.rank0": 0.25,
                                "shard_loss.rank1": 1.25}
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("mlpipe.")}
    assert tags == {
        "mlpipe.scope.accuracy": "global", "mlpipe.metric.accuracy": "accuracy",
        "mlpipe.rank.accuracy": "0", "mlpipe.population.accuracy": "test, 4 examples",
        "mlpipe.scope.shard_loss.rank0": "partial", "mlpipe.metric.shard_loss.rank0": "shard_loss",
        "mlpipe.rank.shard_loss.rank0": "0", "mlpipe.population.shard_loss.rank0": "shard 0",
        "mlpipe.scope.shard_loss.rank1": "partial", "mlpipe.metric.shard_loss.rank1": "shard_loss",
        "mlpipe.rank.shard_loss.rank1": "1", "mlpipe.population.shard_loss.rank1": "shard 1"}
    history = _client(mlflow_server).get_metric_history(run_id, "shard_loss.rank1")
    assert [(h.step, h.value) for h in history] == [(0, 1.5), (1, 1.25)]
    ranks = record.load_record(tmp_path / "record")["ranks"]
    assert [p["tracking"]["logged"] for p in ranks] == [3, 2]
    # rank 1's "global" accuracy never reached MLflow, but the record keeps it for MP526
    assert [p["tracking"]["not_logged_global_from_rank"] for p in ranks] == [0, 1]
    assert [m["value"] for m in ranks[1]["metrics"] if m["name"] == "accuracy"] == [0.76]


def test_without_a_run_id_the_step_opens_and_closes_its_own(mlflow_server, tmp_path):
    import subprocess

    (tmp_path / "out").mkdir()
    env = _env(mlflow_server, None, tmp_path, MLFLOW_EXPERIMENT_NAME="own-runs")
    done = subprocess.run(_argv(tmp_path), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    [part] = record.load_record(tmp_path / "record")["ranks"]
    run = _client(mlflow_server).get_run(part["tracking"]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.metrics["accuracy"] == 0.75


def test_an_unreachable_server_never_fails_the_step(tmp_path):
    import subprocess

    (tmp_path / "out").mkdir()
    env = _env("http://127.0.0.1:9", "0" * 32, tmp_path, MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
               MLFLOW_HTTP_REQUEST_TIMEOUT="2")
    done = subprocess.run(_argv(tmp_path), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("mlpipe: warning: metrics do not reach MLflow:") == 1
    [part] = record.load_record(tmp_path / "record")["ranks"]
    assert part["tracking"]["logged"] == 0
    assert part["tracking"]["error"].startswith("logging to run 000")
    assert len(part["metrics"]) == 3


def test_without_mlflow_installed_the_record_says_so(tmp_path):
    import subprocess

    (tmp_path / "out").mkdir()
    shadow = tmp_path / "shadow" / "mlflow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named mlflow')\n")
    env = _env("http://127.0.0.1:9", "0" * 32, tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "shadow"), env["PYTHONPATH"]])
    done = subprocess.run(_argv(tmp_path), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    [part] = record.load_record(tmp_path / "record")["ranks"]
    assert part["tracking"]["error"] == ("mlflow is not installed here (pip install "
                                         "'mlpipe-aml[mlflow]'; on Azure ML also azureml-mlflow)")


def test_metric_keys_and_tags():
    assert tracking.metric_key("loss", "partial", 2) == "loss.rank2"
    assert tracking.metric_key("loss", "global", 0) == "loss"
    assert tracking.metric_tags({"name": "acc", "scope": "global", "rank": None,
                                 "population": None, "reduced_over": 4}) == {
        "mlpipe.scope.acc": "global", "mlpipe.metric.acc": "acc",
        "mlpipe.reduced_over.acc": "4"}
    assert tracking._safe_uri("https://user:secret@host:5000/x") == "https://host:5000/x"
