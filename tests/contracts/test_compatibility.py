"""Compile-time compatibility of each contract kind: compatible and incompatible pairs."""
import pytest

from mlpipe.contracts import (
    Column,
    ImageFolder,
    LabelMap,
    Metric,
    MetricsReport,
    MLflowModel,
    ModelSignature,
    SplitManifest,
    TabularSchema,
    Tensor,
    compatibility,
    version_satisfies,
)
from mlpipe.errors import DefinitionError

LABELS = LabelMap("labels", classes=["ok", "scratch", "dent"], version="2")
PARTS = TabularSchema("parts", columns=[Column("id", "string", role="key"),
                                        Column("length", "float64", unit="mm"),
                                        Column("width", "float64", unit="mm")])


def kinds(produced, required):
    return [(d.kind, d.message) for d in compatibility(produced, required)]


@pytest.mark.parametrize("produced, required", [
    (LABELS, LABELS),
    (LABELS, LabelMap),
    (LabelMap("labels", classes={"ok": 0, "scratch": 1, "dent": 2}, version="2.3"), LABELS),
    (PARTS, TabularSchema("parts", columns=[Column("length", "float64", unit="mm")])),
    (PARTS, TabularSchema("other", ordered=True, columns=[Column("length", "float64", unit="mm"),
                                                          Column("width", "float64", unit="mm")])),
    (TabularSchema(columns=[Column("x", "int64")]),
     TabularSchema(columns=[Column("x", "int64", nullable=True)])),
    (SplitManifest(splits=["train", "test"], required=["train", "test"]),
     SplitManifest(splits=["train", "val", "test"], required=["test"])),
    (ImageFolder(classes=["ok"], file_kinds=["png"]), ImageFolder(classes=LABELS)),
    (MLflowModel(inputs=Tensor("float32", (-1, 4)), labels=LABELS),
     ModelSignature(inputs=Tensor("float32", (-1, 4)), labels=LABELS)),
    (MetricsReport(metrics=[Metric("accuracy", split="test"), "loss"]),
     MetricsReport(metrics=[Metric("accuracy", split="test")])),
])
def test_compatible_pairs_produce_no_difference(produced, required):
    assert compatibility(produced, required) == []


def test_swapped_label_codes_name_the_class_and_both_codes():
    swapped = LabelMap("labels", classes=["ok", "dent", "scratch"], version="2")
    assert kinds(swapped, LABELS) == [
        ("label-encoding-mismatch", "class 'scratch' is encoded 2 by the producer but 1 by the consumer"),
        ("label-encoding-mismatch", "class 'dent' is encoded 1 by the producer but 2 by the consumer"),
    ]


def test_label_map_extra_and_missing_classes():
    fewer = LabelMap("labels", classes=["ok", "scratch"], version="2")
    assert kinds(fewer, LABELS) == [("label-encoding-mismatch",
                                     "class 'dent' (code 2 for the consumer) is missing from the "
                                     "producer's encoding {ok=0, scratch=1}")]
    assert kinds(LABELS, fewer)[0][1].startswith("class 'dent' (code 2) is produced but")


def test_version_rule_same_major_newer_minor():
    assert version_satisfies("2.1", "2") and version_satisfies("2", "2.0")
    assert not version_satisfies("2", "2.1") and not version_satisfies("3", "2")
    older = LabelMap("labels", classes=["ok", "scratch", "dent"], version="1")
    [(kind, message)] = kinds(older, LABELS)
    assert kind == "contract-version-incompatible"
    assert message.startswith("label-map:labels version 1 is produced but version 2 is required")
    # Versions of differently named contracts are not compared.
    assert compatibility(LabelMap("x", classes=["ok", "scratch", "dent"]), LABELS) == []


def test_bad_version_is_a_definition_error():
    with pytest.raises(DefinitionError, match=r"contract version '2a' is not MAJOR or MAJOR.MINOR"):
        LabelMap("labels", version="2a")


def test_different_kinds():
    assert kinds(LABELS, SplitManifest) == [
        ("contract-kind-mismatch", "label-map:labels is produced but split-manifest is required")]


@pytest.mark.parametrize("column, kind, message", [
    (Column("height", "float64"), "schema-column-missing",
     "column 'height' (float64) is required but not produced (produced: id, length, width)"),
    (Column("length", "float32", unit="mm"), "schema-dtype-mismatch",
     "column 'length' is float64 but the consumer requires float32"),
    (Column("length", "float64", unit="cm"), "schema-unit-mismatch",
     "column 'length' is in 'mm' but the consumer requires 'cm' (1 mm = 0.1 cm)"),
    (Column("length", "float64"), "schema-unit-mismatch",
     "column 'length' is in 'mm' but the consumer requires no unit"),
    (Column("length", "float64", unit="mm", role="label"), "contract-requirement-unmet",
     "column 'length' is produced as a feature but the consumer reads it as a label"),
])
def test_schema_differences(column, kind, message):
    assert kinds(PARTS, TabularSchema("parts", columns=[column])) == [(kind, message)]


def test_nullable_column_fails_non_null_requirement():
    gappy = TabularSchema(columns=[Column("x", "int64", nullable=True)])
    assert kinds(gappy, TabularSchema(columns=[Column("x", "int64")])) == [
        ("schema-nullability-mismatch",
         "column 'x' may be null but the consumer requires a value in every row")]


