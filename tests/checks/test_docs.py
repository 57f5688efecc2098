"""docs/checks.md has one section per published code, headed '## CODE name', with What / Why /
Example / Fix; `mlpipe check --explain CODE` prints it."""
import pathlib
import re

import pytest
from click.testing import CliRunner

from mlpipe.checks import published_codes
from mlpipe.cli import main
from mlpipe.codes import CODES, explain

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "checks.md"
LABELS = ("What", "Why", "Example", "Fix")


def _sections() -> dict[tuple[str, str], str]:
    text = DOC.read_text()
    return {(m.group(1), m.group(2)): m.group(3) for m in
            re.finditer(r"^## (MP\d{3}) ([a-z0-9-]+)\n(.*?)(?=^## |\Z)", text, re.S | re.M)}


def test_every_published_code_has_its_section_and_no_section_is_stale():
    headings = set(_sections())
    registered = {(c.code, c.name) for c in published_codes()}
    assert registered - headings == set(), "codes without a docs/checks.md section"
    assert headings - registered == set(), "docs/checks.md sections for unknown codes"


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_section_says_what_why_example_and_fix(code):
    body = _sections()[(code, CODES[code].name)]
    missing = [label for label in LABELS if not re.search(rf"\*\*{label}\b[^*]*:\*\*", body)]
    assert missing == [], f"{code}: docs/checks.md section lacks {', '.join(missing)}"


def test_the_package_reads_the_page_itself():
    assert (ROOT / "mlpipe" / "codes.md").resolve() == DOC.resolve()


def test_explain_prints_the_heading_summary_and_section():
    text = explain("mp524")
    assert text.startswith("MP524 multiple-writers (error)\nMore than one rank wrote an output "
                           "that has a single writer.\n\n**What:** an output with a single-writer")
    assert explain("multiple-writers") == text
    assert "## " not in text and "MP525" not in text


def test_check_explain_on_the_command_line():
    runner = CliRunner()
    done = runner.invoke(main, ["check", "--explain", "MP301"])
    assert done.exit_code == 0 and done.output == explain("MP301")
    unknown = runner.invoke(main, ["check", "--explain", "artifact-kind-mismatc"])
    assert unknown.exit_code == 2
    assert unknown.output == ("error: no published code 'artifact-kind-mismatc'\n  help: did you "
                              "mean artifact-kind-mismatch, contract-kind-mismatch, "
                              "binding-kind-mismatch? codes are listed in docs/checks.md\n")
    nothing = runner.invoke(main, ["check"])
    assert nothing.exit_code == 2 and "check needs a TARGET" in nothing.output
