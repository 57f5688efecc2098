"""The rows per split the step runtime counts in a table input that declares its split, and
what an evaluation's stated population is held to against them (evidence.evaluatedrows)."""
from __future__ import annotations

import pytest

from mlpipe.contracts import Column, TabularSchema
from mlpipe.evidence.records.evaluatedrows import training_rows_evaluated
from mlpipe.runtime.finish import Port, check_inputs
from mlpipe.runtime.splitrows import split_rows

COLUMNS = [Column("id", "string", role="key"), Column("x", "float64", unit="mm")]
BY_COLUMN = TabularSchema("t", columns=[*COLUMNS, Column("split", "string", role="split")],
                          splits=["train", "val", "test"])
BY_FOLDER = TabularSchema("t", columns=COLUMNS, layout="{split}/{file}",
                          splits=["train", "test"])
PLAIN = TabularSchema("t", columns=COLUMNS)


def _csv(path, splits):
    path.write_text("id,x [mm],split\n" + "".join(
        f"r{i},{i}.0,{s}\n" for i, s in enumerate(splits)))
    return path


def test_a_split_column_is_counted_by_value(tmp_path):
    table = _csv(tmp_path / "t.csv", ["train"] * 5 + ["val"] * 2 + ["test"] * 3)
    assert split_rows(BY_COLUMN, str(table)) == {
        "by": "split", "rows": {"test": 3, "train": 5, "val": 2}}


def test_a_parquet_table_and_a_folder_of_tables_are_counted(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", "b", "c"], "x": [1.0, 2.0, 3.0],
                             "split": ["train", "test", "test"]}), tmp_path / "t.parquet")
    assert split_rows(BY_COLUMN, str(tmp_path / "t.parquet"))["rows"] == {"test": 2, "train": 1}
    for part, n in (("train", 4), ("test", 2)):
        (tmp_path / "f" / part).mkdir(parents=True)
        (tmp_path / "f" / part / "a.csv").write_text(
            "id,x [mm]\n" + "".join(f"r{i},1.0\n" for i in range(n)))
    assert split_rows(BY_FOLDER, str(tmp_path / "f")) == {
        "by": "folder", "rows": {"test": 2, "train": 4}}


def test_a_table_that_declares_no_split_or_cannot_be_read_is_not_counted(tmp_path):
    table = _csv(tmp_path / "t.csv", ["train", "test"])
    assert split_rows(PLAIN, str(table)) is None
    assert split_rows(None, str(table)) is None
    assert split_rows(BY_COLUMN, str(tmp_path / "missing.csv")) is None


def test_the_input_check_records_the_counts_only_for_a_valid_table(tmp_path):
    pytest.importorskip("pyarrow")
    good = _csv(tmp_path / "good.csv", ["train", "train", "test"])
    bad = _csv(tmp_path / "bad.csv", ["train", "holdout"])
    results = check_inputs([Port("rows", "uri_file", BY_COLUMN)], {"rows": str(good)})
    assert results["rows"]["splits"] == {"by": "split", "rows": {"test": 1, "train": 2}}
    with pytest.raises(Exception, match="which is not a split of") as caught:
        check_inputs([Port("rows", "uri_file", BY_COLUMN)], {"rows": str(bad)})
    assert "splits" not in caught.value.results["rows"]


CHECKED = {"rows": {"splits": {"by": "split", "rows": {"train": 12, "val": 2, "test": 4}}}}


@pytest.mark.parametrize(("population", "beyond"), [
    ("test, 4 examples", None),                     # the test rows
    ("test, 6 examples", None),                     # test and val: no training row needed
    ({"split": "test", "examples": 7}, 1),          # one more than test and val hold
    ("test, 18 examples", 12),                      # the whole table
    ("validation, 18 examples", None),              # a split this table does not name
    ("test", None),                                 # no count: nothing to hold it to
])
def test_an_evaluation_is_held_to_the_rows_of_its_split(population, beyond):
    found = training_rows_evaluated("score", CHECKED, [population])
    assert len(found) == (beyond is not None)
    if beyond is not None:
        assert f"at least {beyond} of the rows it evaluated are training rows" in found[0][0]


@pytest.mark.parametrize("checked", [
    None, {"rows": None}, {"rows": {"splits": None}}, {"rows": {"splits": {"rows": "x"}}},
    {"rows": {"splits": {"rows": {"test": "4", "train": True}}}},
])
def test_input_checks_cut_short_hold_the_evaluation_to_nothing(checked):
    assert training_rows_evaluated("score", checked, ["test, 16 examples"]) == []
