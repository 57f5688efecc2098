"""The example's step bodies, run directly through ``component.fn`` on the synthetic data."""
import json

import pytest

from components.defect import evaluate, prepare, train
from components.synthetic import CLASSES, make_dataset


def test_prepare_train_evaluate_on_synthetic_images(tmp_path):
    raw, split = make_dataset(tmp_path / "data", per_class=40, seed=3)
    examples, labels = tmp_path / "examples", tmp_path / "labels.json"
    prepare.fn(raw=raw, split=split, examples=examples, labels=labels)
    assert json.loads(labels.read_text()) == {c: i for i, c in enumerate(CLASSES)}
    assert {p.name for p in examples.iterdir()} == {"train", "val", "test"}
    model = tmp_path / "model"
    # Run outside a step (no MLPIPE_STEP_DIR), each metric is announced and not recorded.
    with pytest.warns(RuntimeWarning, match=r"log_metric\('\w+'\) outside an mlpipe step: "
                                            r"not recorded"):
        train.fn(examples=examples, labels=labels, model=model, epochs=5)
    assert (model / "MLmodel").exists()
    report = tmp_path / "report.json"
    with pytest.warns(RuntimeWarning, match=r"log_metric\('\w+'\) outside an mlpipe step"):
        evaluate.fn(model=model, examples=examples, labels=labels, report=report)
    result = json.loads(report.read_text())
    assert result["population"]["split"] == "test" and result["population"]["examples"] > 0
    assert result["metrics"]["accuracy"]["value"] > 0.8


def test_the_data_set_is_deterministic(tmp_path):
    a = make_dataset(tmp_path / "a", per_class=5, seed=1)
    b = make_dataset(tmp_path / "b", per_class=5, seed=1)
    assert a[1].read_text() == b[1].read_text()
    assert (a[0] / "dent" / "0003.pgm").read_bytes() == (b[0] / "dent" / "0003.pgm").read_bytes()
