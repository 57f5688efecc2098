"""Tabular schema contracts: columns with dtype, unit, nullability, role and feature order, and
the split a table declares (a ``split`` column, or one folder of tables per split).

Compile-time rule and run-time validation of CSV and Parquet files (through pyarrow, the
``mlpipe-aml[tabular]`` extra, imported only when a table is validated). Knows nothing of specs.
"""
from __future__ import annotations

import csv
import difflib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import (
    Contract,
    Difference,
    Reading,
    check_exists,
    declared_entries,
    first_bad_utf8,
    not_utf8,
)
from mlpipe.contracts.units import compare_units
from mlpipe.errors import ContractError, DefinitionError, UsageError

DTYPES = ("int32", "int64", "float32", "float64", "string", "bool", "timestamp")
ROLES = ("key", "feature", "label", "weight", "split", "other")
#: The folder layouts a table laid out by split may have: one folder per split.
_LAYOUTS = ("{split}/{file}",)
_HEADER = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\]]*)\]$")
_TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


@dataclass(frozen=True)
class Column:
    """One column of a table.

    Args:
        name: the column's name (in a CSV header, ``name`` or ``name [unit]``).
        dtype: one of ``int32 int64 float32 float64 string bool timestamp``.
        unit: the physical unit of the values (``"mm"``, ``"s"``, ``"USD"``), if any.
        nullable: whether a value may be missing.
        role: ``key``, ``feature``, ``label``, ``weight``, ``split`` (the split each row
            belongs to: a reviewed split declared in the table) or ``other``.

    Example:
        >>> Column("length", "float64", unit="mm")
    """

    name: str
    dtype: str
    unit: str | None = None
    nullable: bool = False
    role: str = "feature"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise DefinitionError(f"column {self.name!r} has dtype {self.dtype!r}, which is "
                                  f"not one of {', '.join(DTYPES)}",
                                  hint="use one of the listed dtypes")
        if self.role not in ROLES:
            raise DefinitionError(f"column {self.name!r} has role {self.role!r}, which is not "
                                  f"one of {', '.join(ROLES)}", hint="use one of the listed roles")

    @property
    def header(self) -> str:
        """How a CSV header names this column: ``length [mm]``, or ``length`` with no unit."""
        return f"{self.name} [{self.unit}]" if self.unit else self.name

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "unit": self.unit,
                "nullable": self.nullable, "role": self.role}


