"""What counting a table input's rows per split (issue 40: ``mlpipe/runtime/splitrows.py``)
adds to the step runtime's input check: on a CSV table that declares a split column, the
contract's own validation (``mlpipe.contracts.validate``, what the input check did before)
against the count, alternated in one run, best of the runs each.

Goal: the count costs at most as much as the validation it follows (ratio <= 1.0), so the
input check of such a table at most doubles. ``--quick``: 200,000 rows, 5 runs; the full form:
1,000,000 rows, 7 runs. Run: ``.venv/bin/python benchmarks/bench_splitrows.py [--quick]``.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from goals import Goals

from mlpipe.contracts import Column, TabularSchema, validate
from mlpipe.runtime.splitrows import split_rows

TABLE = TabularSchema("features", columns=[Column("id", "string", role="key"),
                                           Column("x", "float64"),
                                           Column("split", "string", role="split")],
                      splits=["train", "test"])


def _write(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        fh.write("id,x,split\n")
        fh.writelines(f"r{i},{i * 0.5},{'test' if i % 5 == 0 else 'train'}\n"
                      for i in range(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 5 runs")
    Goals.add_argument(parser)
    args = parser.parse_args()
    rows, runs = (200_000, 5) if args.quick else (1_000_000, 7)
    goals = Goals.from_args(args)
    with tempfile.TemporaryDirectory(prefix="mlpipe-splitrows-") as tmp:
        path = Path(tmp) / "features.csv"
        _write(path, rows)
        checked, counted = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            validate(TABLE, str(path))
            checked.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            found = split_rows(TABLE, str(path))
            counted.append(time.perf_counter() - t0)
        assert found == {"by": "split", "rows": {"test": (rows + 4) // 5,
                                                 "train": rows - (rows + 4) // 5}}, found
    ratio = min(counted) / min(checked)
    print(f"| {rows:,} rows | "
          f"{min(checked):.3f} s | {min(counted):.3f} s | {ratio:.2f}x |")
    goals.check(f"split rows counted, {rows:,}-row table", ratio, "<=", 1.0,
                unit="x the contract's validation",
                detail=f"validation {min(checked):.3f} s, count {min(counted):.3f} s, best of "
                       f"{runs}")
    goals.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
