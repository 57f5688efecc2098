"""An MLflowModel is a model MLflow loads: validation loads it with mlflow.pyfunc.load_model in
the validating process (the example's models too), and refuses one that does not load, naming
what is missing; without mlflow installed, validation refuses, naming mlflow."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mlpipe.contracts import MLflowModel, Tensor, validate
from mlpipe.errors import ContractError

pytest.importorskip("mlflow")

ROOT = Path(__file__).resolve().parents[2]
MODEL = MLflowModel("clf", inputs=Tensor("float64", (-1, 2)))
LOADER = ("class Model:\n    def predict(self, x, params=None):\n        return x\n\n\n"
          "def _load_pyfunc(path):\n    return Model()\n")


def write(root, flavor, loader=LOADER, module="clf_loader"):
    root.mkdir()
    if loader is not None:
        (root / "code").mkdir()
        (root / "code" / f"{module}.py").write_text(loader)
    (root / "MLmodel").write_text(yaml.safe_dump({"flavors": flavor,
                                                  **MODEL.mlmodel_fields()}))
    return root


PYFUNC = {"python_function": {"loader_module": "clf_loader", "code": "code"}}


def test_a_model_that_loads_passes_and_leaves_the_import_path_as_it_was(tmp_path):
    before = list(sys.path)
    validate(MODEL, write(tmp_path / "m", PYFUNC))
    assert sys.path == before
    assert "clf_loader" not in sys.modules


def test_two_models_with_the_same_loader_name_are_each_loaded_from_their_own_folder(tmp_path):
    validate(MODEL, write(tmp_path / "a", PYFUNC))
    with pytest.raises(ContractError, match=r"defines no _load_pyfunc\(path\)"):
        validate(MODEL, write(tmp_path / "b", PYFUNC, loader="X = 1\n"))


@pytest.mark.parametrize("flavor, loader, match", [
    # the example pattern: a loader_module without _load_pyfunc
    (PYFUNC, "def predict(x):\n    return x\n",
     r"the model does not load: its loader_module 'clf_loader' defines no _load_pyfunc\(path\); "
     r"mlflow-model:clf must load with mlflow.pyfunc.load_model"),
    ({"python_function": {"loader_module": "not_here_at_all"}}, None,
     r"its loader_module 'not_here_at_all' needs module 'not_here_at_all', which is neither in "
     r"the model's code folder nor installed here"),
    (PYFUNC, "def _load_pyfunc(path):\n    raise ValueError('weights.bin is truncated')\n",
     r"the model does not load with mlflow.pyfunc.load_model \(ValueError: weights.bin is "
     r"truncated\); mlflow-model:clf must load"),
    ({"pytorch": {"model_data": "model.pt"}}, None,
     r"MLmodel has no python_function flavor with a loader_module; mlflow-model:clf is an MLflow "
     r"model that MLflow can load and serve"),
])
def test_a_model_that_does_not_load_is_refused_naming_what_is_missing(tmp_path, flavor, loader,
                                                                     match):
    with pytest.raises(ContractError, match=match) as info:
        validate(MODEL, write(tmp_path / "m", flavor, loader))
    assert info.value.file == str(tmp_path / "m" / "MLmodel")


def test_without_mlflow_validation_refuses_naming_mlflow(tmp_path):
    model = write(tmp_path / "m", PYFUNC)
    code = ("import sys; sys.modules['mlflow'] = None\n"
            "from mlpipe.contracts import MLflowModel, Tensor, validate\n"
            "from mlpipe.errors import UsageError\n"
            "try:\n"
            "    validate(MLflowModel('clf', inputs=Tensor('float64', (-1, 2))), sys.argv[1])\n"
            "except UsageError as exc:\n"
            "    print(exc.message); print(exc.hint)\n")
    done = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("validating mlflow-model:clf loads the model with MLflow, "
                                  "which is not installed here")
    assert "pip install 'mlpipe-aml[models]'" in done.stdout


@pytest.mark.filterwarnings("ignore:log_metric.*outside an mlpipe step:RuntimeWarning")
def test_the_example_writes_a_model_mlflow_loads_and_predicts_with(tmp_path):
    import mlflow.pyfunc
    import numpy as np

    from components.defect import MODEL as EXAMPLE
    from components.defect import prepare, train
    from components.synthetic import make_dataset

    raw, split = make_dataset(tmp_path / "data", per_class=4)
    prepare.fn(str(raw), str(split), str(tmp_path / "examples"), str(tmp_path / "labels.json"))
    train.fn(str(tmp_path / "examples"), str(tmp_path / "labels.json"), str(tmp_path / "model"),
             epochs=1)
    validate(EXAMPLE, tmp_path / "model")
    loaded = mlflow.pyfunc.load_model(str(tmp_path / "model"))
    probs = loaded.predict(np.zeros((2, 64)))
    assert probs.shape == (2, 3)
    assert np.allclose(probs.sum(axis=1), 1.0)
    classes = json.loads((tmp_path / "labels.json").read_text())
    assert yaml.safe_load((tmp_path / "model" / "MLmodel").read_text())["metadata"][
        "label_map"] == classes
