"""Contracts at every boundary: pipeline inputs validated before a run starts, file outputs
named so their own validator accepts them, a missing extra said at check time, units compared
as units, a contract type's own bug never blamed on the user, hints that never widen an
evaluation's accepted splits."""
import sys

import pytest

from mlpipe.checks import check_pipeline
from mlpipe.checks.contracts import _crash_hint
from mlpipe.contracts import Column, ImageFolder, SplitManifest, TabularSchema, compatibility, validate
from mlpipe.contracts.base import missing_requirements, output_file_name, parse_version
from mlpipe.contracts.units import compare_units
from mlpipe.errors import ContractError

# --- units ----------------------------------------------------------------------------------


@pytest.mark.parametrize("have, want", [("degC", "°C"), ("mm", "millimeter"), ("s", "second"),
                                        ("%", "percent"), ("m/s", "meter / second"),
                                        ("USD", "USD"), (None, None)])
def test_the_same_unit_written_two_ways_agrees(have, want):
    assert compare_units(have, want).same


@pytest.mark.parametrize("have, want, detail", [
    ("mm", "cm", "1 mm = 0.1 cm"),
    ("m/s", "km/h", "1 m/s = 3.6 km/h"),
    ("degC", "K", "x degC = x + 273.15 K"),
    ("mm", "kg", "'mm' and 'kg' measure different quantities ([length] vs [mass])"),
    ("USD", "EUR", "compared as text: 'USD' and 'EUR' are not units mlpipe knows"),
    ("mm", None, None),
])
def test_different_units_say_by_how_much(have, want, detail):
    result = compare_units(have, want)
    assert not result.same and result.detail == detail


def test_a_schema_edge_compares_units_as_units():
    produced = TabularSchema("t", columns=[Column("temp", "float64", unit="degC")])
    assert compatibility(produced, TabularSchema("t", columns=[
        Column("temp", "float64", unit="°C")])) == []
    [diff] = compatibility(TabularSchema("t", columns=[Column("l", "float64", unit="mm")]),
                           TabularSchema("t", columns=[Column("l", "float64", unit="cm")]))
    assert diff.message == "column 'l' is in 'mm' but the consumer requires 'cm' (1 mm = 0.1 cm)"


def test_a_csv_header_unit_is_compared_as_a_unit(tmp_path):
    schema = TabularSchema("t", columns=[Column("temp", "float64", unit="°C")])
    (tmp_path / "ok.csv").write_text("temp [degC]\n21.5\n")
    validate(schema, tmp_path / "ok.csv")
    (tmp_path / "bad.csv").write_text("temp [K]\n294.65\n")
    with pytest.raises(ContractError, match=r"column 'temp' is in 'K' but tabular-schema:t "
                                            r"requires '°C' \(x K = x - 273\.15 °C\)"):
        validate(schema, tmp_path / "bad.csv")


# --- a contract type's own bug --------------------------------------------------------------

def test_a_feature_declared_with_another_role_is_a_role_difference_not_a_crash():
    produced = TabularSchema("t", columns=[Column("a", "float64"), Column("b", "float64",
                                                                         role="other")])
    required = TabularSchema("t", ordered=True, columns=[Column("a", "float64"),
                                                         Column("b", "float64")])
    assert [(d.kind, d.message) for d in compatibility(produced, required)] == [
        ("contract-requirement-unmet",
         "column 'b' is produced as a other but the consumer reads it as a feature")]


def test_features_in_another_order_among_those_both_sides_call_features():
    produced = TabularSchema("t", columns=[Column("b", "float64"), Column("x", "float64",
                                                                         role="other"),
                                           Column("a", "float64")])
    required = TabularSchema("t", ordered=True, columns=[Column("a", "float64"),
                                                         Column("b", "float64")])
    kinds = [d.kind for d in compatibility(produced, required)]
    assert kinds == ["feature-order-mismatch"]


def test_a_crash_inside_mlpipe_is_called_mlpipe_s_bug():
    try:
        parse_version("not a version")
    except ValueError as exc:
        hint = _crash_hint(TabularSchema("t"), exc)
    assert hint.startswith("this is a bug in mlpipe (at ")
    assert "mlpipe/contracts/base.py:" in hint and hint.endswith(
        "not in the pipeline; report it with the contracts of this edge")


# --- hints never weaken a safety contract ---------------------------------------------------

