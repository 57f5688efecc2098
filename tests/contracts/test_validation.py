"""Run-time validation: valid files pass, corrupted ones raise a ContractError naming the
file, the row/column/key and what was expected."""
import csv
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from mlpipe.contracts import (
    Column,
    ImageFolder,
    LabelMap,
    Metric,
    MetricsReport,
    MLflowModel,
    SplitManifest,
    TabularSchema,
    Tensor,
    validate,
)
from mlpipe.errors import ContractError, UsageError

LABELS = LabelMap("labels", classes=["ok", "scratch", "dent"], version="2")
PARTS = TabularSchema("parts", columns=[Column("id", "string", role="key"),
                                        Column("length", "float64", unit="mm"),
                                        Column("count", "int64", nullable=True),
                                        Column("defect", "bool", role="label")])
ROWS = [["a", "1.5", "3", "true"], ["b", "2.0", "", "false"], ["c", "0.25", "7", "true"]]


def write_csv(path, header, rows):
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([header, *rows])
    return path


# --- tables ---------------------------------------------------------------------------------

def test_csv_that_matches_passes(tmp_path):
    validate(PARTS, write_csv(tmp_path / "t.csv", ["id", "length [mm]", "count", "defect", "extra"],
                              [r + ["x"] for r in ROWS]))


def test_csv_with_a_renamed_column(tmp_path):
    path = write_csv(tmp_path / "t.csv", ["id", "lenght [mm]", "count", "defect"], ROWS)
    with pytest.raises(ContractError, match=r"t.csv:1: the table has no column 'length' \(float64\) "
                       r"required by tabular-schema:parts; is 'lenght' the same column renamed\?") as exc:
        validate(PARTS, path)
    assert exc.value.column == "length" and exc.value.hint == "write the column as 'length [mm]'"


def test_csv_with_a_changed_unit(tmp_path):
    path = write_csv(tmp_path / "t.csv", ["id", "length [cm]", "count", "defect"], ROWS)
    with pytest.raises(ContractError, match=r"t.csv:1: column 'length' is in 'cm' but "
                                            r"tabular-schema:parts requires 'mm'"):
        validate(PARTS, path)


def test_csv_with_a_value_of_the_wrong_dtype_names_row_and_line(tmp_path):
    rows = [ROWS[0], ["b\nmultiline", "2.0", "x9", "false"], ROWS[2]]
    path = write_csv(tmp_path / "t.csv", ["id", "length [mm]", "count", "defect"], rows)
    with pytest.raises(ContractError, match=r"t.csv:3: row 2, column 'count' holds 'x9', which is "
                                            r"not a int64 as tabular-schema:parts requires") as exc:
        validate(PARTS, path)
    assert exc.value.line == 3 and exc.value.column == "count"


def test_csv_with_a_missing_value_in_a_non_null_column(tmp_path):
    rows = [ROWS[0], ROWS[1], ["c", "", "7", "true"]]
    path = write_csv(tmp_path / "t.csv", ["id", "length [mm]", "count", "defect"], rows)
    with pytest.raises(ContractError, match=r"t.csv:4: row 3 has no value in column 'length', "
                                            r"which tabular-schema:parts declares not nullable"):
        validate(PARTS, path)


def test_csv_feature_order_when_ordered(tmp_path):
    schema = TabularSchema("f", ordered=True, columns=[Column("a", "int64"), Column("b", "int64")])
    validate(schema, write_csv(tmp_path / "ok.csv", ["a", "k", "b"], [["1", "x", "2"]]))
    with pytest.raises(ContractError, match=r"feature columns are in the order b, a but "
                                            r"tabular-schema:f requires a, b"):
        validate(schema, write_csv(tmp_path / "bad.csv", ["b", "a"], [["1", "2"]]))


def parquet_table(**overrides):
    data = {"id": pa.array(["a", "b"]), "length": pa.array([1.5, 2.0]),
            "count": pa.array([3, None], pa.int64()), "defect": pa.array([True, False])}
    data.update(overrides)
    return pa.table(data)


def write_parquet(path, table, unit="mm"):
    fields = [f.with_metadata({"unit": unit}) if f.name == "length" and unit else f
              for f in table.schema]
    pq.write_table(table.cast(pa.schema(fields)), path)
    return path


def test_parquet_that_matches_passes(tmp_path):
    validate(PARTS, write_parquet(tmp_path / "t.parquet", parquet_table()))
    pq.write_table(parquet_table().cast(PARTS.arrow_schema()), tmp_path / "own.parquet")
    validate(PARTS, tmp_path / "own.parquet")