@dataclass(frozen=True, eq=True)
class TabularSchema(Contract):
    """A table (a CSV or Parquet file) with named, typed columns.

    Args:
        name: the schema's name; versions are compared between schemas of the same name.
        columns: the columns the table must have; a file may have more (safe widening).
        ordered: whether the order of the ``feature`` columns matters to the consumer.
        version: ``MAJOR`` or ``MAJOR.MINOR`` (see docs/contracts.md).
        splits: the split names the table declares: the values its ``split`` column may hold,
            or the folders of its layout. None: any.
        layout: ``"{split}/{file}"``: a folder with one folder of tables per split
            (``train/parts.csv``, ``test/parts.csv``); the artifact then travels as a folder.
            None: one table (a file, or a folder of tables).

    Example:
        >>> PARTS = TabularSchema("parts", columns=[Column("id", "string", role="key"),
        ...                                         Column("length", "float64", unit="mm")])
        >>> REVIEWED = TabularSchema("parts", columns=[Column("id", "string", role="key"),
        ...                                            Column("split", "string", role="split")],
        ...                          splits=["train", "test"])
    """

    kind = "tabular-schema"
    transport = AssetType.URI_FILE
    holds_examples = True
    requires = (("pyarrow", "pip install 'mlpipe-aml[tabular]'"),)
    file_suffix = ".csv"

    name: str | None = None
    columns: Sequence[Column] = ()
    ordered: bool = False
    version: str = "1"
    splits: Sequence[str] | None = None
    layout: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.splits, str):
            raise DefinitionError(f"TabularSchema {self.name!r}: splits is a list of split "
                                  f"names, not {self.splits!r}",
                                  hint=f"write splits=[{self.splits!r}]")
        if self.splits is not None:
            object.__setattr__(self, "splits", tuple(str(x) for x in self.splits))
        if self.layout is not None:
            if self.layout not in _LAYOUTS:
                raise DefinitionError(f"TabularSchema {self.name!r}: layout {self.layout!r} is "
                                      f"not one of {', '.join(map(repr, _LAYOUTS))}",
                                      hint='write layout="{split}/{file}" (one folder of '
                                           'tables per split), or no layout')
            # one folder of tables per split: the artifact is a folder, its files keep names
            object.__setattr__(self, "transport", AssetType.URI_FOLDER)
            object.__setattr__(self, "file_suffix", "")
        cols = declared_entries(f"TabularSchema {self.name!r}", self.columns, Column, "column",
                                example='write Column("name", "float64", unit="mm")')
        object.__setattr__(self, "columns", cols)
        split_cols = [c.name for c in cols if c.role == "split"]
        if len(split_cols) > 1:
            raise DefinitionError(f"TabularSchema {self.name!r} declares {len(split_cols)} "
                                  f"split columns ({', '.join(split_cols)}); a row belongs to "
                                  f"one split", hint="give one column role='split'")

    def spec(self) -> dict[str, Any]:
        """As every contract's, with ``splits`` and ``layout`` only where declared (so a
        schema that declares neither keeps the digest it had before they existed)."""
        found = super().spec()
        for key in ("splits", "layout"):
            if found.get(key) is None:
                found.pop(key, None)
        return found

    @property
    def split_column(self) -> str | None:
        """The name of the column that says which split each row belongs to, if any."""
        return next((c.name for c in self.columns if c.role == "split"), None)

    @property
    def declares_splits(self) -> bool:
        """Whether the table declares its split: a split column or a layout by split."""
        return self.split_column is not None or self.layout is not None

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    @property
    def features(self) -> tuple[str, ...]:
        """The names of the feature columns, in declared order."""
        return tuple(c.name for c in self.columns if c.role == "feature")

    def differences(self, required: Contract) -> Iterator[Difference]:
        assert isinstance(required, TabularSchema)
        if required.layout is not None and self.layout != required.layout:
            yield Difference(f"the table is laid out as {self.layout or 'one table'!r} but the "
                             f"consumer reads {required.layout!r}",
                             "declare the same layout on both ports")
        if required.splits is not None and self.splits is not None:
            extra = [x for x in self.splits if x not in required.splits]
            if extra:
                # as for images: the splits a consumer accepts are a safety contract
                yield Difference(f"split {extra[0]!r} is produced but the consumer accepts "
                                 f"only {', '.join(required.splits)}",
                                 f"stop producing {extra[0]!r}, or add it to the consumer's "
                                 f"splits", "split-missing")
        for want in required.columns:
            have = self.column(want.name)
            if have is None:
                yield Difference(f"column {want.name!r} ({want.dtype}) is required but not "
                                 f"produced (produced: {_names(self.columns)})",
                                 f"add column {want.name!r} to the producer's schema, or stop "
                                 f"requiring it", "schema-column-missing")
                continue
            if have.dtype != want.dtype:
                yield Difference(f"column {want.name!r} is {have.dtype} but the consumer "
                                 f"requires {want.dtype}",
                                 f"cast {want.name!r} to {want.dtype} in the producer, or "
                                 f"change the consumer's dtype", "schema-dtype-mismatch")
            units = compare_units(have.unit, want.unit)
            if not units.same:
                yield Difference(f"column {want.name!r} is in {_unit(have.unit)} but the "
                                 f"consumer requires {_unit(want.unit)}"
                                 f"{f' ({units.detail})' if units.detail else ''}",
                                 f"convert {want.name!r} to {_unit(want.unit)} in the producer, "
                                 f"or declare the same unit on both ports", "schema-unit-mismatch")
            if have.nullable and not want.nullable:
                yield Difference(f"column {want.name!r} may be null but the consumer requires "
                                 f"a value in every row",
                                 f"fill or drop missing {want.name!r} values in the producer "
                                 f"and declare it nullable=False", "schema-nullability-mismatch")
            if have.role != want.role:
                yield Difference(f"column {want.name!r} is produced as a {have.role} but the "
                                 f"consumer reads it as a {want.role}",
                                 "declare the same role on both ports")
        if required.ordered:
            # Order among the features both sides call features: a required feature that is
            # missing or produced with another role is reported above, not as an order.
            produced = set(self.features)
            wanted = tuple(n for n in required.features if n in produced)
            have_order = [n for n in self.features if n in wanted]
            if tuple(have_order) != wanted:
                pos = next(i for i, (a, b) in enumerate(zip(have_order, wanted)) if a != b)
                yield Difference(f"feature {pos + 1} is {have_order[pos]!r} but the consumer "
                                 f"requires {wanted[pos]!r} (produced order: "
                                 f"{', '.join(have_order)}; required: {', '.join(wanted)})",
                                 "declare the features in the same order on both ports",
                                 "feature-order-mismatch")

    def csv_header(self) -> list[str]:
        """The header row a CSV file of this schema has (units in brackets)."""
        return [c.header for c in self.columns]

    def arrow_schema(self):
        """The pyarrow schema of a Parquet file of this schema (units as field metadata)."""
        pa = _pyarrow()
        return pa.schema([pa.field(c.name, _arrow_type(pa, c.dtype), nullable=c.nullable,
                                   metadata={"unit": c.unit} if c.unit else None)
                          for c in self.columns])

    def validate(self, path: Path) -> None:
        """Check a CSV or Parquet file (or every such file in a folder) against the schema.

        Raises:
            ContractError: naming the file, the column and, for a bad value, the row.
        """
        path = Path(path)
        if self.layout is not None:
            self._validate_layout(path)
            return
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix.lower() in _TABLE_SUFFIXES)
            if not files:
                raise ContractError(f"the folder holds no .csv or .parquet file; {self.label} "
                                    f"expects a table", hint="write the table as CSV or Parquet",
                                    file=str(path))
            for f in files:
                self.validate(f)
            return
        check_exists(self, path)
        suffix = path.suffix.lower()
        if not suffix:  # a file named by its port (Azure ML's outputs): tell by its bytes
            with path.open("rb") as fh:
                suffix = ".parquet" if fh.read(4) == b"PAR1" else ".csv"
        if suffix == ".csv":
            with Reading(self.label, path):
                _validate_csv(self, path)
        elif suffix in (".parquet", ".pq"):
            _validate_parquet(self, path)
        else:
            raise ContractError(f"the file is neither .csv nor .parquet; {self.label} validates "
                                f"only those", hint="name the file *.csv or *.parquet",
                                file=str(path))
        if self.split_column is not None and self.splits is not None:
            _check_split_values(self, path, suffix)

    def _validate_layout(self, path: Path) -> None:
        """A folder of one folder of tables per split (``{split}/{file}``)."""
        check_exists(self, path)
        tables = 0
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            rel = f.relative_to(path)
            if any(part.startswith(".") for part in rel.parts):
                continue
            if len(rel.parts) != 2:
                raise ContractError(f"{rel.as_posix()!r} is {len(rel.parts)} level(s) deep but "
                                    f"{self.label} lays tables out as {self.layout!r}",
                                    hint="place every table in the folder of its split",
                                    file=str(f), key=rel.as_posix())
            if self.splits is not None and rel.parts[0] not in self.splits:
                raise ContractError(f"folder {rel.parts[0]!r} of {rel.as_posix()!r} is not a "
                                    f"split of {self.label} ({', '.join(self.splits)})",
                                    hint="use one of the declared split names",
                                    file=str(f), key=rel.as_posix())
            if f.suffix.lower() not in _TABLE_SUFFIXES:
                raise ContractError(f"{rel.as_posix()!r} is neither .csv nor .parquet; "
                                    f"{self.label} holds tables only",
                                    hint="remove it, or write it as CSV or Parquet", file=str(f))
            plain = TabularSchema(self.name, columns=self.columns, ordered=self.ordered,
                                  version=self.version, splits=self.splits)
            plain.validate(f)
            tables += 1
        if not tables:
            raise ContractError(f"the folder holds no table; {self.label} expects "
                                f"{self.layout!r} with .csv or .parquet files",
                                hint="write one folder of tables per split", file=str(path))


