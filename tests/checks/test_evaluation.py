"""The evaluation population must be the reviewed one (MP414, MP416): the cases between the
fixtures' bad and good twins."""
import pytest

from mlpipe import Candidate, Input, Output, component, pipeline
from mlpipe.checks import check_pipeline
from mlpipe.contracts import Column, ImageFolder, LabelMap, SplitManifest, TabularSchema
from mlpipe.errors import DefinitionError

SPLIT = SplitManifest("reviewed", splits=["train", "test"])
FOLDER = ImageFolder("f", layout="{split}/{class}/{file}", splits=["train", "test"])
LABELS = LabelMap("l", classes=["a", "b"])


@component
def checked_split(split: Input[SPLIT], out: Output[SPLIT]):
    pass


@component
def cut_by(table: Input["uri_folder"], split: Input[SPLIT], train: Output["uri_folder"],
           test: Output["uri_folder"]):
    pass


@component
def make_split(table: Input["uri_folder"], split: Output[SPLIT]):
    pass


@component
def lay_out(raw: Input["uri_folder"], split: Input[SPLIT], examples: Output[FOLDER],
            labels: Output[LABELS]):
    pass


@component
def augment(examples: Input[FOLDER], out: Output[FOLDER]):
    pass


@component
def fit(train: Input["uri_folder"], model: Output["mlflow_model"],
        labels: Input[LABELS] = None):
    pass


@component
def evaluate(model: Input["mlflow_model"], test: Input["uri_folder"], report: Output["uri_file"],
             labels: Input[LABELS] = None):
    pass


def _codes(p):
    return [d.code for d in check_pipeline(p.spec)[1] if d.code in ("MP414", "MP416")]


def test_a_recorded_split_passed_on_by_a_step_stays_recorded():
    @pipeline
    def p(table, split):
        parts = cut_by(table=table, split=checked_split(split=split).out)
        m = fit(train=parts.train).model
        return Candidate(model=m, evaluation=evaluate(model=m, test=parts.test).report)
    assert _codes(p) == []


def test_a_split_manifest_made_in_the_run_is_generated():
    @pipeline
    def p(table):
        parts = cut_by(table=table, split=make_split(table=table).split)
        m = fit(train=parts.train).model
        return Candidate(model=m, evaluation=evaluate(model=m, test=parts.test).report)
    [d] = [d for d in check_pipeline(p.spec)[1] if d.code == "MP414"]
    assert d.message == (
        "evaluation step 'evaluate' reads 'cut_by.test' through step 'make_split': its output "
        "'split' is a split manifest, but it is given no split definition (no split manifest, "
        "no input whose contract declares splits), so the split is cut inside the run and the "
        "next candidate may be evaluated on another population")


def test_a_folder_laid_out_by_a_recorded_split_carries_it_through_steps():
    @pipeline
    def p(raw, split):
        prep = lay_out(raw=raw, split=split)
        examples = augment(examples=augment(examples=prep.examples).out).out
        m = fit(train=examples, labels=prep.labels).model
        e = evaluate(model=m, test=examples, labels=prep.labels)
        return Candidate(model=m, evaluation=e.report)
    # the shared label map is not a population, and the folder declares its splits
    assert _codes(p) == []


def test_a_model_input_is_no_population():
    @pipeline
    def p(table):
        m = fit(train=table).model
        return Candidate(model=m, evaluation=evaluate(model=m, test=m).report)
    assert "MP416" not in _codes(p)


RAW = ImageFolder("raw", layout="{split}/{class}/{file}", splits=["train", "test"])
PART = ImageFolder("part", layout="{class}/{file}")
TABLE = TabularSchema("rows", columns=[Column("id", "string", role="key"),
                                       Column("x", "float64"),
                                       Column("split", "string", role="split")],
                      splits=["train", "test"])
TABLES = TabularSchema("rows", columns=[Column("id", "string", role="key")],
                       layout="{split}/{file}", splits=["train", "test"])


@component
def copy_parts(raw: Input[RAW], train: Output[PART], test: Output[PART]):
    pass


@component
def copy_plain(raw: Input["uri_folder"], train: Output[PART], test: Output[PART]):
    pass


@component
def fit_folder(examples: Input[PART], model: Output["uri_folder"]):
    pass


@component
def score_folder(model: Input["uri_folder"], examples: Input[PART], report: Output["uri_file"]):
    pass


def test_a_step_copying_the_parts_its_input_declares_cuts_nothing():
    @pipeline
    def p(raw):
        parts = copy_parts(raw=raw)
        m = fit_folder(examples=parts.train).model
        return Candidate(model=m, evaluation=score_folder(model=m, examples=parts.test).report)
    assert _codes(p) == []