@pytest.mark.parametrize("table, unit, match", [
    (parquet_table(length=pa.array([1, 2], pa.int64())), "mm",
     r"column 'length' is int64 but tabular-schema:parts requires float64"),
    (parquet_table(), "in", r"column 'length' is in 'in' but tabular-schema:parts requires 'mm'"),
    (parquet_table(), None, r"column 'length' is in no unit but tabular-schema:parts requires 'mm'"),
    (parquet_table(length=pa.array([1.0, None])), "mm",
     r"row 2 has no value in column 'length', which tabular-schema:parts declares not nullable"),
    (parquet_table().rename_columns(["id", "len", "count", "defect"]), None,
     r"the table has no column 'length'"),
])
def test_corrupted_parquet(tmp_path, table, unit, match):
    path = write_parquet(tmp_path / "t.parquet", table, unit)
    with pytest.raises(ContractError, match=match) as exc:
        validate(PARTS, path)
    assert exc.value.file == str(path)


def test_a_folder_of_tables_is_checked_file_by_file(tmp_path):
    write_parquet(tmp_path / "a.parquet", parquet_table())
    write_csv(tmp_path / "b.csv", ["id", "length [mm]", "count", "defect"], [["a", "x", "", "true"]])
    with pytest.raises(ContractError, match=r"b.csv:2: row 1, column 'length' holds 'x'"):
        validate(PARTS, tmp_path)


def test_other_suffixes_and_missing_paths(tmp_path):
    (tmp_path / "t.txt").write_text("id\n")
    with pytest.raises(ContractError, match=r"t.txt: the file is neither .csv nor .parquet"):
        validate(PARTS, tmp_path / "t.txt")
    with pytest.raises(ContractError, match=r"nope.csv: nothing exists here; tabular-schema:parts "
                                            r"expects a file there"):
        validate(PARTS, tmp_path / "nope.csv")
    with pytest.raises(UsageError, match=r"'labels' is not a contract"):
        validate("labels", tmp_path)


# --- label maps -----------------------------------------------------------------------------

def test_label_map_file(tmp_path):
    LABELS.write(tmp_path / "labels.json")
    validate(LABELS, tmp_path / "labels.json")
    validate(LabelMap, tmp_path / "labels.json")


def test_label_map_with_two_classes_swapped(tmp_path):
    (tmp_path / "l.json").write_text(json.dumps({"ok": 0, "scratch": 2, "dent": 1}))
    with pytest.raises(ContractError, match=r"l.json: class 'scratch' has code 2 but "
                                            r"label-map:labels encodes it as 1") as exc:
        validate(LABELS, tmp_path / "l.json")
    assert exc.value.key == "scratch"


@pytest.mark.parametrize("text, match", [
    ('{"ok": 0, "scratch": 1}', r"class 'dent' is missing; label-map:labels encodes it as 2"),
    ('{"ok": 0, "scratch": 1, "dent": 2, "crack": 3}', r"class 'crack' \(code 3\) is not in"),
    ('{"ok": 0, "scratch": 0, "dent": 2}', r"classes 'ok' and 'scratch' share code 0"),
    ('{"ok": "0"}', r"class 'ok' has code '0'; label-map:labels expects an integer"),
    ('["ok", "scratch"]', r"the file holds a JSON list; label-map:labels expects an object"),
    ('{"ok": 0,', r"l.json:1: the file is not JSON"),
])
def test_corrupted_label_maps(tmp_path, text, match):
    (tmp_path / "l.json").write_text(text)
    with pytest.raises(ContractError, match=match):
        validate(LABELS, tmp_path / "l.json")


# --- split manifests ------------------------------------------------------------------------

SPLIT = SplitManifest("split", splits=["train", "val", "test"], required=["train", "test"])


def test_split_manifest_that_matches(tmp_path):
    validate(SPLIT, write_csv(tmp_path / "s.csv", ["id", "split"],
                              [["a", "train"], ["b", "test"], ["c", "val"]]))


def test_split_manifest_with_one_id_in_two_splits(tmp_path):
    path = write_csv(tmp_path / "s.csv", ["id", "split"],
                     [["a", "train"], ["b", "test"], ["a", "test"]])
    with pytest.raises(ContractError, match=r"s.csv:4: id 'a' is in split 'train' \(line 2\) and "
                                            r"in split 'test'; split-manifest:split promises "
                                            r"disjoint splits") as exc:
        validate(SPLIT, path)
    assert exc.value.key == "a" and exc.value.line == 4
    overlapping = SplitManifest(required=["train", "test"], disjoint=False)
    validate(overlapping, path)
    write_csv(path, ["id", "split"], [["a", "train"], ["a", "test"], ["b", "val"], ["a", "test"]])
    with pytest.raises(ContractError, match=r"s.csv:5: id 'a' is listed twice in split 'test' "
                                            r"\(lines 3 and 5\); split-manifest promises one "
                                            r"row per id"):
        validate(overlapping, path)


