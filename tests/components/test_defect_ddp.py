"""The example's distributed CNN trainer, run unmodified under the local launcher (gloo on CPU)."""
import json
import os
import pathlib
import sys

import pytest

from components.defect import prepare
from components.defect_ddp import evaluate_cnn, train_cnn
from components.synthetic import make_dataset
from mlpipe import PyTorch
from mlpipe.backends.local.launcher import launch
from mlpipe.checks import check_pipeline

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_ddp_pipeline_checks_clean_without_running_torch():
    from pipelines.defect_classifier_ddp import defect_classifier_ddp
    assert check_pipeline(defect_classifier_ddp.spec)[1] == []
    assert train_cnn.spec.distribution.world_size(train_cnn.spec.instances) == 8


@pytest.mark.filterwarnings("ignore:log_metric.*outside an mlpipe step:RuntimeWarning")
@pytest.mark.slow
def test_train_cnn_under_the_launcher_coordinates_and_learns(tmp_path):
    pytest.importorskip("torch")
    raw, split = make_dataset(tmp_path / "data", per_class=40)
    prepare.fn(str(raw), str(split), str(tmp_path / "examples"), str(tmp_path / "labels.json"))
    env = dict(os.environ, MLPIPE_STEP_DIR=str(tmp_path / "step"), PYTHONPATH=str(ROOT))
    declared = train_cnn.spec.distribution
    local = PyTorch(processes_per_node=2, backend="gloo", writers=declared.writers,
                    metrics=declared.metrics)
    result = launch([sys.executable, "-m", "components.defect_ddp", str(tmp_path / "examples"),
                     str(tmp_path / "labels.json"), str(tmp_path / "model"), "--epochs", "15"],
                    distribution=local, instances=1, env=env, cwd=str(ROOT),
                    log_dir=tmp_path / "logs", timeout=300)
    report = result.coordination
    assert report.ok and report.writers == {"model": (0,)}
    assert report.covered == report.population > 0
    evaluate_cnn.fn(str(tmp_path / "model"), str(tmp_path / "examples"),
                    str(tmp_path / "labels.json"), str(tmp_path / "report.json"))
    accuracy = json.loads((tmp_path / "report.json").read_text())["metrics"]["accuracy"]["value"]
    assert accuracy > 0.8
