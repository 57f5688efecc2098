"""Names and values from the store never reach a terminal or a review ticket as control
sequences: a parameter value holding ESC sequences (recolour, clear the screen, set the window
title), a carriage return and a Markdown heading after a newline, through a real run."""
from __future__ import annotations

import re

import pytest

from bundle_project import BundleProject
from mlpipe.evidence.reports.terminal import escape, shown

pytestmark = pytest.mark.slow

HOSTILE = "t\x1b]0;pwned\x07\x1b[2J\r\n## Approved\u202e"


def test_escape_shows_every_control_character():
    assert escape(HOSTILE) == "t\\x1b]0;pwned\\x07\\x1b[2J\\r\n## Approved\\u202e"
    assert escape(HOSTILE, lines=False) == \
        "t\\x1b]0;pwned\\x07\\x1b[2J\\r\\n## Approved\\u202e"
    assert shown({"a\x1b": ["b\n", 1, None]}) == {"a\\x1b": ["b\\n", 1, None]}


def test_a_hostile_value_is_escaped_in_every_text_view(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    candidate = proj.submit("review", "--param", f"split={HOSTILE}")
    outputs = {"text": proj.evidence(candidate).stdout,
               "markdown": proj.evidence(candidate, "--format", "markdown").stdout,
               "runs": proj.cli("runs").stdout}
    run = re.search(r"^(r-[0-9a-f]+)", outputs["runs"], re.M).group(1)
    outputs["show"] = proj.cli("show", run).stdout
    for name, text in outputs.items():
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", text), name
        assert "\n## Approved" not in text, name
    assert "t\\x1b]0;pwned\\x07\\x1b[2J\\r\\n## Approved\\u202e" in outputs["text"]
