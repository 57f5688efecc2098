"""Hypothesis properties of tabular schemas: compatibility and the writer/validator round trip."""
import csv
import string

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe.contracts import Column, TabularSchema, compatibility, validate
from mlpipe.contracts.tabular import DTYPES, ROLES
from mlpipe.errors import ContractError

NAMES = st.text(string.ascii_lowercase, min_size=1, max_size=8)
UNITS = st.none() | st.sampled_from(["mm", "s", "USD", "kg"])
# a row belongs to one split: at most one column of a schema has role "split" (schemas() adds it)
COLUMN = st.builds(lambda dtype, unit, nullable, role: (dtype, unit, nullable, role),
                   st.sampled_from(DTYPES), UNITS, st.booleans(),
                   st.sampled_from([r for r in ROLES if r != "split"]))


@st.composite
def schemas(draw, min_columns=1):
    names = draw(st.lists(NAMES, min_size=min_columns, max_size=6, unique=True))
    cols = [Column(n, *draw(COLUMN)) for n in names]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(cols) - 1))
        c = cols[i]
        cols[i] = Column(c.name, c.dtype, c.unit, c.nullable, "split")
    return TabularSchema("t", columns=cols, ordered=draw(st.booleans()))


@given(schemas())
def test_a_schema_is_compatible_with_itself(schema):
    assert compatibility(schema, schema) == []


@given(schemas(), st.data())
def test_a_widened_copy_is_compatible(schema, data):
    extra = data.draw(st.lists(NAMES.filter(lambda n: schema.column(n) is None), max_size=3,
                               unique=True))
    added = [Column(n, *data.draw(COLUMN)) for n in extra]
    # Extra columns go after the existing ones, so an ordered consumer sees its order kept.
    widened = TabularSchema("t", columns=[*schema.columns, *added], version="1.1")
    assert compatibility(widened, schema) == []


@given(schemas(), st.data())
def test_dropping_a_required_column_is_never_compatible(schema, data):
    drop = data.draw(st.sampled_from([c.name for c in schema.columns]))
    narrowed = TabularSchema("t", columns=[c for c in schema.columns if c.name != drop])
    assert "schema-column-missing" in {d.kind for d in compatibility(narrowed, schema)}


@given(schemas(), st.data())
def test_changing_a_dtype_is_never_compatible(schema, data):
    target = data.draw(st.sampled_from([c.name for c in schema.columns]))
    old = schema.column(target)
    new_dtype = data.draw(st.sampled_from([d for d in DTYPES if d != old.dtype]))
    changed = TabularSchema("t", ordered=schema.ordered, columns=[
        Column(c.name, new_dtype, c.unit, c.nullable, c.role) if c.name == target else c
        for c in schema.columns])
    assert "schema-dtype-mismatch" in {d.kind for d in compatibility(changed, schema)}


# --- the validator accepts what it wrote, rejects any single-field corruption ---------------

SAMPLES = {"int32": ["1", "-7", "300"], "int64": ["12345678901", "0", "-2"],
           "float32": ["1.5", "-0.25", "3"], "float64": ["2.75", "1e-3", "-8"],
           "string": ["a", "b c", "x,y"], "bool": ["true", "false", "true"],
           "timestamp": ["2024-01-02T03:04:05", "2023-12-31 00:00:00", "2020-02-29T12:00:00"]}
BAD_VALUE = {"int32": "1.5", "int64": "x", "float32": "abc", "float64": "1,5",
             "bool": "maybe", "timestamp": "yesterday"}


def write(schema, path, header=None, rows=None):
    rows = rows if rows is not None else [[SAMPLES[c.dtype][i] for c in schema.columns]
                                          for i in range(3)]
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([header or schema.csv_header(), *rows])
    return path


def corruptions(schema):
    """Every single-field corruption of a file written from ``schema``: (what, header, rows)."""
    header = schema.csv_header()
    rows = [[SAMPLES[c.dtype][i] for c in schema.columns] for i in range(3)]
    for i, c in enumerate(schema.columns):
        renamed = list(header)
        renamed[i] = header[i].replace(c.name, c.name + "_old", 1)
        yield f"rename {c.name}", renamed, rows
        reunit = list(header)
        reunit[i] = f"{c.name} [{'cm' if c.unit != 'cm' else 'in'}]"
        yield f"unit of {c.name}", reunit, rows
        if c.dtype in BAD_VALUE:
            bad = [list(r) for r in rows]
            bad[1][i] = BAD_VALUE[c.dtype]
            yield f"dtype of {c.name}", header, bad
        if not c.nullable:
            gap = [list(r) for r in rows]
            gap[2][i] = ""
            yield f"null in {c.name}", header, gap


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture],
          deadline=None)
@given(schemas())
def test_validator_accepts_its_own_csv_and_rejects_every_corruption(tmp_path, schema):
    validate(schema, write(schema, tmp_path / "ok.csv"))
    for what, header, rows in corruptions(schema):
        with pytest.raises(ContractError):
            validate(schema, write(schema, tmp_path / "bad.csv", header, rows))
            pytest.fail(f"not rejected: {what}")


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture],
          deadline=None)
@given(schemas(), st.data())
def test_validator_accepts_its_own_parquet_and_rejects_a_changed_field(tmp_path, schema, data):
    arrow = schema.arrow_schema()
    table = pa.table({c.name: pa.array([None if c.nullable and i == 0 else _value(c, i)
                                        for i in range(3)], arrow.field(c.name).type)
                      for c in schema.columns}, schema=arrow)
    pq.write_table(table, tmp_path / "ok.parquet")
    validate(schema, tmp_path / "ok.parquet")
    target = data.draw(st.sampled_from(schema.columns))
    change = data.draw(st.sampled_from(["name", "unit", "dtype"]))
    fields = []
    for f in arrow:
        if f.name == target.name:
            if change == "name":
                f = f.with_name(f.name + "_old")
            elif change == "unit":
                f = f.with_metadata({"unit": "cm" if target.unit != "cm" else "in"})
            else:
                f = f.with_type(pa.string() if target.dtype != "string" else pa.int64())
        fields.append(f)
    columns = [table.column(i) if fields[i].type == arrow[i].type else
               pa.array(["x", "y", "z"] if fields[i].type == pa.string() else [1, 2, 3],
                        fields[i].type) for i in range(len(fields))]
    pq.write_table(pa.Table.from_arrays(columns, schema=pa.schema(fields)), tmp_path / "bad.parquet")
    with pytest.raises(ContractError):
        validate(schema, tmp_path / "bad.parquet")


def _value(column, i):
    import datetime

    raw = SAMPLES[column.dtype][i]
    return {"int32": int, "int64": int, "float32": float, "float64": float, "string": str,
            "bool": lambda v: v == "true",
            "timestamp": lambda v: datetime.datetime.fromisoformat(v.replace(" ", "T"))}[column.dtype](raw)
