"""A model trained on GPU compute, evaluated on CPU compute. No GPU is needed: the checkpoint
is a real ``torch.save`` file whose storages are tagged as CUDA (a saving tagger registered
with ``torch.serialization``, in a process of its own), exactly what a GPU run writes."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mlpipe.contracts import MLflowModel, validate
from mlpipe.errors import ContractError

ROOT = Path(__file__).resolve().parents[2]

WRITE_CUDA_CHECKPOINT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import torch
    from torch import nn
    from components.images import SIZE

    out, classes = Path(sys.argv[1]), json.loads(sys.argv[2])
    # storages saved from here on say "cuda:0", as on a GPU
    torch.serialization.register_package(1, lambda storage: "cuda:0", lambda obj, loc: None)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(16 * (SIZE // 2) ** 2, len(classes)))
    out.mkdir(parents=True)
    torch.save(net.state_dict(), out / "model.pt")
    (out / "labels.json").write_text(json.dumps(classes))
    from components.serving import write_pyfunc
    write_pyfunc(out, "defect_cnn", {"metadata": {"saved_device": "cuda"}})
""")


@pytest.fixture
def gpu_trained(tmp_path):
    pytest.importorskip("torch")
    from components.defect import prepare
    from components.synthetic import make_dataset

    raw, split = make_dataset(tmp_path / "data", per_class=6)
    prepare.fn(str(raw), str(split), str(tmp_path / "examples"), str(tmp_path / "labels.json"))
    classes = json.loads((tmp_path / "labels.json").read_text())
    done = subprocess.run([sys.executable, "-c", WRITE_CUDA_CHECKPOINT, str(tmp_path / "model"),
                           json.dumps(classes)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return tmp_path


@pytest.mark.slow
def test_a_gpu_trained_checkpoint_fails_to_load_on_cpu_without_map_location(gpu_trained):
    load = ("import torch, sys; torch.load(sys.argv[1])")
    done = subprocess.run([sys.executable, "-c", load, str(gpu_trained / "model" / "model.pt")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert ("RuntimeError: Attempting to deserialize object on a CUDA device but "
            "torch.cuda.is_available() is False") in done.stderr


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:log_metric.*outside an mlpipe step:RuntimeWarning")
def test_the_example_evaluates_a_gpu_trained_model_on_cpu(gpu_trained):
    from components.defect_ddp import evaluate_cnn

    evaluate_cnn.fn(str(gpu_trained / "model"), str(gpu_trained / "examples"),
                    str(gpu_trained / "labels.json"), str(gpu_trained / "report.json"))
    report = json.loads((gpu_trained / "report.json").read_text())
    assert report["population"]["split"] == "test"
    assert 0.0 <= report["metrics"]["accuracy"]["value"] <= 1.0


@pytest.mark.slow
def test_the_model_contract_names_where_the_tensors_were_saved(gpu_trained):
    with pytest.raises(ContractError, match=r"the model's tensors were saved on cuda \(MLmodel "
                                            r"metadata.saved_device\) but "
                                            r"mlflow-model:defect-cnn says cpu"):
        validate(MLflowModel("defect-cnn", device="cpu"), gpu_trained / "model")
    validate(MLflowModel("defect-cnn", device="cuda"), gpu_trained / "model")
