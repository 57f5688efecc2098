"""The example pipelines run here leave step records with no false alarm: nothing read outside
the declared inputs, nothing written outside the outputs, every output digested as filed."""
import pytest
from sqlalchemy import select

from components.synthetic import make_dataset
from mlpipe.backends.local.executor import LocalExecutor
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.config import StoreConfig
from mlpipe.evidence.storage.store import Store


def _records(location, run_id):
    store = Store.open(location.url)
    try:
        with store.session() as s:
            rows = s.scalars(select(m.StepRun).where(m.StepRun.run_id == run_id)).all()
            return {r.step: (r.record, {a.port: a.artifact.digest for a in r.artifacts
                                        if a.direction == "output"}) for r in rows}
    finally:
        store.close()


def _run(tmp_path, graph, **options):
    raw, split = make_dataset(tmp_path / "data", per_class=12)
    location = StoreConfig(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "evidence")
    result = LocalExecutor(location, stream=None, **options).submit(
        graph, inputs={"raw": str(raw), "split": str(split)}, params={"epochs": 2})
    assert result.status == "succeeded"
    return _records(location, result.run_id)


def _no_false_alarms(records):
    for step, (found, outputs) in records.items():
        assert found is not None, step
        assert found["step"]["status"] == "succeeded", step
        for part in found["ranks"]:
            assert part["reads_outside_inputs"] == [], (step, part["reads_outside_inputs"])
            assert part["writes_elsewhere"] == [], (step, part["writes_elsewhere"])
        assert found["step"]["hidden_inputs"] == [], step
        if len(found["ranks"]) > 1:   # none of the writer or copies checks fires on the example
            from mlpipe.judgements.coordination import check_coordination
            report = check_coordination(found["ranks"], world_size=len(found["ranks"]),
                                        step_part=found["step"])
            assert report.findings == (), (step, [d.render() for d in report.findings])
        for port, digest in outputs.items():
            assert found["step"]["outputs"][port]["digest"] == digest, (step, port)


@pytest.mark.slow
def test_the_single_process_example_has_no_false_alarms(tmp_path):
    from mlpipe.graph import compile_pipeline
    from pipelines.defect_classifier import defect_classifier

    records = _run(tmp_path, compile_pipeline(defect_classifier.spec))
    _no_false_alarms(records)
    writes = records["prepare"][0]["step"]["writes"]
    assert [w["name"] for w in writes["labels"]] == ["labels"]
    assert {w["how"] for w in writes["examples"]} == {"observed"}


@pytest.mark.slow
def test_the_ddp_example_has_no_false_alarms(tmp_path):
    pytest.importorskip("torch")
    from mlpipe.graph import compile_pipeline
    from pipelines.defect_classifier_ddp import defect_classifier_ddp

    records = _run(tmp_path, compile_pipeline(defect_classifier_ddp.spec),
                   local_scale={"train_cnn": (1, 2)})
    _no_false_alarms(records)
    train = records["train_cnn"][0]
    assert [p["rank"] for p in train["ranks"]] == [0, 1]
    assert {p["launch"]["backend"] for p in train["ranks"]} == {"gloo"}
    # torch.save writes from native code: attributed through mark_written, by rank 0 alone
    model = {w["name"]: w for w in train["step"]["writes"]["model"]}
    assert model["model.pt"]["ranks"] == [0]


@pytest.mark.slow
def test_a_local_run_logs_each_step_to_mlflow_when_a_tracking_uri_is_set(
        tmp_path, monkeypatch, mlflow_server):
    from mlflow.tracking import MlflowClient

    from mlpipe.graph import compile_pipeline
    from pipelines.defect_classifier import defect_classifier

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", f"local-{tmp_path.name}")
    records = _run(tmp_path, compile_pipeline(defect_classifier.spec))
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name(f"local-{tmp_path.name}")
    runs = {r.data.tags["mlpipe.step"]: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"prepare", "train", "evaluate"}
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    evaluate = runs["evaluate"]
    assert evaluate.data.tags["mlpipe.target"] == "local"
    assert evaluate.data.tags["mlpipe.scope.accuracy"] == "global"
    assert evaluate.data.tags["mlpipe.population.accuracy"].startswith("test")
    tracked = records["evaluate"][0]["ranks"][0]["tracking"]
    assert (tracked["run_id"], tracked["error"]) == (evaluate.info.run_id, None)
    assert tracked["logged"] == records["evaluate"][0]["ranks"][0]["metric_count"] == 4
    assert 0.0 <= evaluate.data.metrics["accuracy"] <= 1.0
