"""Accuracy of the model on the test split, per class and overall, as a metrics report."""
import argparse
import json
import pathlib

import torch
from images import cnn, tensors

parser = argparse.ArgumentParser()
for name in ("model", "examples", "labels", "report"):
    parser.add_argument(f"--{name}", required=True)
args = parser.parse_args()
labels = json.loads(pathlib.Path(args.labels).read_text())
net = cnn(len(labels))
net.load_state_dict(torch.load(pathlib.Path(args.model, "model.pt"), map_location="cpu"))
x, y = tensors(pathlib.Path(args.examples, "test"), labels)
with torch.no_grad():
    hit = net(x).argmax(1) == y
metrics = {"accuracy": {"value": hit.float().mean().item(), "scope": "global"}}
for name, code in labels.items():
    metrics[f"recall_{name}"] = {"value": hit[y == code].float().mean().item(), "scope": "global"}
pathlib.Path(args.report).write_text(json.dumps(
    {"population": {"split": "test", "examples": len(y)}, "metrics": metrics}, indent=2))