@pytest.mark.parametrize("rows, match", [
    ([["a", "train"]], r"s.csv: split 'test' has no examples; split-manifest:split requires it "
                       r"\(present: train \(1\)\)"),
    ([["a", "train"], ["b", "holdout"]], r"s.csv:3: id 'b' is assigned to split 'holdout', "
                                         r"which is not one of train, val, test"),
    ([["a", "train"], ["a", "train"], ["b", "test"]],
     r"s.csv:3: id 'a' is listed twice in split 'train' \(lines 2 and 3\)"),
    ([["a"]], r"s.csv:2: row has 1 field\(s\)"),
])
def test_corrupted_split_manifests(tmp_path, rows, match):
    with pytest.raises(ContractError, match=match):
        validate(SPLIT, write_csv(tmp_path / "s.csv", ["id", "split"], rows))


def test_split_manifest_without_its_columns(tmp_path):
    path = write_csv(tmp_path / "s.csv", ["example", "split"], [["a", "train"]])
    with pytest.raises(ContractError, match=r"s.csv:1: the header example,split has no column "
                                            r"'id'; split-manifest:split expects id,split"):
        validate(SPLIT, path)


# --- image folders --------------------------------------------------------------------------

PGM = b"P5\n2 2\n255\n\x00\x01\x02\x03"
EXAMPLES = ImageFolder("ex", layout="{split}/{class}/{file}", classes=LABELS,
                       splits=["train", "test"], file_kinds=["pgm"])


def image_folder(root, files):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_image_folder_that_matches(tmp_path):
    validate(EXAMPLES, image_folder(tmp_path, {"train/ok/1.pgm": PGM, "test/dent/2.pgm": PGM,
                                               ".cache/x": b""}))


@pytest.mark.parametrize("files, match", [
    ({"ok/1.pgm": PGM}, r"'ok/1.pgm' is 2 level\(s\) deep but image-folder:ex lays files out as "
                        r"'\{split\}/\{class\}/\{file\}'"),
    ({"train/crack/1.pgm": PGM}, r"folder 'crack' of 'train/crack/1.pgm' is not a class of "
                                 r"image-folder:ex \(ok, scratch, dent\)"),
    ({"val/ok/1.pgm": PGM}, r"folder 'val' of 'val/ok/1.pgm' is not a split"),
    ({"train/ok/1.png": PGM}, r"'train/ok/1.png' is not a pgm file \(suffix '.png'\)"),
    ({"train/ok/1.pgm": b"\x89PNG\r\n\x1a\n"}, r"'train/ok/1.pgm' is named like a pgm file but "
                                               r"does not start like one"),
    ({}, r"the folder holds no image file"),
])
def test_corrupted_image_folders(tmp_path, files, match):
    with pytest.raises(ContractError, match=match):
        validate(EXAMPLES, image_folder(tmp_path, files))


def test_image_folder_with_a_manifest(tmp_path):
    flat = ImageFolder("flat", layout="{file}", classes=LABELS, file_kinds=["pgm"],
                       manifest="manifest.csv")
    image_folder(tmp_path, {"1.pgm": PGM, "2.pgm": PGM})
    write_csv(tmp_path / "manifest.csv", ["file", "class"], [["1.pgm", "ok"], ["2.pgm", "dent"]])
    validate(flat, tmp_path)
    write_csv(tmp_path / "manifest.csv", ["file", "class"], [["1.pgm", "ok"]])
    with pytest.raises(ContractError, match=r"'2.pgm' is in the folder but not in the manifest"):
        validate(flat, tmp_path)
    write_csv(tmp_path / "manifest.csv", ["file", "class"], [["1.pgm", "ok"], ["2.pgm", "crack"]])
    with pytest.raises(ContractError, match=r"manifest.csv:3: '2.pgm' has class 'crack'"):
        validate(flat, tmp_path)


# --- models ---------------------------------------------------------------------------------

MODEL = MLflowModel("clf", inputs=[Column("length", "float64"), Column("width", "float32")],
                    outputs=Tensor("float64", (-1, 3)), labels=LABELS)


LOADER = "class Model:\n    def predict(self, x, params=None):\n        return x\n\n\n" \
         "def _load_pyfunc(path):\n    return Model()\n"


def write_model(root, **fields):
    (root / "code").mkdir(parents=True)
    (root / "code" / "clf_loader.py").write_text(LOADER)
    doc = {"flavors": {"python_function": {"loader_module": "clf_loader", "code": "code"}},
           **MODEL.mlmodel_fields()}
    doc.update(fields)
    (root / "MLmodel").write_text(yaml.safe_dump(doc))
    return root


