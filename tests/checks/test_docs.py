"""docs/checks.md has one section per published code, headed '## CODE name'."""
import pathlib
import re

from mlpipe.checks import published_codes

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "checks.md"


def test_every_published_code_has_its_section_and_no_section_is_stale():
    headings = set(re.findall(r"^## (MP\d{3}) ([a-z0-9-]+)$", DOC.read_text(), re.M))
    registered = {(c.code, c.name) for c in published_codes()}
    assert registered - headings == set(), "codes without a docs/checks.md section"
    assert headings - registered == set(), "docs/checks.md sections for unknown codes"
