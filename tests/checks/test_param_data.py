"""MP205 says what it saw: a path that exists is a warning; a bare word that only happens to
name something in the current folder (split="train" beside a train/ folder) is an info."""
from mlpipe import Input, Output, Param, component, pipeline
from mlpipe.checks import check_pipeline


@component
def score(model: Input["uri_folder"], out: Output["uri_file"], split: Param[str] = "train"):
    pass


@pipeline
def scored(model):
    return score(model=model).out


def test_a_bare_word_naming_a_folder_here_is_an_info(tmp_path, monkeypatch):
    (tmp_path / "train").mkdir()
    monkeypatch.chdir(tmp_path)
    [d] = [d for d in check_pipeline(scored.spec)[1] if d.code == "MP205"]
    assert (d.severity.value, d.message) == (
        "info", "parameter 'score.split' defaults to 'train', which is also the name of an "
                "existing folder in the current folder: if the step reads it, its cache key "
                "and evidence do not cover that data")


def test_a_path_that_exists_is_a_warning(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rates.csv").write_text("a\n")
    monkeypatch.chdir(tmp_path)

    @pipeline
    def given(model):
        return score(model=model, split="data/rates.csv").out
    [d] = [d for d in check_pipeline(given.spec)[1] if d.code == "MP205"]
    assert d.severity.value == "warning"
    assert d.message.startswith("parameter 'score.split' is given 'data/rates.csv', an existing "
                                "file: data the step can read that its cache key and evidence "
                                "do not cover")
