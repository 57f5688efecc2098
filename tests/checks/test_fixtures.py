"""Every check code: one pipeline that triggers it (at the marked line) and a near-identical
clean one. A fixture marks the expected place with ``# expect: MPxxx [step]``; the whole
diagnostic output of each triggering pipeline is a snapshot (tests/golden/checks/, regenerated
with ``make golden``), so a second, changed or lost diagnostic fails too."""
import importlib
import pathlib
import re

import pytest

from golden_files import assert_golden, mask
from mlpipe.checks import check_pipeline
from mlpipe.diagnostics import render_text
from mlpipe.dsl import Pipeline

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "checks"
NAMES = sorted(p.stem for p in FIXTURES.glob("mp*.py"))
EXPECT = re.compile(r"#\s*expect:\s*(MP\d{3})(?:\s+(\S+))?")


def _expectation(name: str) -> tuple[str, str | None, int]:
    for lineno, text in enumerate((FIXTURES / f"{name}.py").read_text().splitlines(), 1):
        m = EXPECT.search(text)
        if m:
            return m.group(1), m.group(2), lineno
    raise AssertionError(f"fixture {name} has no '# expect:' marker")


def _diagnostics(name: str, which: str):
    module = importlib.import_module(f"fixtures.checks.{name}")
    target = getattr(module, which)
    spec = target.spec if isinstance(target, Pipeline) else target
    _, diagnostics = check_pipeline(spec)
    return diagnostics


def test_every_fixture_is_named_after_its_code():
    # mp518.py, or a variant of the same code: mp518_tensorflow.py
    for name in NAMES:
        assert _expectation(name)[0] == name.split("_")[0].upper()


@pytest.mark.parametrize("name", NAMES)
def test_bad_fixture_triggers_its_code_at_the_marked_place(name):
    code, step, line = _expectation(name)
    found = [d for d in _diagnostics(name, "bad") if d.code == code]
    assert found, f"{code} not reported"
    d = found[0]
    assert d.file.endswith(f"fixtures/checks/{name}.py")
    assert d.line == line
    if step is not None:
        assert d.step == step
    assert d.message and d.hint


ROOT = str(FIXTURES.parents[2])


@pytest.mark.parametrize("name", NAMES)
def test_bad_fixture_reports_exactly_its_snapshot(name):
    # a message may quote an absolute path of the checkout (a parameter naming a file)
    assert_golden(f"checks/{name}.txt", render_text(_diagnostics(name, "bad")),
                  lambda text: mask(text).replace(ROOT, "<checkout>"))


@pytest.mark.parametrize("name", NAMES)
def test_clean_fixture_reports_nothing(name):
    assert _diagnostics(name, "good") == []


def test_a_duplicate_name_is_reported_once_not_also_as_an_unused_step():
    assert [d.code for d in _diagnostics("mp106", "bad")] == ["MP106"]
