"""The evaluation population must be the reviewed one (MP414, MP416): the cases between the
fixtures' bad and good twins."""
from mlpipe import Candidate, Input, Output, component, pipeline
from mlpipe.checks import check_pipeline
from mlpipe.contracts import ImageFolder, LabelMap, SplitManifest

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
    assert d.message.startswith("evaluation step 'evaluate' reads 'cut_by.test' through step "
                                "'make_split', which cuts the split inside the run")


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
