"""How each statement of the model card and each field of its ML-BOM is known (``tiers``):
the card's "How each statement here is known" table, and the ML-BOM's CycloneDX 1.7
``citations`` (one per tier, attributed to the mlpipe tool or the author that supplied the
fields) with the unknown fields as properties.

Builds text and JSON from a sealed bundle; reads and writes nothing.
"""
from __future__ import annotations

from typing import Any

from mlpipe.evidence.reports import tiers

#: bom-refs of what supplied the ML-BOM's facts (CycloneDX 1.7 citations' ``attributedTo``).
EVIDENCE_TOOL, RUNTIME_TOOL, AUTHOR = "mlpipe-evidence", "mlpipe-runtime", "declared-by"
_NOTES = {
    tiers.VERIFIED: "verified: recomputed from the bytes or the evidence store by `mlpipe "
                    "evidence` when it sealed the bundle this BOM cites",
    tiers.RECORDED: "recorded: observed by the mlpipe runtime when the run ran",
    tiers.DECLARED: "declared: written by an author (the pipeline's source, the submitter, a "
                    "reviewer); mlpipe did not check it",
}


def _tier(statement: dict[str, Any], path: str) -> tuple[str, str]:
    value: Any = statement
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and len(value) > index else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return tiers.tier_of(path, value) or (tiers.UNKNOWN, "not said")