def _names(columns: Iterable[Column]) -> str:
    return ", ".join(c.name for c in columns) or "none"


def _unit(unit: str | None) -> str:
    return repr(unit) if unit else "no unit"


def _pyarrow():
    try:
        import pyarrow
    except ImportError:
        raise UsageError("validating a CSV or Parquet table needs pyarrow, which is not "
                         "installed", hint="pip install 'mlpipe-aml[tabular]'") from None
    return pyarrow


def _arrow_type(pa, dtype: str):
    return {"int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(),
            "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_(),
            "timestamp": pa.timestamp("us")}[dtype]


def _arrow_matches(pa, arrow_type, dtype: str) -> bool:
    if dtype == "string":
        return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    if dtype == "timestamp":
        return pa.types.is_timestamp(arrow_type)
    return arrow_type == _arrow_type(pa, dtype)


def _missing(schema: TabularSchema, col: Column, present: list[str], path: Path) -> ContractError:
    close = difflib.get_close_matches(col.name, present, n=1)
    renamed = f"; is {close[0]!r} the same column renamed?" if close else ""
    return ContractError(f"the table has no column {col.name!r} ({col.dtype}) required by "
                         f"{schema.label}{renamed}",
                         hint=f"write the column as {col.header!r}", file=str(path),
                         line=1 if path.suffix == ".csv" else None, column=col.name)


