"""MLflow loader of the example's softmax classifier (``weights.json``): standard library and
numpy only, so the model loads wherever MLflow does."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class SoftmaxModel:
    """Class probabilities of flattened 8x8 images (rows of 64 floats in 0..1)."""

    def __init__(self, labels: dict[str, int], weights: list[list[float]]) -> None:
        self.labels, self.weights = labels, weights

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import numpy as np

        rows = np.asarray(model_input, dtype="float64").reshape(-1, len(self.weights[0]) - 1)
        out = []
        for x in rows.tolist():
            scores = [w[-1] + sum(wi * xi for wi, xi in zip(w, x)) for w in self.weights]
            top = max(scores)
            exps = [math.exp(s - top) for s in scores]
            out.append([e / sum(exps) for e in exps])
        return np.asarray(out, dtype="float64")


def _load_pyfunc(path: str) -> SoftmaxModel:
    saved = json.loads((Path(path) / "weights.json").read_text())
    return SoftmaxModel(saved["labels"], saved["weights"])
