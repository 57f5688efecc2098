"""scripts/pyright_ceiling.py: the ceiling on pyright's errors over mlpipe/ only goes down, and
the public API must be fully typed (`make typecheck` runs the script itself)."""
from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the script imports its neighbour ``ceilings`` as ``python scripts/...`` finds it: beside it
sys.path.insert(0, str(ROOT / "scripts"))
_spec = importlib.util.spec_from_file_location("pyright_ceiling", ROOT / "scripts" / "pyright_ceiling.py")
assert _spec is not None and _spec.loader is not None
ceiling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ceiling)

#: pyright's count over mlpipe/ when the ceiling was introduced (issue 28)
FIRST_CEILING = 178


def test_the_committed_ceiling_is_a_number_never_above_where_it_started():
    assert 0 <= ceiling.CEILING.read() <= FIRST_CEILING


def test_more_errors_than_the_ceiling_fail_and_say_by_how_many():
    status, line = ceiling.verdict(12, 10)
    assert status == 1
    assert line.startswith("pyright reports 12 errors over mlpipe/, 2 more than the ceiling of 10")


def test_fewer_errors_than_the_ceiling_pass_and_say_to_lower_it():
    status, line = ceiling.verdict(7, 10)
    assert status == 0
    assert "lower the ceiling to 7 (python scripts/pyright_ceiling.py --lower)" in line


def test_errors_at_the_ceiling_pass():
    assert ceiling.verdict(10, 10) == (0, "pyright: 10 errors over mlpipe/, at the ceiling of 10")


def test_the_ceiling_file_round_trips_and_refuses_a_file_without_a_number(tmp_path):
    path = tmp_path / "ceiling"
    file = dataclasses.replace(ceiling.CEILING, path=path)
    file.write(41)
    assert file.read() == 41
    assert path.read_text(encoding="utf-8").startswith("# pyright's errors over mlpipe/")
    path.write_text("# only a comment\n")
    with pytest.raises(ValueError, match="holds no number"):
        file.read()


def test_only_error_diagnostics_are_counted_and_each_is_described_with_its_line():
    report = {"generalDiagnostics": [
        {"file": str(ROOT / "mlpipe" / "graph.py"), "severity": "error",
         "message": "Cannot access attribute\n  \"x\"", "rule": "reportAttributeAccessIssue",
         "range": {"start": {"line": 9, "character": 0}}},
        {"file": str(ROOT / "mlpipe" / "graph.py"), "severity": "warning", "message": "w",
         "range": {"start": {"line": 1, "character": 0}}},
    ]}
    found = ceiling.errors(report)
    assert len(found) == 1
    assert ceiling.describe(found[0]) == ("mlpipe/graph.py:10: Cannot access attribute \"x\" "
                                          "(reportAttributeAccessIssue)")


def _symbol(name, known=True, ambiguous=False, messages=(), alternates=()):
    return {"name": name, "isTypeKnown": known, "isTypeAmbiguous": ambiguous,
            "diagnostics": [{"message": m} for m in messages],
            "alternateNames": list(alternates)}


def test_the_public_api_is_what_all_exports_and_its_members_wherever_defined():
    symbols = [
        _symbol("mlpipe.Pipeline"),
        _symbol("mlpipe.dsl.Pipeline", alternates=["mlpipe.Pipeline"]),
        _symbol("mlpipe.dsl.Pipeline.spec", known=False,
                messages=["Return type is partially unknown"]),
        _symbol("mlpipe.dsl.Pipeline.fn", ambiguous=True),
        _symbol("mlpipe.dsl.Pipeline.to_dict", messages=["No docstring found for function"]),
        _symbol("mlpipe.dsl.PipelineHelper", known=False),  # a prefix, not a member
        _symbol("mlpipe.graph.compile", known=False),  # not exported by __init__
    ]
    assert ceiling.public_problems(symbols, ["Pipeline"]) == [
        "mlpipe.dsl.Pipeline.spec: type unknown: Return type is partially unknown",
        "mlpipe.dsl.Pipeline.fn: type ambiguous",
    ]


def test_a_public_name_pyright_did_not_see_is_a_problem_not_a_pass():
    assert ceiling.public_problems([_symbol("mlpipe.Pipeline")], ["Pipeline", "pipeline"]) == [
        "mlpipe.pipeline: not in pyright's report (is it still exported?)"]