def _check_columns(schema: TabularSchema, path: Path, found: dict[str, str | None],
                   order: list[str], unit_where: str) -> None:
    for col in schema.columns:
        if col.name not in found:
            raise _missing(schema, col, order, path)
        unit = found[col.name]
        units = compare_units(unit, col.unit)
        if not units.same:
            raise ContractError(f"column {col.name!r} is in {_unit(unit)} but "
                                f"{schema.label} requires {_unit(col.unit)}"
                                f"{f' ({units.detail})' if units.detail else ''}",
                                hint=f"convert the values and state the unit {unit_where}",
                                file=str(path), line=1 if path.suffix == ".csv" else None,
                                column=col.name)
    if schema.ordered:
        have = [n for n in order if n in schema.features]
        if tuple(have) != schema.features:
            raise ContractError(f"feature columns are in the order {', '.join(have)} "
                                f"but {schema.label} requires {', '.join(schema.features)}",
                                hint="write the feature columns in the schema's order",
                                file=str(path), line=1 if path.suffix == ".csv" else None)


def _validate_csv(schema: TabularSchema, path: Path) -> None:
    pa = _pyarrow()
    from pyarrow import csv as pacsv

    with path.open(newline="", encoding="utf-8-sig") as fh:
        header = next(csv.reader(fh), None)
    if not header:
        raise ContractError(f"the file is empty; {schema.label} expects a header row",
                            hint="write the header row " + ",".join(schema.csv_header()),
                            file=str(path), line=1)
    found: dict[str, str | None] = {}
    raw_name: dict[str, str] = {}
    for cell in header:
        m = _HEADER.match(cell)
        name, unit = (m.group("name"), m.group("unit") or None) if m else (cell, None)
        if name in found:
            raise ContractError(f"column {name!r} appears twice in the header",
                                hint="give each column one header cell", file=str(path),
                                line=1, column=name)
        found[name], raw_name[name] = unit, cell
    _check_columns(schema, path, found, list(found), "in the header as 'name [unit]'")
    types = {raw_name[c.name]: _arrow_type(pa, c.dtype) for c in schema.columns}
    # CSV has no null: an empty field, quoted or not, is a missing value. (A one-column row
    # holding an empty string can only be written as "", so quoting cannot mean "present".)
    options = pacsv.ConvertOptions(column_types=types, include_columns=list(types),
                                   null_values=[""], strings_can_be_null=True,
                                   quoted_strings_can_be_null=True)
    try:
        table = pacsv.read_csv(path, convert_options=options)
    except pa.ArrowInvalid as exc:
        if first_bad_utf8(path) is not None:  # Arrow's "invalid UTF8 data" names no row
            raise not_utf8(schema.label, path) from None
        raise _conversion_error(schema, path, header, raw_name, str(exc)) from None
    for col in schema.columns:
        if col.nullable:
            continue
        values = table.column(raw_name[col.name])
        if values.null_count:
            row = _first_null(values)
            raise ContractError(f"row {row + 1} has no value in column {col.name!r}, "
                                f"which {schema.label} declares not nullable",
                                hint=f"fill the missing {col.name!r} values or declare the "
                                     f"column nullable=True", file=str(path),
                                line=_csv_line(path, row), column=col.name)


