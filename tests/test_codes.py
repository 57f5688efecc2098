"""The one table of diagnostic codes (mlpipe/codes/): every code is published there, once,
named after its kebab-case name, in code order, and reported by some part of mlpipe."""
import pathlib
import re

import pytest

from mlpipe import codes
from mlpipe.diagnostics import Code, Severity

FOLDER = pathlib.Path(codes.__file__).parent
PACKAGE = FOLDER.parent
#: the table, in code order across its two halves
TABLE = (FOLDER / "pipelines.py", FOLDER / "records.py")
BOOK = (FOLDER / "__init__.py", FOLDER / "book.py", *TABLE)


def _constants() -> dict[str, Code]:
    return {name: value for name, value in vars(codes).items() if isinstance(value, Code)}


def test_every_constant_is_published_and_named_after_its_code():
    constants = _constants()
    assert {c.code for c in constants.values()} == set(codes.CODES)
    for name, code in constants.items():
        assert name == code.name.upper().replace("-", "_")
        assert code.summary[0].isupper() and code.summary.endswith(".")


def test_the_table_is_in_code_order():
    text = "".join(path.read_text() for path in TABLE)
    order = re.findall(r'_code\(\s*"(MP\d{3})"', text)
    assert order == sorted(order) and len(order) == len(set(order))


def test_no_other_module_publishes_a_code():
    for path in PACKAGE.rglob("*.py"):
        if path in BOOK:
            continue
        text = path.read_text()
        assert not re.search(r"\bCode\(\s*\"MP", text), path
        assert "register_code" not in text, path


def test_every_code_is_reported_somewhere():
    sources = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p not in BOOK)
    assert [name for name in _constants() if not re.search(rf"\b{name}\b", sources)] == []


def test_a_code_cannot_be_published_twice():
    with pytest.raises(ValueError, match="diagnostic code MP301 is published twice"):
        codes.publish("MP301", "another-name", Severity.ERROR, "Anything.")
    with pytest.raises(ValueError, match="diagnostic name 'artifact-kind-mismatch' is used by two"):
        codes.publish("MP399", "artifact-kind-mismatch", Severity.ERROR, "Anything.")
    assert "MP399" not in codes.CODES


def test_named_finds_a_code_by_its_kebab_name():
    assert codes.named("artifact-kind-mismatch") is codes.ARTIFACT_KIND_MISMATCH
    with pytest.raises(KeyError):
        codes.named("no-such-problem")
