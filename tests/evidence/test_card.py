"""The model card and its ML-BOM say what every other view says: the same findings
(``findings.every_finding``) that ``candidates`` counts and the HTML page lists. Real submits, a
real store, the CLI as a process."""
from __future__ import annotations

import json

import pytest

from bundle_project import BundleProject

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def carded(tmp_path_factory):
    """A candidate of the review pipeline (one compile-time warning, no evidence finding) and
    its card written."""
    proj = BundleProject(tmp_path_factory.mktemp("card") / "proj")
    cand = proj.submit()
    done = proj.cli("evidence", cand, "--format", "model-card", "-o", "card/model-card.md")
    assert done.returncode == 0, done.stderr
    return proj, cand


def test_the_card_lists_the_findings_candidates_and_the_page_show(carded):
    from mlpipe.evidence.records.findings import every_finding

    proj, cand = carded
    p = proj.bundle(cand)["predicate"]
    found = every_finding(p)
    assert p["findings"] == [] and [(f["code"], f["source"]) for f in found] == [
        ("MP416", "compile-time")]   # only a view that reads every part shows it
    listed = proj.cli("candidates")
    assert "1 warning (1 compile-time)" in listed.stdout, listed.stdout
    page = proj.cli("evidence", cand, "--format", "html").stdout
    assert "evaluation-reads-training-artifact" in page
    card = (proj.root / "card" / "model-card.md").read_text()
    limits = card.split("## Limitations (the bundle's findings)\n\n")[1].split("\n\n")[0]
    assert limits.splitlines() == [
        f"- **{f['severity']} {f['code']} {f['name']}** (compile-time): {f['message']}"
        for f in found]
    assert "No finding" not in card
    bom = json.loads((proj.root / "card" / "model-card.cdx.json").read_text())
    limitations = bom["metadata"]["component"]["modelCard"]["considerations"][
        "technicalLimitations"]
    assert limitations == [f"{f['severity']} {f['code']} {f['name']} (compile-time): "
                           f"{f['message']}" for f in found]


def test_a_card_without_findings_says_so(tmp_path):
    from mlpipe.evidence.records.findings import every_finding
    from mlpipe.evidence.reports.card import markdown

    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    statement = proj.bundle(cand)
    p = statement["predicate"]
    p["checks"] = {"error_results": [], "warnings": [], "info": []}
    assert every_finding(p) == []
    text = markdown("sha256:" + "0" * 64, statement, None)
    assert ("- No finding: no compile-time, run-time or evidence finding.\n"
            in text)
