"""MP630 asserts CUDA tensors only where the producer's code shows a GPU placement (its body
facts); where its code cannot tell, it says so at info; where the consumer maps the load, or
the producer saves no torch model, it is silent."""
import importlib
import re

import pytest

from mlpipe import Pipeline, pipeline
from mlpipe.checks import check_pipeline

CASES = importlib.import_module("fixtures.checks.mp630")


def _mp630(target):
    spec = target.spec if isinstance(target, Pipeline) else target
    return [(d.severity.value, d.message) for d in check_pipeline(spec)[1] if d.code == "MP630"]


@pytest.mark.parametrize("name, severity, message", [
    ("bad", "warning", r"and its code puts tensors on the GPU \(\.cuda\(\) at line 13\): torch "
                       r"saves such tensors as CUDA tensors, and torch\.load of them fails "
                       r"without a GPU$"),
    ("lightning_trainer", "warning", r"and it trains with lightning, which puts the model on "
                                     r"the GPU by itself: torch saves"),
    ("moves_back", "info", r"and its code puts tensors on the GPU \('cuda' at line \d+\), and "
                           r"also moves something to the CPU \(\.cpu\(\) at line \d+\): whether "
                           r"what it saved holds CUDA tensors cannot be told from its code$"),
    ("saves_json", "info", r"and its code puts tensors on the GPU \(\.cuda\(\) at line \d+\) "
                           r"but saves nothing through torch that its code shows \(torch\.save, "
                           r"mlflow\.pytorch\): whether what it saved holds CUDA tensors cannot "
                           r"be told from its code$"),
])
def test_what_the_producer_code_shows_decides_the_claim(name, severity, message):
    [(found_severity, text)] = _mp630(getattr(CASES, name))
    assert found_severity == severity
    assert re.search(message, text), text


@pytest.mark.parametrize("name", ["good", "good_code_on_cpu", "good_keras", "good_mapped"])
def test_no_claim_without_a_gpu_placement_or_with_a_mapped_load(name):
    assert _mp630(getattr(CASES, name)) == []


def test_a_producer_whose_code_cannot_be_read_is_an_inference_at_info(tmp_path, monkeypatch):
    (tmp_path / "gone_train.py").write_text(
        "from mlpipe import Compute, Input, Output, component\n"
        "@component(compute=Compute('gpu-cluster', sku='Standard_NC6s_v3'))\n"
        "def train_gone(data: Input['uri_folder'], model: Output['mlflow_model']):\n"
        "    import torch\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    train = importlib.import_module("gone_train").train_gone

    @pipeline
    def scripted(data):
        return CASES.score(model=train(data=data).model).report

    (tmp_path / "gone_train.py").unlink()   # as a function built at run time: no source
    assert _mp630(scripted) == [(
        "info", "step 'score' loads model 'train_gone.model' on Standard_D4s_v3 (4 vCPUs, no "
                "GPU, no InfiniBand), trained on Standard_NC6s_v3 (1 x V100 16 GiB, no "
                "InfiniBand) by 'train_gone', whose device use is unknown: its code cannot be "
                "read here (a script, or a function built at run time); if it saved CUDA "
                "tensors, torch.load fails without a GPU")]
