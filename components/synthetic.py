"""The example's data set: a few hundred tiny synthetic defect images and a split manifest.

Deterministic for a given seed; takes well under a second to make.
"""
from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

from components.images import SIZE, write_pgm

CLASSES = ("ok", "scratch", "dent")


def _image(kind: str, rng: random.Random) -> list[int]:
    px = [rng.randint(20, 60) for _ in range(SIZE * SIZE)]
    if kind == "scratch":
        offset = rng.randint(-2, 2)
        for i in range(SIZE):
            j = min(SIZE - 1, max(0, i + offset))
            px[i * SIZE + j] = rng.randint(200, 255)
    elif kind == "dent":
        cx, cy = rng.randint(2, SIZE - 3), rng.randint(2, SIZE - 3)
        for y in range(cy - 1, cy + 2):
            for x in range(cx - 1, cx + 2):
                px[y * SIZE + x] = rng.randint(150, 200)
    return px


def make_dataset(dest: Path, per_class: int = 100, seed: int = 7) -> tuple[Path, Path]:
    """Write ``dest/raw/<class>/<n>.pgm`` and ``dest/split.csv`` (id,split); return both paths."""
    rng = random.Random(seed)
    raw = dest / "raw"
    rows = []
    for kind in CLASSES:
        (raw / kind).mkdir(parents=True, exist_ok=True)
        for n in range(per_class):
            name = f"{kind}/{n:04d}.pgm"
            write_pgm(raw / name, _image(kind, rng))
            r = rng.random()
            rows.append((name, "train" if r < 0.7 else "val" if r < 0.85 else "test"))
    split = dest / "split.csv"
    with split.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "split"])
        writer.writerows(rows)
    return raw, split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    raw, split = make_dataset(args.dest, args.per_class, args.seed)
    print(f"wrote {raw} and {split}")


if __name__ == "__main__":
    main()
