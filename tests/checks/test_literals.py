"""Stage literals that must agree (MP418) in the forms a pipeline is written in: Azure ML YAML
(a command's arguments, a job's literal inputs, the script a command runs) and azure-ai-ml
Python, beside the mlpipe Python fixture (tests/fixtures/checks/mp418.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mlpipe.checks import check_pipeline
from mlpipe.loader import load_spec

CORPUS = Path(__file__).parents[1] / "corpus" / "clean" / "yaml" / "ddp_manifest"
TRAIN_RUN = "  --model ${{outputs.model}}\n"
EVAL_RUN = "      --report ${{outputs.report}}\n"


def _found(tmp_path: Path, train: str = "", evaluate: str = "", script: str = "",
           inputs: str = "") -> list[tuple[str, str]]:
    shutil.copytree(CORPUS, tmp_path / "job")
    component = tmp_path / "job" / "train.yml"
    component.write_text(component.read_text().replace(TRAIN_RUN, TRAIN_RUN.rstrip("\n")
                                                       + f" {train}\n"))
    pipeline = tmp_path / "job" / "pipeline.yml"
    text = pipeline.read_text().replace(EVAL_RUN, EVAL_RUN.rstrip("\n") + f" {evaluate}\n")
    text = text.replace("      examples: ${{parent.jobs.prepare.outputs.test}}\n",
                        "      examples: ${{parent.jobs.prepare.outputs.test}}\n" + inputs)
    pipeline.write_text(text)
    if script:
        path = tmp_path / "job" / "src" / "evaluate.py"
        path.write_text(path.read_text() + script)
    spec, found = load_spec(str(pipeline))
    return [(d.code, d.message) for d in [*found, *check_pipeline(spec)[1]]
            if d.severity.value != "info"]


@pytest.mark.parametrize(("train", "evaluate", "said", "more"), [
    ("--classes ok,scratch,dent", "--classes scratch,ok,dent",
     "disagree on the class order (label encoding): 'train' states --classes = ['ok', "
     "'scratch', 'dent'] (", "(the same values in another order); class index i means"),
    ("--mean 0.485 0.456 0.406", "--mean=0.5,0.5,0.5",
     "disagree on the normalisation mean: 'train' states --mean = [0.485, 0.456, 0.406] (",
     "'evaluate' states --mean = [0.5, 0.5, 0.5] ("),
    ("--image-size 224", "--image-size 256", "disagree on the input size: 'train' states "
     "--image-size = 224", "'evaluate' states --image-size = 256"),
    ("--classes ok,scratch,dent", "--classes ok,scratch,dent", None, None),
    ("--mean 0.485 0.456 0.406", "", None, None),       # only one states it
])
def test_yaml_command_arguments(tmp_path, train, evaluate, said, more):
    found = _found(tmp_path, train, evaluate)
    assert [c for c, _ in found] == (["MP418"] if said else [])
    if said:
        assert said in found[0][1] and more in found[0][1]


@pytest.mark.parametrize(("value", "flagged"), [("[0.5, 0.5, 0.5]", True),
                                                ("[0.485, 0.456, 0.406]", False)])
def test_a_script_default_against_a_commands_argument(tmp_path, value, flagged):
    script = f'\nparser.add_argument("--norm-mean", default={value})\n'
    found = _found(tmp_path, "--norm-mean 0.485 0.456 0.406", "", script)
    assert [c for c, _ in found] == (["MP418"] if flagged else [])
    if flagged:
        assert "'evaluate' states --norm-mean = [0.5, 0.5, 0.5] (" in found[0][1]
        assert "evaluate.py:" in found[0][1]


@pytest.mark.parametrize(("given", "flagged"), [("256", True), ("224", False)])
def test_a_jobs_literal_input(tmp_path, given, flagged):
    found = _found(tmp_path, "--image-size 224", "--image-size ${{inputs.image_size}}",
                   inputs=f"      image_size: {given}\n")
    assert [c for c, _ in found] == (["MP418"] if flagged else [])


def test_one_pipeline_input_for_both_is_agreement(tmp_path):
    found = _found(tmp_path, "--image-size 224", "--image-size ${{inputs.image_size}}",
                   inputs="      image_size: ${{parent.inputs.size}}\n")
    assert [c for c, _ in found if c == "MP418"] == []


SDK_PIPELINE = '''
from pathlib import Path

from azure.ai.ml import Input, Output, command, dsl

HERE = Path(__file__).resolve().parent
train = command(
    name="train", code=HERE / "src", environment="azureml:corpus-cpu:3",
    command="python train.py --data ${{{{inputs.data}}}} --model ${{{{outputs.model}}}} "
            "--features width,length,depth",
    inputs={{"data": Input(type="uri_folder")}},
    outputs={{"model": Output(type="mlflow_model")}},
)
score = command(
    name="score", code=HERE / "src", environment="azureml:corpus-cpu:3",
    command="python score.py --model ${{{{inputs.model}}}} --out ${{{{outputs.scores}}}} "
            "--features {features}",
    inputs={{"model": Input(type="mlflow_model")}},
    outputs={{"scores": Output(type="uri_folder")}},
)


@dsl.pipeline(default_compute="cpu-cluster")
def pipe():
    fit = train(data=Input(type="uri_folder", path="azureml:parts:3"))
    scored = score(model=fit.outputs.model)
    return {{"scores": scored.outputs.scores}}
'''


@pytest.mark.parametrize("features", ["length,width,depth", "width,length,depth"])
def test_an_azure_ai_ml_python_pipelines_command_arguments(tmp_path, features):
    pytest.importorskip("azure.ai.ml")
    (tmp_path / "src").mkdir()
    for script in ("train.py", "score.py"):
        (tmp_path / "src" / script).write_text("print('ok')\n")
    module = f"sdk_literals_{features.split(',')[0]}"
    (tmp_path / f"{module}.py").write_text(SDK_PIPELINE.format(features=features))
    spec, found = load_spec(f"{tmp_path / module}.py:pipe")
    found = [d for d in [*found, *check_pipeline(spec)[1]] if d.code == "MP418"]
    mismatch = features != "width,length,depth"
    assert len(found) == mismatch
    if mismatch:
        assert found[0].message.startswith(
            "steps 'fit' and 'scored' disagree on the feature order: 'fit' states "
            "--features = ['width', 'length', 'depth'] (")
        assert found[0].file.endswith(f"{module}.py")


def test_odd_literals_are_read_or_left_alone_never_a_crash(tmp_path):
    script = ('\nCLASSES = {b"x": b"y", "z": 1}\nmean = 0\nlabels = []\n'
              'transforms.Normalize(*stats)\nparser.add_argument(default=[1, 2])\n'
              'FEATURES: list = ["a", ("b", {1, 2})]\nIMAGE_SIZE = -3\n')
    found = _found(tmp_path, "--classes ok,scratch --image-size 224", "", script)
    assert [c for c, _ in found] == []