def card_rows(statement: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(statement of the card, tier, why)`` for each kind of statement the card makes, each
    tier that of the bundle field it is taken from."""
    p = statement["predicate"]
    rows = [("Pipeline name", "predicate.pipeline.name"),
            ("Qualification bar", "predicate.run.options.policy"),
            ("Model files and their hashes", "subject[0].digest.sha256"),
            ("Model digest", "predicate.candidate.model")]
    for i, snap in enumerate(p["snapshots"]):
        rows += [(f"Data {snap['input']}: reference", f"predicate.snapshots[{i}].reference"),
                 (f"Data {snap['input']}: digest", f"predicate.snapshots[{i}].digest"),
                 (f"Data {snap['input']}: files", f"predicate.snapshots[{i}].file_count"),
                 (f"Data {snap['input']}: bytes", f"predicate.snapshots[{i}].size")]
    rows += [("Metrics", "predicate.evaluation.metrics"),
             ("Limitations (findings)", "predicate.findings"),
             ("Code revision", "predicate.code.commit")]
    if p["review"]["decisions"]:
        n = len(p["review"]["decisions"]) - 1
        rows += [("Decision: verdict and note", f"predicate.review.decisions[{n}].note"),
                 ("Decision: who and when", f"predicate.review.decisions[{n}].decided_at")]
    out = []
    for label, path in rows:
        tier, why = _tier(statement, path)
        if path == "predicate.run.options.policy" and "policy" not in p["run"]["options"]:
            tier, why = tiers.UNKNOWN, "the run committed to no policy before it ran"
        if path == "subject[0].digest.sha256" and not statement["subject"]:
            tier, why = tiers.UNKNOWN, "no digest of the model's files was recorded"
        out.append((label, tier, why))
    return out


def card_lines(statement: dict[str, Any]) -> list[str]:
    """The card's "How each statement here is known" section."""
    counts, unknown = tiers.summary(statement)
    lines = ["## How each statement here is known", "",
             f"Of the bundle's fields, {counts[tiers.VERIFIED]} are verified (recomputed from "
             f"bytes or the store when it was sealed), {counts[tiers.RECORDED]} recorded "
             f"(observed by the runtime), {counts[tiers.DECLARED]} declared (written by an "
             f"author) and {counts[tiers.UNKNOWN]} unknown.", "",
             "| statement | known as | how |", "|---|---|---|"]
    lines += [f"| {label} | {tier} | {why} |" for label, tier, why in card_rows(statement)]
    lines += [f"| `{path}` | unknown | {why} |" for path, why in unknown]
    return lines + [""]


#: ML-BOM JSON pointers and the bundle field each is taken from (its tier is that field's).
def _pointers(statement: dict[str, Any], doc: dict[str, Any]) -> dict[str, str]:
    p = statement["predicate"]
    found = {"/metadata/component/components": "subject",
             "/metadata/component/name": "predicate.pipeline.name",
             "/metadata/component/version": "predicate.candidate.id",
             "/metadata/component/description": "predicate.pipeline.name",
             "/metadata/component/modelCard/quantitativeAnalysis":
                 "predicate.evaluation.metrics",
             "/metadata/component/modelCard/modelParameters": "predicate.snapshots",
             "/metadata/component/modelCard/considerations/technicalLimitations":
                 "predicate.findings",
             "/metadata/component/modelCard/considerations/useCases":
                 "predicate.run.options.policy",
             "/metadata/component/modelCard/properties": "predicate.review.decisions",
             "/metadata/component/modelCard/bom-ref": "predicate.sealed_at",
             "/metadata/component/properties": "predicate.sealed_at",
             "/metadata/component/type": "predicate.sealed_at",
             "/metadata/component/bom-ref": "predicate.sealed_at",
             "/metadata/properties": "predicate.sealed_at",
             "/metadata/timestamp": "predicate.sealed_at",
             "/metadata/tools": "predicate.generator",
             "/metadata/authors": "predicate.generator",
             "/serialNumber": "predicate.sealed_at", "/version": "predicate.sealed_at",
             "/bomFormat": "predicate.sealed_at", "/specVersion": "predicate.sealed_at",
             "/$schema": "predicate.sealed_at", "/dependencies": "predicate.graph"}
    for i in range(len(p["snapshots"])):
        ref = f"/components/{i}"
        found.update({f"{ref}/name": f"predicate.snapshots[{i}].input",
                      f"{ref}/type": "predicate.sealed_at", f"{ref}/bom-ref": "predicate.sealed_at",
                      f"{ref}/properties/0": f"predicate.snapshots[{i}].digest",
                      f"{ref}/properties/1": f"predicate.snapshots[{i}].reference"})
    return {k: v for k, v in found.items() if _exists(doc, k)}


def _exists(doc: Any, pointer: str) -> bool:
    for part in pointer.lstrip("/").split("/"):
        if isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            return False
    return True


def _timestamp(value: str | None) -> str:
    text = value or "1970-01-01T00:00:00"
    return text if text.endswith("Z") or "+" in text[10:] else text + "Z"


def cite(doc: dict[str, Any], statement: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a CycloneDX 1.7 BOM's JSON) with the tools and author that supplied its facts,
    one citation per tier naming the JSON pointers of the fields known that way, and the
    bundle's unknown fields as ``mlpipe:unknown`` properties of the model."""
    p = statement["predicate"]
    meta = doc.setdefault("metadata", {})
    meta["tools"] = {"components": [
        {"type": "application", "name": "mlpipe evidence", "bom-ref": EVIDENCE_TOOL,
         "version": p["generator"].removeprefix("mlpipe ")},
        {"type": "application", "name": "mlpipe runtime", "bom-ref": RUNTIME_TOOL,
         "version": p["generator"].removeprefix("mlpipe ")}]}
    code = p.get("code") or {}
    meta["authors"] = [{"bom-ref": AUTHOR, "name": f"the authors of pipeline "
                        f"{p['pipeline']['name']} (revision {code.get('commit') or 'unknown'}), "
                        f"its submitter {p['run'].get('user') or 'unknown'} and its reviewers"}]
    _, unknown = tiers.summary(statement)
    component = meta.setdefault("component", {})
    component.setdefault("properties", []).extend(
        {"name": "mlpipe:unknown", "value": f"{path}: {why}"} for path, why in unknown)
    by_tier: dict[str, list[str]] = {}
    for pointer, path in _pointers(statement, doc).items():
        tier = _tier(statement, path)[0]
        if tier != tiers.UNKNOWN:
            by_tier.setdefault(tier, []).append(pointer)
    who = {tiers.VERIFIED: EVIDENCE_TOOL, tiers.RECORDED: RUNTIME_TOOL, tiers.DECLARED: AUTHOR}
    when = {tiers.VERIFIED: p.get("sealed_at"),
            tiers.RECORDED: p["run"].get("finished_at") or p["run"].get("started_at"),
            tiers.DECLARED: p["run"].get("started_at")}
    doc["citations"] = [{"bom-ref": f"cite-{tier}", "pointers": sorted(by_tier[tier]),
                         "timestamp": _timestamp(when[tier]), "attributedTo": who[tier],
                         "note": _NOTES[tier]}
                        for tier in (tiers.VERIFIED, tiers.RECORDED, tiers.DECLARED)
                        if by_tier.get(tier)]
    return doc


__all__ = ["card_lines", "card_rows", "cite"]
