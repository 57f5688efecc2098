"""How many rows of each split a table input holds, counted by its declared split column (or
its ``{split}/{file}`` folders) when the step runtime has validated it: what an evaluation that
reports its population can be held to, without the body's help. Reads the table only; never
raises (a table it cannot count is recorded as not counted).
"""
from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path
from typing import Any

_SUFFIXES = (".csv", ".parquet", ".pq")
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")   # "length [mm]": a column header with its unit


def _tables(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _SUFFIXES
                      and not any(part.startswith(".") for part in p.relative_to(path).parts))
    return [path]


def _count_csv(path: Path, column: str) -> Counter[str] | None:
    with path.open(newline="", encoding="utf-8") as fh:
        cells = next(csv.reader(fh), [])
    header = [_UNIT.sub("", cell) for cell in cells]
    if column not in header:
        return None
    cell = cells[header.index(column)]
    try:   # the split column alone, read by pyarrow (which validated the table already)
        import pyarrow as pa
        from pyarrow import csv as pacsv
    except ImportError:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = csv.reader(fh)
            next(rows, None)
            at = header.index(column)
            return Counter(row[at] for row in rows if len(row) > at)
    return _counted(pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        include_columns=[cell], column_types={cell: pa.string()})).column(cell))


def _counted(values: Any) -> Counter[str]:
    """A pyarrow column's values, counted."""
    counts = values.value_counts()
    return Counter({str(v): int(n) for v, n in zip(counts.field("values").to_pylist(),
                                                   counts.field("counts").to_pylist())})


def _count_parquet(path: Path, column: str) -> Counter[str] | None:
    import pyarrow.parquet as pq

    return _counted(pq.read_table(path, columns=[column]).column(column))


def _count(path: Path, column: str) -> Counter[str] | None:
    suffix = path.suffix.lower()
    if not suffix:   # a file named by its port (Azure ML's outputs): tell by its bytes
        with path.open("rb") as fh:
            suffix = ".parquet" if fh.read(4) == b"PAR1" else ".csv"
    return _count_csv(path, column) if suffix == ".csv" else _count_parquet(path, column)


def split_rows(contract: Any, path: str) -> dict[str, Any] | None:
    """The rows per split of a table whose contract declares its split (a ``TabularSchema``
    with a ``role="split"`` column, or laid out as ``{split}/{file}``): ``{"by": column name
    or "folder", "rows": {split: count}}``; None for any other contract or a table that could
    not be counted.

    Example:
        >>> split_rows(TABLE, "features.csv")
        {'by': 'split', 'rows': {'test': 4, 'train': 12}}
    """
    column = getattr(contract, "split_column", None)
    layout = getattr(contract, "layout", None)
    if not isinstance(column, str) and layout is None:
        return None
    try:
        root = Path(path)
        counts: Counter[str] = Counter()
        for table in _tables(root):
            if not isinstance(column, str):   # one folder of tables per split
                counts[table.relative_to(root).parts[0]] += _rows_in(table)
                continue
            found = _count(table, column)
            if found is None:
                return None
            counts.update(found)
    except Exception:   # a table the contract accepted but this reader cannot count
        return None
    return {"by": column if isinstance(column, str) else "folder",
            "rows": dict(sorted(counts.items()))}


def _rows_in(path: Path) -> int:
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            return max(sum(1 for _ in csv.reader(fh)) - 1, 0)
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)