@pytest.mark.parametrize("produced, required", [
    (SplitManifest("s", splits=["train", "test"]), SplitManifest("s", splits=["test"])),
    (ImageFolder("f", layout="{split}/{class}/{file}", splits=["train", "test"]),
     ImageFolder("f", layout="{split}/{class}/{file}", splits=["test"])),
])
def test_no_hint_widens_the_splits_an_evaluation_accepts(produced, required):
    [diff] = compatibility(produced, required)
    assert diff.message == "split 'train' may be produced but the consumer accepts only test"
    assert "consumer's splits" not in diff.hint and "add 'train'" not in diff.hint
    assert diff.hint.startswith("give the consumer a ")


# --- optional extras at check time ----------------------------------------------------------

def test_a_missing_pyarrow_is_said_at_check_time(monkeypatch):
    from fixtures.boundaries.tables import tables
    assert missing_requirements(TabularSchema) == []
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` fails from here on
    assert missing_requirements(TabularSchema) == [("pyarrow", "pip install 'mlpipe-aml[tabular]'")]
    found = [d for d in check_pipeline(tables.spec)[1] if d.code == "MP415"]
    assert [(d.step, d.port) for d in found] == [("scale", "parts"), ("total", "table")]
    assert found[0].message == ("'scale.parts' is a tabular-schema:parts, whose validation needs "
                                "pyarrow, which is not installed here: a local run fails when it "
                                "validates this artifact")
    assert found[0].hint == ("pip install 'mlpipe-aml[tabular]' (and install it in the step's "
                             "environment)")


# --- file names -----------------------------------------------------------------------------

def test_a_tabular_file_output_is_named_for_its_validator():
    assert output_file_name(TabularSchema("t"), "table") == "table.csv"
    assert output_file_name(TabularSchema, "table.csv") == "table.csv"
    assert output_file_name(SplitManifest("s"), "split") == "split"
    assert output_file_name(None, "report") == "report"


def test_a_table_without_a_suffix_is_read_by_its_bytes(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = TabularSchema("t", columns=[Column("n", "int64")])
    (tmp_path / "as_csv").write_text("n\n1\n2\n")
    validate(schema, tmp_path / "as_csv")
    pq.write_table(pa.table({"n": pa.array([1, 2], pa.int64())}), tmp_path / "as_parquet")
    validate(schema, tmp_path / "as_parquet")
    (tmp_path / "t.json").write_text("{}")
    with pytest.raises(ContractError, match=r"the file is neither \.csv nor \.parquet"):
        validate(schema, tmp_path / "t.json")




# --- a run: inputs validated before any step, a tabular output that validates -------------

def _project(tmp_path):
    import shutil
    from pathlib import Path

    from executor_project import Project
    proj = Project(tmp_path / "proj")
    shutil.copy(Path(__file__).parents[1] / "fixtures" / "boundaries" / "tables.py",
                proj.root / "tables.py")
    return proj


@pytest.mark.slow
def test_a_run_validates_its_inputs_first_and_names_its_table_output_csv(tmp_path):
    proj = _project(tmp_path)
    (proj.root / "parts.csv").write_text("id,length [mm],temp [°C]\na,15,20\nb,25,21\n")
    done = proj.submit("tables", inputs=["parts=parts.csv"])
    assert done.returncode == 0, done.stderr
    assert "total" in done.stderr and "failed" not in done.stderr
    # the scaled table was filed as table.csv, the name its own validator accepts
    files = list((proj.root / "evidence").rglob("table.csv"))
    assert files and files[0].read_text().startswith("id,length [cm]")


@pytest.mark.slow
def test_a_wrong_unit_input_is_refused_before_any_step_runs(tmp_path):
    proj = _project(tmp_path)
    (proj.root / "parts.csv").write_text("id,length [cm],temp [degC]\na,1.5,20\n")
    done = proj.submit("tables", inputs=["parts=parts.csv"])
    assert done.returncode == 1
    assert done.stderr == (
        f"error: parts.csv:1: input 'parts' ({proj.root / 'parts.csv'}) does not match "
        f"tabular-schema:parts, which 'scale.parts' requires: column 'length' is in 'cm' but "
        f"tabular-schema:parts requires 'mm' (1 cm = 10 mm)\n"
        f"  help: convert the values and state the unit in the header as 'name [unit]'; or "
        f"give --input parts= another file\n")
    # nothing ran and nothing was recorded: there is not even a store
    assert not (proj.root / "evidence" / "store.sqlite").exists()
