"""Typed ports and parameters: Input[UriFolder], Input[Annotated[Path, CONTRACT]],
Annotated[int, Range(...)]; the short form keeps working and declares the same spec; type
checkers see a Path and the parameter's value."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated

import pytest

from mlpipe import (
    Choices,
    Input,
    MLflowModelFolder,
    Output,
    Param,
    Range,
    UriFile,
    UriFolder,
    component,
)
from mlpipe.contracts import LabelMap
from mlpipe.errors import DefinitionError

LABELS = LabelMap("labels", classes=["ok", "dent"])
Labels = Annotated[Path, LABELS]


@component(name="fit")
def typed(examples: Input[UriFolder], labels: Input[Labels], model: Output[MLflowModelFolder],
          report: Output[Annotated[Path, UriFile.__metadata__[0], "the scores"]],
          epochs: Annotated[int, Range(1, 200)] = 10,
          optimizer: Annotated[str, Choices("adam", "sgd")] = "adam",
          rate: Annotated[float, Range(0.0, None), "learning rate"] = 0.1,
          seed: Param[int] = 13):
    ...


@component(name="fit")
def short(examples: Input["uri_folder"], labels: Input[LABELS], model: Output["mlflow_model"],
          report: Output["uri_file", "the scores"],
          epochs: Param[int, 1:200] = 10,
          optimizer: Param[str, ["adam", "sgd"]] = "adam",
          rate: Param[float, 0.0:, "learning rate"] = 0.1,
          seed: Param[int] = 13):
    ...


def test_the_typed_and_the_short_form_declare_the_same_ports_and_parameters():
    a, b = typed.spec, short.spec
    assert (a.inputs, a.outputs, a.params) == (b.inputs, b.outputs, b.params)
    assert a.input("labels").contract == LABELS and a.output("report").description == "the scores"
    assert (a.param("epochs").minimum, a.param("epochs").maximum) == (1, 200)
    assert a.param("optimizer").choices == ("adam", "sgd")


def test_a_port_type_without_kind_or_contract_is_refused_at_its_line():
    with pytest.raises(DefinitionError, match=r"test_annotations.py:\d+: parameter 'x' of component "
                       r"'bad': Input\[.*\] carries neither an artifact kind nor a contract"):
        @component
        def bad(x: Input[Annotated[Path, "just words"]]): ...


def test_a_contract_alias_that_names_another_kind_is_refused():
    with pytest.raises(DefinitionError, match=r"names the kind uri_folder and a contract that "
                                              r"travels as uri_file"):
        @component
        def bad(x: Input[Annotated[Path, UriFolder.__metadata__[0], LABELS]]): ...


def test_a_range_on_a_string_is_refused():
    with pytest.raises(DefinitionError, match=r"a range like 1:200 only constrains an int or "
                                              r"float Param"):
        @component
        def bad(x: Annotated[str, Range(1, 2)] = "a"): ...


PROBE = '''
from pathlib import Path
from typing import Annotated

from mlpipe import Input, Output, Param, Range, UriFolder, component
from mlpipe.contracts import LabelMap

LABELS = LabelMap("labels", classes=["ok", "dent"])
Labels = Annotated[Path, LABELS]


@component
def fit(examples: Input[UriFolder], labels: Input[Labels], model: Output[UriFolder],
        epochs: Annotated[int, Range(1, 200)] = 10, seed: Param[int] = 13) -> None:
    folder: Path = examples / "train"
    count: int = epochs + seed
    print(folder, labels.read_text(), model.mkdir(), count)


fit.fn(Path("a"), Path("b"), Path("c"), 3, 4)
'''


@pytest.mark.slow
@pytest.mark.parametrize("body, errors", [
    ("", 0),
    ("\nfit.fn(Path('a'), Path('b'), Path('c'), 'ten', 4)\n", 1),
    ("\n@component\ndef oops(x: Input[UriFolder]) -> None:\n    x.no_such_method()\n", 1),
])
def test_pyright_reads_typed_ports_as_paths(tmp_path, body, errors):
    pyright = Path(sys.executable).with_name("pyright")
    if not pyright.exists() or shutil.which("node") is None:
        pytest.skip("pyright (the dev extra) or node is not installed")
    (tmp_path / "probe.py").write_text(textwrap.dedent(PROBE) + body)
    (tmp_path / "pyrightconfig.json").write_text(
        f'{{"pythonVersion": "3.11", "extraPaths": ["{Path(__file__).parents[1]}"]}}')
    done = subprocess.run([str(pyright), "probe.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert f"{errors} error" in done.stdout, done.stdout
