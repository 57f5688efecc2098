"""MLflow loader of the example's CNN (``model.pt``, a state dict saved on the CPU, and
``labels.json``): needs torch, loads on any compute (``map_location="cpu"``)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def net(n_pixels: int, n_classes: int) -> Any:
    """The example CNN for square images of ``n_pixels`` pixels (train_cnn's architecture)."""
    from torch import nn

    size = math.isqrt(n_pixels)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16 * (size // 2) ** 2, n_classes))


class CnnModel:
    """Class probabilities of flattened square images (rows of floats in 0..1)."""

    def __init__(self, module: Any, size: int) -> None:
        self.module, self.size = module, size

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import numpy as np
        import torch

        x = torch.tensor(np.asarray(model_input, dtype="float32")).view(-1, 1, self.size,
                                                                        self.size)
        with torch.no_grad():
            return torch.softmax(self.module(x), dim=1).numpy().astype("float64")


def _load_pyfunc(path: str) -> CnnModel:
    import torch

    labels = json.loads((Path(path) / "labels.json").read_text())
    state = torch.load(Path(path) / "model.pt", map_location="cpu", weights_only=True)
    size = 2 * math.isqrt(state["6.weight"].shape[1] // 16)   # the linear layer's inputs
    module = net(size * size, len(labels))
    module.load_state_dict(state)
    module.eval()
    return CnnModel(module, size)