def test_a_uri_folder_model_is_never_read_as_a_data_path():
    @pipeline
    def p(raw):
        parts = copy_plain(raw=raw)
        m = fit_folder(examples=parts.train).model
        return Candidate(model=m, evaluation=score_folder(model=m, examples=parts.test).report)
    # the raw snapshot declares nothing: the split is inferred from the part's name, and said so
    [d] = [d for d in check_pipeline(p.spec)[1] if d.code == "MP414"]
    assert d.message.startswith("evaluation step 'score_folder' reads 'copy_plain.test' "
                                "through step 'copy_plain': its output 'test' is named for "
                                "split parts, but it is given no split definition")
    assert "fit_folder.model" not in d.message


@component
def fit_rows(rows: Input[TABLE], model: Output["mlflow_model"]):
    pass


@component
def score_rows(model: Input["mlflow_model"], rows: Input[TABLE], report: Output["uri_file"]):
    pass


@component
def fit_tables(rows: Input[TABLES], model: Output["mlflow_model"]):
    pass


@component
def score_tables(model: Input["mlflow_model"], rows: Input[TABLES], report: Output["uri_file"]):
    pass


@component
def fit_plain(rows: Input["uri_file"], model: Output["mlflow_model"], split: str = "train"):
    pass


@component
def score_plain(model: Input["mlflow_model"], rows: Input["uri_file"], report: Output["uri_file"],
                split: str = "test"):
    pass


def test_a_table_that_declares_its_split_is_read_in_parts():
    @pipeline
    def by_column(rows):
        m = fit_rows(rows=rows).model
        return Candidate(model=m, evaluation=score_rows(model=m, rows=rows).report)

    @pipeline
    def by_folder(rows):
        m = fit_tables(rows=rows).model
        return Candidate(model=m, evaluation=score_tables(model=m, rows=rows).report)
    assert _codes(by_column) == [] and _codes(by_folder) == []
    assert TABLES.transport.value == "uri_folder"


def test_steps_told_different_parts_are_not_the_same_population():
    @pipeline
    def told(rows):
        m = fit_plain(rows=rows).model
        return Candidate(model=m, evaluation=score_plain(model=m, rows=rows).report)

    @pipeline
    def same(rows):
        m = fit_plain(rows=rows, split="test").model
        return Candidate(model=m, evaluation=score_plain(model=m, rows=rows).report)
    assert _codes(told) == [] and _codes(same) == ["MP416"]


def test_a_split_column_is_a_declared_role_with_split_values():
    assert Column("split", "string", role="split").role == "split"
    with pytest.raises(DefinitionError, match=r"declares 2 split columns \(a, b\); a row "
                                              r"belongs to one split"):
        TabularSchema("t", columns=[Column("a", "string", role="split"),
                                    Column("b", "string", role="split")])
    with pytest.raises(DefinitionError, match=r"layout '\{class\}/\{file\}' is not one of "
                                              r"'\{split\}/\{file\}'"):
        TabularSchema("t", layout="{class}/{file}")
    # a schema declaring neither keeps its digest material as before
    assert "splits" not in TabularSchema("t").spec() and "layout" not in TabularSchema("t").spec()


@component
def copy_own_folders(raw: Input["uri_folder"], train: Output[PART], test: Output[PART]):
    import shutil
    from pathlib import Path
    root = Path(raw)
    shutil.copytree(root / "train", train, dirs_exist_ok=True)
    shutil.copytree(root / "test", test, dirs_exist_ok=True)


@component
def copy_own_folders_joined(raw: Input["uri_folder"], train: Output[PART], test: Output[PART]):
    import os
    import shutil
    shutil.copytree(os.path.join(raw, "train"), train, dirs_exist_ok=True)
    shutil.copytree(f"{raw}/test/", test, dirs_exist_ok=True)


@component
def cut_at_random(raw: Input["uri_folder"], train: Output[PART], test: Output[PART]):
    import random
    import shutil
    from pathlib import Path
    files = sorted(Path(raw).rglob("*"))
    random.shuffle(files)
    for f in files[:8]:
        shutil.copy(f, train)
    for f in files[8:]:
        shutil.copy(f, test)


@component
def copy_one_folder(raw: Input["uri_folder"], train: Output[PART], test: Output[PART]):
    import shutil
    from pathlib import Path
    shutil.copytree(Path(raw) / "train", train, dirs_exist_ok=True)
    shutil.copytree(Path(raw) / "all", test, dirs_exist_ok=True)


@pytest.mark.parametrize(("prepare", "generated"), [
    (copy_own_folders, False),          # the snapshot's own train/ and test/ folders, copied
    (copy_own_folders_joined, False),   # the same through os.path.join and an f-string
    (cut_at_random, True),              # a split cut in the run
    (copy_one_folder, True),            # only train/ is the snapshot's: test is cut otherwise
    (copy_plain, True),                 # no readable body: the part's name is all there is
])
def test_a_step_copying_its_inputs_own_part_folders_cuts_no_split(prepare, generated):
    @pipeline
    def p(raw):
        parts = prepare(raw=raw)
        m = fit_folder(examples=parts.train).model
        return Candidate(model=m, evaluation=score_folder(model=m, examples=parts.test).report)
    assert _codes(p) == (["MP414"] if generated else [])