def _column_name(cell: str) -> str:
    m = _HEADER.match(cell)
    return m.group("name") if m else cell


def _check_split_values(schema: TabularSchema, path: Path, suffix: str) -> None:
    """Every value of the split column is a declared split name."""
    import pyarrow.compute as pc

    name = schema.split_column
    assert name is not None and schema.splits is not None
    if suffix == ".csv":
        from pyarrow import csv as pacsv

        with path.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
        cell = next(c for c in header if _column_name(c) == name)
        values = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            include_columns=[cell], column_types={cell: _pyarrow().string()})).column(cell)
    else:
        import pyarrow.parquet as pq

        values = pq.read_table(path, columns=[name]).column(name)
    values = pc.cast(values, _pyarrow().string())
    # pyarrow.compute defines invert, is_in, any and is_null at import: its stubs lack them
    bad = pc.invert(  # pyright: ignore[reportAttributeAccessIssue]
        pc.is_in(values,  # pyright: ignore[reportAttributeAccessIssue]
                 value_set=_pyarrow().array(list(schema.splits))))
    bad = pc.fill_null(bad, False)
    if pc.any(bad).as_py():  # pyright: ignore[reportAttributeAccessIssue] (see above)
        row = pc.index(bad, True).as_py()
        raise ContractError(f"row {row + 1} of split column {name!r} holds "
                            f"{values[row].as_py()!r}, which is not a split of {schema.label} "
                            f"({', '.join(schema.splits)})",
                            hint="write only the declared split names, or declare the split",
                            file=str(path), line=_csv_line(path, row) if suffix == ".csv"
                            else None, column=name)


def _first_null(values) -> int:
    import pyarrow.compute as pc

    # pyarrow.compute defines is_null at import: its stubs lack it
    return pc.index(pc.is_null(values), True).as_py()  # pyright: ignore[reportAttributeAccessIssue]


def _csv_line(path: Path, row: int) -> int:
    """The file line on which data row ``row`` (0-based) starts, fields spanning lines included."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        line = reader.line_num
        for i, _ in enumerate(reader):
            if i == row:
                return line + 1
            line = reader.line_num
    return line


def _ragged_line(path: Path, width: int) -> int | None:
    """The line on which the first row without ``width`` fields starts, if one does."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        line = reader.line_num
        for fields in reader:
            if fields and len(fields) != width:
                return line + 1
            line = reader.line_num
    return None


def _conversion_error(schema: TabularSchema, path: Path, header: list[str],
                      raw_name: dict[str, str], text: str) -> ContractError:
    m = re.search(r"CSV column #(\d+).*invalid value '(.*)'", text, re.S)
    if m is None:  # Arrow quotes the rows after its sentence: keep the sentence, find the row
        shown = text.split(": ", 2)[:2] if text.startswith("CSV parse error") else [text]
        return ContractError(f"the file cannot be read as CSV: "
                             f"{' '.join(': '.join(shown).split())}",
                             hint="fix the file so it is well-formed CSV (every row with the "
                                  "header's fields)", file=str(path),
                             line=_ragged_line(path, len(header)))
    index, bad = int(m.group(1)), m.group(2)
    cell = header[index]
    col = next(c for c in schema.columns if raw_name[c.name] == cell)
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        next(reader)
        start, row = 2, 0
        for row, fields in enumerate(reader, 1):  # noqa: B007  (row is read after the loop)
            if index < len(fields) and fields[index] == bad:
                break
            start = reader.line_num + 1
    return ContractError(f"row {row}, column {col.name!r} holds {bad!r}, which is not "
                         f"a {col.dtype} as {schema.label} requires",
                         hint=f"write {col.dtype} values in {col.name!r}, or change the "
                              f"column's dtype", file=str(path), line=start, column=col.name)


