"""The example's step bodies write files that match the contracts on their ports, and the
example pipeline checks clean."""
import json
import shutil

import pytest
from click.testing import CliRunner

from components import defect
from components.synthetic import make_dataset
from mlpipe.checks import check_pipeline
from mlpipe.cli import main
from mlpipe.contracts import validate
from mlpipe.errors import ContractError
from pipelines.defect_classifier import defect_classifier


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("defect")
    raw, split = make_dataset(d, per_class=12)
    defect.prepare.fn(raw, split, d / "examples", d / "labels.json")
    defect.train.fn(d / "examples", d / "labels.json", d / "model", epochs=2)
    defect.evaluate.fn(d / "model", d / "examples", d / "labels.json", d / "report.json")
    return d


def test_the_example_pipeline_checks_clean():
    assert check_pipeline(defect_classifier.spec)[1] == []


@pytest.mark.parametrize("step, port, path", [
    ("prepare", "raw", "raw"), ("prepare", "split", "split.csv"),
    ("prepare", "examples", "examples"), ("prepare", "labels", "labels.json"),
    ("train", "model", "model"), ("evaluate", "report", "report.json"),
])
@pytest.mark.filterwarnings("ignore:log_metric.*outside an mlpipe step:RuntimeWarning")
def test_every_port_of_the_example_validates(run, step, port, path):
    contract = getattr(defect, step).spec.port(port).contract
    validate(contract, run / path)


def test_a_model_trained_with_another_encoding_is_caught(run, tmp_path):
    model = shutil.copytree(run / "model", tmp_path / "model")
    text = (model / "MLmodel").read_text().replace("scratch: 1", "scratch: 9")
    (model / "MLmodel").write_text(text)
    with pytest.raises(ContractError, match=r"MLmodel: class 'scratch' has code 9 but "
                                            r"label-map:defect-labels encodes it as 1"):
        validate(defect.MODEL, model)


def test_a_report_on_the_wrong_split_is_caught(run, tmp_path):
    doc = json.loads((run / "report.json").read_text())
    doc["population"]["split"] = "val"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(ContractError, match=r"metric 'accuracy' was computed on split 'val'"):
        validate(defect.REPORT, tmp_path / "r.json")


def test_cli_validate(run):
    runner = CliRunner()
    ok = runner.invoke(main, ["validate", "components.defect:prepare.labels",
                              str(run / "labels.json")])
    assert (ok.exit_code, ok.output) == (0, f"{run / 'labels.json'}: matches "
                                            f"label-map:defect-labels\n")
    bad = runner.invoke(main, ["validate", "components/defect.py:EXAMPLES", str(run / "raw")])
    assert bad.exit_code == 1
    assert "lays files out as '{split}/{class}/{file}'" in bad.output
    assert bad.output.startswith("error: ")


@pytest.mark.parametrize("ref, message", [
    ("components.defect:NOPE", "error: components.defect has no attribute 'NOPE'"),
    ("components.defect:CLASSES", "error: components.defect:CLASSES is a tuple, not a contract"),
    ("components.defect:prepare.nope", "error: component 'prepare' has no port 'nope'"),
    ("components.defect:prepare.seed", "error: component 'prepare' has no port 'seed'"),
    ("no.such.module:X", "error: importing no.such.module raised ModuleNotFoundError"),
    ("labelmap", "error: 'labelmap' is neither a contract kind nor MODULE:NAME"),
])
def test_cli_validate_naming_errors_exit_2(run, ref, message):
    result = CliRunner().invoke(main, ["validate", ref, str(run / "labels.json")])
    assert result.exit_code == 2
    assert result.output.startswith(message)


def test_cli_validate_by_kind(run):
    result = CliRunner().invoke(main, ["validate", "split-manifest", str(run / "split.csv")])
    assert result.exit_code == 0, result.output
