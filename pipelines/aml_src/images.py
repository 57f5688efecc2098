"""The 8x8 binary PGM images and the small CNN both steps share."""
import pathlib

import torch
from torch import nn


def tensors(folder: pathlib.Path, labels: dict[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
    files = sorted(p for p in folder.glob("*/*.pgm") if p.parent.name in labels)
    pixels = [list(p.read_bytes().partition(b"\n255\n")[2][:64]) for p in files]
    x = torch.tensor(pixels, dtype=torch.float32).view(-1, 1, 8, 8) / 255.0
    return x, torch.tensor([labels[p.parent.name] for p in files])


def cnn(classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16 * 4 * 4, classes))