def _validate_parquet(schema: TabularSchema, path: Path) -> None:
    pa = _pyarrow()
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path)
        meta.schema_arrow  # noqa: B018  (decoded here: a name that is not UTF-8 raises)
    except UnicodeDecodeError:
        raise ContractError("the file cannot be read as Parquet: its schema holds a name that "
                            "is not UTF-8", hint="write a valid Parquet file",
                            file=str(path)) from None
    except (pa.ArrowInvalid, OSError) as exc:
        shown = " ".join(str(exc).split())  # Arrow's messages end in newlines
        raise ContractError(f"the file cannot be read as Parquet: {shown}",
                            hint="write a valid Parquet file", file=str(path)) from None
    arrow = meta.schema_arrow
    found: dict[str, str | None] = {}
    for field in arrow:
        unit = (field.metadata or {}).get(b"unit")
        try:
            found[field.name] = unit.decode() if unit else None
        except UnicodeDecodeError:
            raw = bytes(unit or b"")[:20]
            raise ContractError(f"column {field.name!r} has a 'unit' metadata value that is "
                                f"not UTF-8 ({raw!r}); {schema.label} reads units there",
                                hint="write the unit as UTF-8 text", file=str(path),
                                column=field.name) from None
    _check_columns(schema, path, found, list(arrow.names), "as the field's 'unit' metadata")
    for col in schema.columns:
        actual = arrow.field(col.name).type
        if not _arrow_matches(pa, actual, col.dtype):
            raise ContractError(f"column {col.name!r} is {actual} but {schema.label} "
                                f"requires {col.dtype}",
                                hint=f"cast {col.name!r} to {col.dtype} before writing",
                                file=str(path), column=col.name)
    _check_parquet_nulls(schema, path, meta)


def _check_parquet_nulls(schema: TabularSchema, path: Path, meta) -> None:
    """Nulls from the row-group statistics; a column is read only where they are missing."""
    pa = _pyarrow()
    index = {name: i for i, name in enumerate(meta.schema_arrow.names)}
    for col in schema.columns:
        if col.nullable:
            continue
        offset = 0
        for g in range(meta.metadata.num_row_groups):
            group = meta.metadata.row_group(g)
            chunk = group.column(index[col.name])
            declared = meta.schema.column(index[col.name]).physical_type
            if chunk.physical_type != declared:
                # pyarrow aborts the process reading such a chunk's statistics: refuse first
                raise ContractError(f"the file is corrupt: row group {g} stores column "
                                    f"{col.name!r} as {chunk.physical_type} where its schema "
                                    f"says {declared}", hint="write a valid Parquet file",
                                    file=str(path), column=col.name)
            stats = chunk.statistics
            if stats is None or not stats.has_null_count or stats.null_count:
                try:
                    values = meta.read_row_group(g, columns=[col.name]).column(0)
                except (pa.ArrowException, OSError) as exc:
                    shown = " ".join(str(exc).split())
                    raise ContractError(f"the file cannot be read as Parquet: {shown}",
                                        hint="write a valid Parquet file", file=str(path),
                                        column=col.name) from None
                if values.null_count:
                    row = offset + _first_null(values)
                    raise ContractError(
                        f"row {row + 1} has no value in column {col.name!r}, which "
                        f"{schema.label} declares not nullable",
                        hint=f"fill the missing {col.name!r} values or declare the column "
                             f"nullable=True", file=str(path), column=col.name)
            offset += group.num_rows
