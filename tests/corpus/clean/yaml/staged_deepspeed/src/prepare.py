"""Copy the snapshot's own train/ and test/ folders apart: the split is the snapshot's."""
import argparse
import shutil
from pathlib import Path

parser = argparse.ArgumentParser()
for name in ("--raw", "--train", "--test"):
    parser.add_argument(name)
args = parser.parse_args()
shutil.copytree(Path(args.raw) / "train", args.train, dirs_exist_ok=True)
shutil.copytree(Path(args.raw) / "test", args.test, dirs_exist_ok=True)
