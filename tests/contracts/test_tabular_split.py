"""A table declares its split: a column with role="split" whose values are declared split
names, or one folder of tables per split (layout="{split}/{file}")."""
import pytest

from mlpipe.contracts import Column, TabularSchema
from mlpipe.errors import ContractError

pytest.importorskip("pyarrow")

ROWS = TabularSchema("rows", columns=[Column("id", "string", role="key"), Column("x", "float64"),
                                      Column("split", "string", role="split")],
                     splits=["train", "test"])
TABLES = TabularSchema("rows", columns=[Column("id", "string", role="key")],
                       layout="{split}/{file}", splits=["train", "test"])


def test_a_split_column_holds_only_declared_split_names(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("id,x,split\na,1.0,train\nb,2.0,test\n")
    ROWS.validate(good)
    bad = tmp_path / "bad.csv"
    bad.write_text("id,x,split\na,1.0,train\nb,2.0,holdout\n")
    with pytest.raises(ContractError, match=r"row 2 of split column 'split' holds 'holdout', "
                                            r"which is not a split of tabular-schema:rows "
                                            r"\(train, test\)") as info:
        ROWS.validate(bad)
    assert info.value.line == 3


def test_a_parquet_split_column_is_checked_too(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "x": [1.0, 2.0], "split": ["train", "val"]}), path)
    with pytest.raises(ContractError, match=r"row 2 of split column 'split' holds 'val'"):
        ROWS.validate(path)


def test_a_folder_of_tables_per_split(tmp_path):
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "rows.csv").write_text(f"id\n{split}-1\n")
    TABLES.validate(tmp_path)
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "rows.csv").write_text("id\nv\n")
    with pytest.raises(ContractError, match=r"folder 'val' of 'val/rows.csv' is not a split of "
                                            r"tabular-schema:rows \(train, test\)"):
        TABLES.validate(tmp_path)
    (tmp_path / "val" / "rows.csv").unlink()
    (tmp_path / "val").rmdir()
    (tmp_path / "loose.csv").write_text("id\nx\n")
    with pytest.raises(ContractError, match=r"'loose.csv' is 1 level\(s\) deep but "
                                            r"tabular-schema:rows lays tables out as "
                                            r"'\{split\}/\{file\}'"):
        TABLES.validate(tmp_path)


def test_a_consumer_that_accepts_fewer_splits_is_a_difference():
    narrow = TabularSchema("rows", columns=ROWS.columns, splits=["test"])
    [diff] = list(ROWS.differences(narrow))
    assert diff.message == "split 'train' is produced but the consumer accepts only test"
    diff = next(iter(TabularSchema("rows").differences(TABLES)))   # and the column it lacks
    assert diff.message == ("the table is laid out as 'one table' but the consumer reads "
                            "'{split}/{file}'")
