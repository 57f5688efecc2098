"""Benchmark: run-time contract validation against a plain read with the same library.

A 1,000,000-row table as CSV and as Parquet (validated through pyarrow, baseline
``pyarrow.csv.read_csv`` / ``pyarrow.parquet.read_table``) and a 100,000-row split manifest
(validated with the csv module, baseline a plain ``csv.reader`` pass). Prints a Markdown table
of rows/s and validate/read ratios (best of --repeat runs) for docs/performance.md.

    python benchmarks/bench_contracts.py [--rows 1000000] [--manifest-rows 100000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import csv
import random
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from goals import Goals

from mlpipe.contracts import Column, SplitManifest, TabularSchema, validate

SCHEMA = TabularSchema("parts", columns=[
    Column("id", "int64", role="key"), Column("length", "float64", unit="mm"),
    Column("width", "float64", unit="mm"), Column("weight", "float64", unit="kg", nullable=True),
    Column("supplier", "string"), Column("defect", "bool", role="label")])
MANIFEST = SplitManifest("split", splits=["train", "val", "test"], required=["train", "test"])


def make_table(rows: int) -> pa.Table:
    rng = random.Random(1)
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "length": pa.array([rng.uniform(1, 100) for _ in range(rows)]),
        "width": pa.array([rng.uniform(1, 50) for _ in range(rows)]),
        "weight": pa.array([None if i % 97 == 0 else rng.uniform(0, 5) for i in range(rows)]),
        "supplier": pa.array([f"s{i % 40}" for i in range(rows)]),
        "defect": pa.array([i % 7 == 0 for i in range(rows)]),
    }).cast(SCHEMA.arrow_schema())


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def read_manifest(path: Path) -> None:
    with path.open(newline="") as fh:
        for _ in csv.reader(fh):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--manifest-rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="100,000 rows and 10,000 manifest rows, best of 2 (no goal)")
    Goals.add_argument(parser)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.manifest_rows, args.repeat = 100_000, 10_000, 2
    Goals.from_args(args).save()  # no goal of its own: the ratios are reported
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        table = make_table(args.rows)
        csv_path, pq_path, split_path = d / "parts.csv", d / "parts.parquet", d / "split.csv"
        pacsv.write_csv(table.rename_columns(SCHEMA.csv_header()), csv_path)
        pq.write_table(table, pq_path)
        bare_path = d / "parts-nostats.parquet"
        pq.write_table(table, bare_path, write_statistics=False)
        typed = pacsv.ConvertOptions(column_types={
            h: table.schema.field(c.name).type
            for h, c in zip(SCHEMA.csv_header(), SCHEMA.columns)})
        with split_path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "split"])
            w.writerows((f"img/{i:07d}.png", ("train", "train", "val", "test")[i % 4])
                        for i in range(args.manifest_rows))
        cases = [
            ("CSV table", args.rows, csv_path, SCHEMA, "pyarrow.csv.read_csv",
             lambda: pacsv.read_csv(csv_path)),
            ("CSV table", args.rows, csv_path, SCHEMA, "read_csv with the schema's types",
             lambda: pacsv.read_csv(csv_path, convert_options=typed)),
            ("Parquet table (with statistics)", args.rows, pq_path, SCHEMA,
             "pyarrow.parquet.read_table", lambda: pq.read_table(pq_path)),
            ("Parquet table (no statistics)", args.rows, bare_path, SCHEMA,
             "pyarrow.parquet.read_table", lambda: pq.read_table(bare_path)),
            ("split manifest", args.manifest_rows, split_path, MANIFEST, "csv.reader pass",
             lambda: read_manifest(split_path)),
        ]
        print("| artifact | rows | validate (s) | rows/s | baseline | read (s) | validate/read |")
        print("|---|---:|---:|---:|---|---:|---:|")
        for name, rows, path, contract, baseline, read in cases:
            t_read = best(read, args.repeat)
            t_val = best(lambda c=contract, p=path: validate(c, p), args.repeat)
            print(f"| {name} | {rows:,} | {t_val:.4f} | {rows / t_val:,.0f} | {baseline} | "
                  f"{t_read:.4f} | {t_val / t_read:.3f} |")


if __name__ == "__main__":
    main()
