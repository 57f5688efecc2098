"""Evidence tiers: every field of the example candidate's bundle, card and ML-BOM says how it is
known (verified, recorded, declared, unknown with why); the text and HTML views and the card
show them; the ML-BOM cites them in CycloneDX 1.7 ``citations`` and passes the library's
strict validator. Real submits, a real store, the CLI as a process."""
from __future__ import annotations

import json

import pytest

from bundle_project import PROMOTION_POLICY, BundleProject
from mlpipe.evidence.reports import tiers

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def carded(tmp_path_factory):
    """The example candidate, committed to a policy, accepted, its card written."""
    proj = BundleProject(tmp_path_factory.mktemp("tiers") / "proj")
    (proj.root / "policy.yml").write_text(PROMOTION_POLICY)
    cand = proj.submit("review", "--policy", "policy.yml")
    assert proj.evidence(cand).returncode == 0
    assert proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok").returncode == 0
    assert proj.cli("evidence", cand, "--format", "model-card", "-o",
                    "card/model-card.md").returncode == 0
    return proj, cand, proj.bundle(cand)


def test_every_field_of_the_bundle_has_a_tier(carded):
    _, _, bundle = carded
    fields = tiers.leaves(bundle)
    assert len(fields) > 200
    untiered = [path for path, value in fields if tiers.tier_of(path, value) is None]
    assert untiered == []
    found = tiers.classify(bundle)
    assert found["subject[0].digest.sha256"][0] == "verified"
    assert found["predicate.findings"][0] == "verified"
    assert found["predicate.evaluation.metrics[0].value"][0] == "recorded"
    assert found["predicate.run.options.policy.digest"][0] == "declared"
    assert found["predicate.review.decisions[0].note"][0] == "declared"
    assert found["predicate.pipeline.name"][0] == "declared"
    assert {t for t, _ in found.values()} <= set(tiers.TIERS)


@pytest.mark.parametrize("path, value, tier", [
    ("predicate.snapshots[0].digest", "blake3:ab", "recorded"),
    ("predicate.snapshots[0].digest", "ref:sha256:ab", "unknown"),   # only a reference
    ("predicate.snapshots[0].size", None, "unknown"),
    ("predicate.snapshots[0].size", 12, "recorded"),
    ("predicate.steps[1].reused_from", None, "recorded"),   # a known "not reused"
    ("predicate.code", None, "unknown"),
    ("predicate.somethingnew", 1, None),   # a field no rule names is found, not guessed
])
def test_a_field_s_tier_follows_its_value(path, value, tier):
    got = tiers.tier_of(path, value)
    assert (got[0] if got else None) == tier
    if tier == "unknown":
        assert got[1]   # with why


def test_the_text_and_html_views_show_the_tiers(carded):
    proj, cand, bundle = carded
    counts, unknown = tiers.summary(bundle)
    text = proj.evidence(cand).stdout
    assert (f"HOW EACH FACT IS KNOWN\n  {counts['verified']} verified (recomputed from bytes or "
            f"the store when the bundle was sealed), {counts['recorded']} recorded") in text
    for path, why in unknown:
        assert f"    unknown {path}: {why}" in text
    page = proj.cli("evidence", cand, "--format", "html").stdout
    assert '<section id="tiers"><h2>How each fact is known (' in page
    assert f"{counts['verified']} verified, {counts['recorded']} recorded" in page


def test_the_card_and_the_ml_bom_say_how_each_statement_is_known(carded):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    proj, _, _ = carded
    card = (proj.root / "card" / "model-card.md").read_text()
    assert "## How each statement here is known" in card
    assert ("| Model files and their hashes | verified | hashed from the model's files by "
            "`mlpipe evidence` when it sealed the bundle |") in card
    assert "| Metrics | recorded | observed by the mlpipe runtime while the run ran |" in card
    assert ("| Qualification bar | declared | the policy the submitter committed the run to "
            "before it ran |") in card
    text = (proj.root / "card" / "model-card.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_7).validate_str(text) is None
    bom = json.loads(text)
    assert bom["specVersion"] == "1.7"
    cited = {c["attributedTo"]: c for c in bom["citations"]}
    assert set(cited) == {"mlpipe-evidence", "mlpipe-runtime", "declared-by"}
    refs = {t["bom-ref"] for t in bom["metadata"]["tools"]["components"]}
    assert {"mlpipe-evidence", "mlpipe-runtime"} <= refs
    assert "/metadata/component/components" in cited["mlpipe-evidence"]["pointers"]
    assert ("/metadata/component/modelCard/quantitativeAnalysis"
            in cited["mlpipe-runtime"]["pointers"])
    assert "/components/0/properties/1" in cited["declared-by"]["pointers"]   # the reference
    # every field of the ML-BOM lies under a cited pointer
    pointers = [p for c in bom["citations"] for p in c["pointers"]]
    fields = ["/" + path.replace(".", "/").replace("[", "/").replace("]", "")
              for path, _ in tiers.leaves(bom) if not path.startswith("citations")]
    uncited = [f for f in fields if not any(f == p or f.startswith(p + "/") for p in pointers)]
    assert uncited == []
    # a citation without its required timestamp is refused by the same validator
    del bom["citations"][0]["timestamp"]
    assert JsonStrictValidator(SchemaVersion.V1_7).validate_str(json.dumps(bom)) is not None
