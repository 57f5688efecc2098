"""Pre-registered qualification: ``submit --policy FILE`` commits the run to its policy before
anything runs; the commitment is sealed into the bundle; ``qualify`` and ``review`` judge
against it by default; a policy written after the run is refused (MP718) unless it is a
recorded deviation, which ``evidence``, the HTML page (headless Chromium) and the model card
show. Real submits, a real store, the CLI as a process."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest

from bundle_project import PROMOTION_POLICY, BundleProject
from mlpipe.digests import digest_bytes

pytestmark = pytest.mark.slow

LATER = PROMOTION_POLICY.replace("promotion-policy", "written-later").replace("0.8", "0.85")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """A candidate whose run committed to policy.yml, its first bundle sealed, and a policy
    written after the run (later.yml)."""
    proj = BundleProject(tmp_path_factory.mktemp("commit") / "proj")
    (proj.root / "policy.yml").write_text(PROMOTION_POLICY)
    cand = proj.submit("review", "--policy", "policy.yml")
    assert proj.evidence(cand).returncode == 0
    (proj.root / "later.yml").write_text(LATER)
    return proj, cand


def test_the_commitment_is_recorded_with_the_run_and_sealed_into_the_bundle(committed):
    proj, cand = committed
    p = proj.bundle(cand)["predicate"]
    assert p["run"]["options"]["policy"] == {
        "name": "promotion-policy", "file": "policy.yml", "text": PROMOTION_POLICY,
        "digest": digest_bytes(PROMOTION_POLICY.encode())}
    shown = proj.evidence(cand).stdout
    assert (f"qualification policy promotion-policy (policy.yml, "
            f"{digest_bytes(PROMOTION_POLICY.encode())}), committed before the run") in shown


def test_qualify_judges_the_committed_policy_by_default_even_when_its_file_changed(committed):
    proj, cand = committed
    (proj.root / "policy.yml").write_text(PROMOTION_POLICY.replace("0.8", "0.95"))
    try:
        done = proj.cli("qualify", cand)
    finally:
        (proj.root / "policy.yml").write_text(PROMOTION_POLICY)
    assert done.returncode == 0, done.stderr   # 0.875 meets the committed 0.8, not 0.95
    assert done.stdout.startswith("policy promotion-policy (policy.yml, ")
    assert done.stdout.splitlines()[-3] == (f"policy committed before the run: promotion-policy "
                                           f"({digest_bytes(PROMOTION_POLICY.encode())})")
    assert "metric accuracy    >= 0.8 on test" in done.stdout


@pytest.mark.parametrize("command, policy, code", [
    ("qualify", "later.yml", "MP718"), ("review", "later.yml", "MP718"),
    ("qualify", "policy.yml", None),   # the committed one, named: clean
])
def test_a_policy_written_after_the_run_is_refused_as_the_default(committed, command, policy,
                                                                   code):
    proj, cand = committed
    extra = ("--accept", "--by", "dana", "--note", "ok") if command == "review" else ()
    done = proj.cli(command, cand, *extra, "--policy", policy)
    if code is None:
        assert done.returncode == 0, done.stderr
        assert "MP718" not in done.stdout + done.stderr
        return
    assert done.returncode == 1
    assert re.match(r"error: \[MP718 policy-deviation-unrecorded\] run r-[0-9a-f]+ committed "
                    r"to policy promotion-policy \(sha256:[0-9a-f]{64}\) before it ran; "
                    r"later.yml \(sha256:[0-9a-f]{64}\) is another policy\n  help: judge "
                    r"against the committed policy \(omit --policy\), or record why you "
                    r"deviate from it: --deviation 'WHY'", done.stderr), done.stderr
    assert proj.bundle(cand)["predicate"]["review"]["decisions"] == []   # nothing recorded


def test_a_deviation_needs_a_reason_and_someone_who_deviates(committed):
    proj, cand = committed
    empty = proj.cli("qualify", cand, "--policy", "later.yml", "--deviation", " ")
    assert empty.returncode == 2
    assert empty.stderr.startswith("error: --deviation gives the reason for judging against "
                                   "another policy than the committed one")
    nobody = proj.cli("qualify", cand, "--policy", "later.yml", "--deviation", "audit")
    assert nobody.returncode == 2
    assert nobody.stderr.startswith("error: a deviation from the committed policy names who "
                                    "deviates")
    shown = proj.cli("qualify", cand, "--policy", "later.yml", "--deviation", "audit",
                     "--by", "ana")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-3].startswith(
        "DEVIATION from the policy committed before the run, promotion-policy (sha256:")


def test_a_recorded_deviation_is_shown_by_the_bundle_the_text_the_page_and_the_card(committed):
    proj, cand = committed
    why = "the bar was raised after the audit"
    done = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "meets it",
                    "--policy", "later.yml", "--deviation", why)
    assert done.returncode == 0, done.stderr
    p = proj.bundle(cand)["predicate"]
    [decision] = p["review"]["decisions"]
    committed_digest = digest_bytes(PROMOTION_POLICY.encode())
    later = digest_bytes(LATER.encode())
    assert decision["policy"]["digest"] == later
    assert decision["policy"]["committed"] == {"name": "promotion-policy", "file": "policy.yml",
                                               "digest": committed_digest}
    assert decision["policy"]["deviation"] == {"by": "dana", "why": why, "digest": later,
                                               "name": "written-later", "file": "later.yml"}
    said = (f"DEVIATION from the committed policy promotion-policy ({committed_digest}): "
            f"judged against written-later ({later}) by dana, because: {why}")
    assert f"    {said}" in proj.evidence(cand).stdout.splitlines()
    # the card and its ML-BOM
    assert proj.cli("evidence", cand, "--format", "model-card", "-o",
                    "card/model-card.md").returncode == 0
    card = (proj.root / "card" / "model-card.md").read_text()
    assert f"- **{said}**." in card
    bom = json.loads((proj.root / "card" / "model-card.cdx.json").read_text())
    assert said in bom["metadata"]["component"]["modelCard"]["considerations"]["useCases"]
    # the page, as headless Chromium lays it out
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    page = proj.root / "e.html"
    assert proj.cli("evidence", cand, "--format", "html", "-o", str(page)).returncode == 0
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", f"--user-data-dir={proj.root / 'profile'}",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr
    shown = html.unescape(re.sub(r"<[^>]+>", "", dom.stdout))
    assert said in shown
    bar = re.search(r'<th>qualification bar</th><td><span id="bar">([^<]*)</span>', dom.stdout)
    assert bar and html.unescape(bar.group(1)) == (
        f"promotion-policy (policy.yml, {committed_digest}), committed before the run")
    assert re.search(r"<span class=\"flag\" id=\"deviation\">DEVIATION from the committed",
                     dom.stdout)


def test_a_run_that_committed_to_nothing_is_judged_by_the_policy_given(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    (proj.root / "policy.yml").write_text(PROMOTION_POLICY)
    none = proj.cli("qualify", cand)
    assert none.returncode == 2
    assert re.match(r"error: run r-[0-9a-f]+ of candidate c-[0-9a-f]+ committed to no "
                    r"qualification policy, and none was given\n", none.stderr)
    done = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok", "--policy",
                    "policy.yml")
    assert done.returncode == 0, done.stderr
    p = proj.bundle(cand)["predicate"]
    assert "policy" not in p["run"]["options"]
    assert p["review"]["decisions"][0]["policy"]["committed"] is None
    text = proj.evidence(cand).stdout
    assert ("qualification policy none committed before the run (a policy given later "
            "judges it)") in text
    assert "    a policy given after the run (none was committed before it)" in text


def test_a_bad_policy_is_refused_before_anything_runs(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    (proj.root / "bad.yml").write_text("name: x\nmetrics: 3\n")
    done = proj.cli("submit", "review.py:review", "--input", "data=data.txt", "--policy",
                    "bad.yml")
    assert done.returncode == 2
    assert done.stderr.startswith("error: bad.yml")
    assert not (proj.root / "evidence").exists()   # nothing recorded
