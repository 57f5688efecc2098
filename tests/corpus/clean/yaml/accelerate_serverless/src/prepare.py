"""Cut the raw snapshot by the reviewed split manifest (id,split): no split is made here."""
import argparse
import csv
import shutil
from pathlib import Path

parser = argparse.ArgumentParser()
for name in ("--raw", "--split", "--train", "--test"):
    parser.add_argument(name)
args = parser.parse_args()
with open(args.split, newline="") as fh:
    where = {row["id"]: row["split"] for row in csv.DictReader(fh)}
for path in sorted(Path(args.raw).rglob("*.png")):
    part = where.get(path.stem)
    if part in ("train", "test"):
        target = Path(getattr(args, part)) / path.parent.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / path.name)