def test_feature_order_only_where_the_consumer_requires_it():
    swapped = [Column("width", "float64", unit="mm"), Column("length", "float64", unit="mm")]
    assert compatibility(PARTS, TabularSchema("parts", columns=swapped)) == []
    [(kind, message)] = kinds(PARTS, TabularSchema("parts", columns=swapped, ordered=True))
    assert kind == "feature-order-mismatch"
    assert message == ("feature 1 is 'length' but the consumer requires 'width' (produced order: "
                       "length, width; required: width, length)")


def test_split_manifest_differences():
    overlapping = SplitManifest(required=["train", "test"], disjoint=False)
    train_only = SplitManifest(required=["train"])
    needs = SplitManifest(required=["train", "test"])
    assert [k for k, _ in kinds(overlapping, needs)] == ["split-disjointness-not-promised"]
    assert kinds(train_only, needs) == [
        ("split-missing", "the consumer requires split 'test' but split-manifest guarantees only train")]
    assert compatibility(overlapping, SplitManifest(disjoint=False)) == []
    assert kinds(SplitManifest(splits=["train", "holdout"]), SplitManifest(splits=["train", "test"])) == [
        ("contract-requirement-unmet",
         "split 'holdout' may be produced but the consumer accepts only train, test")]


def test_image_folder_differences():
    by_split = ImageFolder(layout="{split}/{class}/{file}")
    assert kinds(ImageFolder(), by_split) == [
        ("contract-requirement-unmet",
         "layout is '{class}/{file}' but the consumer reads '{split}/{class}/{file}'")]
    assert kinds(ImageFolder(classes=["ok", "crack"]), ImageFolder(classes=LABELS)) == [
        ("contract-requirement-unmet",
         "class 'crack' may be produced but the consumer accepts only ok, scratch, dent")]
    assert kinds(ImageFolder(file_kinds=["png", "jpeg"]), ImageFolder(file_kinds=["png"]))[0][1] == (
        "file kind 'jpeg' may be produced but the consumer accepts only png")


def test_model_signature_differences():
    cols = [Column("length", "float64"), Column("width", "float64")]
    model = MLflowModel(inputs=cols, labels=LABELS)
    swapped_labels = LabelMap("labels", classes=["ok", "dent", "scratch"], version="2")
    assert [k for k, _ in kinds(model, MLflowModel(inputs=cols[::-1]))] == ["feature-order-mismatch"]
    assert [k for k, _ in kinds(model, MLflowModel(inputs=[Column("length", "float32"), cols[1]]))] == [
        "schema-dtype-mismatch"]
    assert kinds(model, MLflowModel(labels=swapped_labels))[0] == (
        "label-encoding-mismatch",
        "model labels: class 'dent' is encoded 2 by the producer but 1 by the consumer")
    assert kinds(ModelSignature(), MLflowModel) == [
        ("contract-kind-mismatch", "model-signature is produced but mlflow-model is required")]
    assert kinds(MLflowModel(inputs=Tensor("float32", (-1, 4))),
                 MLflowModel(inputs=Tensor("float64", (-1, 4)))) == [
        ("schema-dtype-mismatch", "model inputs are tensor float32[-1, 4] but the consumer "
                                  "requires tensor float64[-1, 4]")]


def test_metrics_report_differences():
    partial = MetricsReport(metrics=[Metric("accuracy", scope="partial", split="test")])
    want = MetricsReport(metrics=[Metric("accuracy", split="test")])
    assert kinds(partial, want) == [("metric-scope-mismatch",
                                     "metric 'accuracy' is partial but the consumer requires a "
                                     "global value")]
    on_val = MetricsReport(metrics=[Metric("accuracy", split="val")])
    assert kinds(on_val, want) == [("contract-requirement-unmet",
                                    "metric 'accuracy' is computed on split 'val' but the "
                                    "consumer requires split 'test'")]
    assert kinds(MetricsReport(metrics=["loss"]), want)[0][1].startswith(
        "metric 'accuracy' is required but metrics-report does not promise it")


@pytest.mark.parametrize("make, match", [
    (lambda: Column("x", "float"), r"column 'x' has dtype 'float', which is not one of"),
    (lambda: Column("x", "int64", role="target"), r"column 'x' has role 'target'"),
    (lambda: TabularSchema(columns=[Column("x", "int64"), Column("x", "string")]),
     r"declares column 'x' twice"),
    (lambda: LabelMap(classes=["a", "a"]), r"class 'a' appears twice"),
    (lambda: LabelMap(classes={"a": 0, "b": 0}), r"code 0 appears twice"),
    (lambda: SplitManifest(splits=["train"], required=["test"]),
     r"requires split 'test' but allows only train"),
    (lambda: ImageFolder(layout="{file}/{class}"), r"layout '\{file\}/\{class\}' is not a template"),
    (lambda: ImageFolder(file_kinds=["gif"]), r"file kind 'gif' is not one of"),
    (lambda: Metric("acc", scope="local"), r"scope 'local', which is not global or partial"),
    (lambda: Tensor("float", (-1,)), r"Tensor dtype 'float' is not one of"),
])
def test_malformed_contracts_raise_definition_errors(make, match):
    with pytest.raises(DefinitionError, match=match):
        make()


def test_contracts_are_hashable_values_with_a_json_spec():
    import json

    assert LABELS == LabelMap("labels", classes=("ok", "scratch", "dent"), version="2")
    assert hash(LABELS) == hash(LabelMap("labels", classes=["ok", "scratch", "dent"], version="2"))
    model = MLflowModel("m", inputs=[Column("x", "float64")], labels=LABELS)
    spec = json.loads(json.dumps(model.spec()))
    assert spec["labels"]["classes"] == {"ok": 0, "scratch": 1, "dent": 2}
    assert spec["inputs"][0]["dtype"] == "float64" and spec["kind"] == "mlflow-model"