def test_model_that_matches(tmp_path):
    validate(MODEL, write_model(tmp_path / "m"))
    signature = yaml.safe_load((tmp_path / "m" / "MLmodel").read_text())["signature"]
    assert json.loads(signature["inputs"]) == [
        {"name": "length", "type": "double", "required": True},
        {"name": "width", "type": "float", "required": True}]


@pytest.mark.parametrize("fields, match", [
    ({"signature": {"inputs": json.dumps([{"name": "width", "type": "float"},
                                          {"name": "length", "type": "double"}]),
                    "outputs": MODEL.mlmodel_fields()["signature"]["outputs"]}},
     r"signature input 1 is 'width' but mlflow-model:clf expects 'length' there"),
    ({"signature": {"inputs": json.dumps([{"name": "length", "type": "float"},
                                          {"name": "width", "type": "float"}])}},
     r"signature input 'length' is float but mlflow-model:clf expects double \(float64\)"),
    ({"signature": {"inputs": json.dumps([{"name": "length", "type": "double"}])}},
     r"signature inputs lack 'width' \(float32\)"),
    ({"metadata": {"label_map": {"ok": 0, "scratch": 2, "dent": 1}}},
     r"MLmodel: class 'scratch' has code 2 but label-map:labels encodes it as 1"),
    ({"metadata": {}}, r"MLmodel records no metadata.label_map"),
    ({"signature": None}, r"MLmodel has no signature inputs"),
    ({"flavors": None}, r"MLmodel declares no flavors"),
])
def test_corrupted_models(tmp_path, fields, match):
    with pytest.raises(ContractError, match=match):
        validate(MODEL, write_model(tmp_path / "m", **fields))


def test_model_folder_without_mlmodel(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(ContractError, match=r"the model folder has no MLmodel file"):
        validate(MODEL, tmp_path / "m")


# --- metrics reports ------------------------------------------------------------------------

REPORT = MetricsReport("eval", metrics=[Metric("accuracy", split="test"),
                                        Metric("loss", scope="partial")])


def write_report(path, doc):
    path.write_text(json.dumps(doc))
    return path


GOOD_REPORT = {"population": {"split": "test", "examples": 10},
               "metrics": {"accuracy": {"value": 0.9, "scope": "global"},
                           "loss": {"value": 0.3, "scope": "partial",
                                    "population": {"split": "train"}},
                           "extra": {"value": 1, "scope": "global"}}}


def test_report_that_matches(tmp_path):
    validate(REPORT, write_report(tmp_path / "r.json", GOOD_REPORT))


@pytest.mark.parametrize("change, match", [
    ({"accuracy": {"value": 0.9, "scope": "partial"}},
     r"metric 'accuracy' has scope 'partial' but metrics-report:eval requires 'global'"),
    ({"accuracy": {"value": 0.9, "scope": "global", "population": {"split": "val"}}},
     r"metric 'accuracy' was computed on split 'val' but metrics-report:eval requires split 'test'"),
    ({"accuracy": {"value": None, "scope": "global"}}, r"metric 'accuracy' has value None"),
    ({"accuracy": None}, r"metric 'accuracy' is missing"),
])
def test_corrupted_reports(tmp_path, change, match):
    metrics = {k: v for k, v in {**GOOD_REPORT["metrics"], **change}.items() if v is not None}
    path = write_report(tmp_path / "r.json", {**GOOD_REPORT, "metrics": metrics})
    with pytest.raises(ContractError, match=match) as exc:
        validate(REPORT, path)
    assert exc.value.key == "metrics.accuracy"


def test_report_without_metrics(tmp_path):
    with pytest.raises(ContractError, match=r'r.json: the report has no "metrics" object'):
        validate(REPORT, write_report(tmp_path / "r.json", {"accuracy": 1}))


def test_error_renders_file_line_message_and_hint(tmp_path):
    path = write_csv(tmp_path / "s.csv", ["id", "split"], [["a", "train"], ["a", "test"]])
    with pytest.raises(ContractError) as exc:
        validate(SPLIT, path)
    assert re.fullmatch(r".*s.csv:3: id 'a' is in split 'train' \(line 2\) and in split 'test'; "
                        r"split-manifest:split promises disjoint splits\n  help: assign every "
                        r"example to exactly one split", exc.value.render())
    assert exc.value.exit_code == 1 and isinstance(exc.value, ValueError)


def test_a_quoted_empty_string_in_a_one_column_csv_is_a_missing_value(tmp_path):
    # Found by hypothesis: Python's csv module writes an empty one-column row as "".
    keys = TabularSchema("keys", columns=[Column("id", "string", role="key")])
    path = tmp_path / "keys.csv"
    path.write_text('id\na\n""\nc\n')
    with pytest.raises(ContractError, match=r"row 2 has no value in column 'id', which "
                                            r"tabular-schema:keys declares not nullable"):
        validate(keys, path)
