"""The visual-defect classifier's components: prepare, train, evaluate."""
from __future__ import annotations

import csv
import json
import math
import random
import shutil
from pathlib import Path
from typing import Annotated

from components.images import SIZE, read_pgm
from components.serving import write_pyfunc
from mlpipe import Compute, Environment, Input, Output, Param, Range, component
from mlpipe.contracts import (
    ImageFolder,
    LabelMap,
    Metric,
    MetricsReport,
    MLflowModel,
    SplitManifest,
    Tensor,
)
from mlpipe.runtime import log_metric

CLASSES = ("ok", "scratch", "dent")
SPLITS = ("train", "val", "test")

# What each artifact means; `mlpipe check` compares them on every edge and the local run
# validates every output against its contract before anything downstream reads it.
LABELS = LabelMap("defect-labels", classes=CLASSES, version="2")
SPLIT = SplitManifest("defect-split", splits=SPLITS, required=("train", "test"))
RAW = ImageFolder("defect-raw", layout="{class}/{file}", classes=LABELS, file_kinds=["pgm"])
EXAMPLES = ImageFolder("defect-examples", layout="{split}/{class}/{file}", classes=LABELS,
                       splits=SPLITS, file_kinds=["pgm"])
MODEL = MLflowModel("defect-softmax", inputs=Tensor("float64", (-1, SIZE * SIZE)),
                    outputs=Tensor("float64", (-1, len(CLASSES))), labels=LABELS)
REPORT = MetricsReport("defect-evaluation", metrics=[
    Metric("accuracy", split="test"), *(Metric(f"recall_{c}", split="test") for c in CLASSES)])

# The port types: the body receives a Path, and type checkers see one.
Labels = Annotated[Path, LABELS]
Split = Annotated[Path, SPLIT]
Raw = Annotated[Path, RAW]
Examples = Annotated[Path, EXAMPLES]
Model = Annotated[Path, MODEL]
Report = Annotated[Path, REPORT]


@component(version="1.3.0", environment=Environment("defect-cpu", version="4"),
           compute=Compute("cpu-cluster", sku="Standard_D4s_v3"))
def prepare(raw: Input[Raw], split: Input[Split],
            examples: Output[Examples], labels: Output[Labels],
            seed: Param[int] = 13):
    """Sort the raw images into examples/<split>/<class>/ and write the label encoding."""
    with open(split, newline="") as fh:
        assignment = {row["id"]: row["split"] for row in csv.DictReader(fh)}
    for image_id, part in sorted(assignment.items()):
        target = Path(examples) / part / image_id
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(raw) / image_id, target)
    LABELS.write(labels)


def _load(folder: Path, encoding: dict[str, int]) -> list[tuple[list[float], int]]:
    return [(read_pgm(p), encoding[p.parent.name])
            for p in sorted(folder.glob("*/*.pgm")) if p.parent.name in encoding]


def _softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _predict(weights: list[list[float]], x: list[float]) -> int:
    scores = [w[-1] + sum(wi * xi for wi, xi in zip(w, x)) for w in weights]
    return scores.index(max(scores))


# A single-process softmax fit: declaring it distributed would only start idle copies (MP512,
# MP513). The distributed CNN trainer is components.defect_ddp.train.
@component(version="2.1.0", environment=Environment("defect-cpu", version="4"),
           compute=Compute("cpu-cluster", sku="Standard_D4s_v3"))
def train(examples: Input[Examples], labels: Input[Labels],
          model: Output[Model], epochs: Annotated[int, Range(1, 200)] = 10,
          learning_rate: Annotated[float, Range(0.0001, 1.0)] = 0.5, seed: Param[int] = 13):
    """Fit a softmax classifier on the training split with plain SGD."""
    encoding = json.loads(Path(labels).read_text())
    data = _load(Path(examples) / "train", encoding)
    rng = random.Random(seed)
    n_features, n_classes = len(data[0][0]), len(encoding)
    weights = [[0.0] * (n_features + 1) for _ in range(n_classes)]
    for _ in range(epochs):
        rng.shuffle(data)
        for x, y in data:
            probs = _softmax([w[-1] + sum(wi * xi for wi, xi in zip(w, x)) for w in weights])
            for c in range(n_classes):
                grad = probs[c] - (1.0 if c == y else 0.0)
                row = weights[c]
                for i, xi in enumerate(x):
                    row[i] -= learning_rate * grad * xi
                row[-1] -= learning_rate * grad
    hits = sum(_predict(weights, x) == y for x, y in data)
    log_metric("train_accuracy", hits / len(data), scope="global",
               population=f"train, {len(data)} examples")
    out = Path(model)
    out.mkdir(parents=True, exist_ok=True)
    (out / "weights.json").write_text(json.dumps({"labels": encoding, "weights": weights}))
    # an MLflow model: mlflow.pyfunc.load_model loads it through code/defect_softmax.py
    write_pyfunc(out, "defect_softmax", MODEL.mlmodel_fields(), model_format="softmax-json")


@component(version="1.1.0", environment=Environment("defect-cpu", version="4"),
           compute=Compute("cpu-cluster", sku="Standard_D4s_v3"))
def evaluate(model: Input[Model], examples: Input[Examples],
             labels: Input[Labels], report: Output[Report]):
    """Accuracy of the model on the test split, per class and overall."""
    saved = json.loads((Path(model) / "weights.json").read_text())
    encoding = json.loads(Path(labels).read_text())
    if saved["labels"] != encoding:
        raise ValueError(f"model was trained with labels {saved['labels']}, evaluation uses "
                         f"{encoding}")
    data = _load(Path(examples) / "test", encoding)
    correct = dict.fromkeys(encoding, 0)
    seen = dict.fromkeys(encoding, 0)
    names = {v: k for k, v in encoding.items()}
    for x, y in data:
        seen[names[y]] += 1
        correct[names[y]] += int(_predict(saved["weights"], x) == y)
    total = sum(seen.values())
    population = f"test, {total} examples"
    log_metric("accuracy", sum(correct.values()) / total if total else 0.0, scope="global",
               population=population)
    for c in encoding:
        log_metric(f"recall_{c}", correct[c] / seen[c] if seen[c] else 0.0, scope="global",
                   population=population)
    Path(report).write_text(json.dumps({
        "population": {"split": "test", "examples": total},
        "metrics": {
            "accuracy": {"value": sum(correct.values()) / total if total else 0.0,
                         "scope": "global"},
            **{f"recall_{c}": {"value": correct[c] / seen[c] if seen[c] else 0.0,
                               "scope": "global"} for c in encoding},
        },
    }, indent=2))
