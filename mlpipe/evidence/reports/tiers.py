"""Evidence tiers: how each field of a bundle is known. *verified*: recomputed from bytes or the
store by the command that sealed the bundle; *recorded*: observed by mlpipe's runtime when the
run ran; *declared*: written by an author (the pipeline's, the submitter, a reviewer);
*unknown*: not known, with why.

Classifies a bundle's JSON by field path; reads nothing else and changes nothing. Every field
path a bundle can hold is named by a rule below: a field no rule names is a defect that
``tests/evidence/test_tiers.py`` finds.
"""
from __future__ import annotations

import re
from typing import Any

VERIFIED: str = "verified"
RECORDED: str = "recorded"
DECLARED: str = "declared"
UNKNOWN: str = "unknown"
TIERS: tuple[str, ...] = (VERIFIED, RECORDED, DECLARED, UNKNOWN)

_SEALED = "computed by `mlpipe evidence` when it sealed the bundle"
_STORE = "derived by `mlpipe evidence` from the store's records when it sealed the bundle"
_RUN = "observed by the mlpipe runtime while the run ran"
_HASHED = "hashed by the mlpipe runtime from the bytes when the run used or wrote them"
_AUTHOR = "written in the pipeline's or component's source by its author"
_SUBMITTER = "given by whoever submitted the run"
_REVIEWER = "written by the reviewer who recorded the decision"

#: (path prefix, tier, why), most specific first; a path's tier is the first rule whose prefix
#: it starts with (``[*]`` stands for any list index). Null marks the fields whose null means
#: "not known" rather than "none".
RULES: tuple[tuple[str, str, str], ...] = (
    ("_type", VERIFIED, _SEALED), ("predicateType", VERIFIED, _SEALED),
    ("subject", VERIFIED, "hashed from the model's files by `mlpipe evidence` when it sealed "
                          "the bundle"),
    ("predicate.generator", VERIFIED, _SEALED), ("predicate.sealed_at", VERIFIED, _SEALED),
    ("predicate.previous_bundle", VERIFIED, _SEALED),
    ("predicate.findings", VERIFIED, "judged by `mlpipe evidence` from the store's records"),
    ("predicate.productions[*].findings", VERIFIED, "judged by `mlpipe evidence` from the "
                                                    "store's records"),
    ("predicate.productions", RECORDED, _RUN),
    ("predicate.graph", VERIFIED, _STORE),
    ("predicate.training", VERIFIED, _STORE),
    ("predicate.evaluation.step", VERIFIED, _STORE),
    ("predicate.evaluation.reads_model", VERIFIED, _STORE),
    ("predicate.evaluation.metrics", RECORDED, _RUN),
    ("predicate.evaluation.report.digest", RECORDED, _HASHED),
    ("predicate.evaluation.report.location", RECORDED, _RUN),
    ("predicate.evaluation.report", VERIFIED, "read from the evaluation report's bytes by "
                                              "`mlpipe evidence` when it sealed the bundle"),
    ("predicate.review.status", VERIFIED, _STORE),
    ("predicate.review.decisions[*].verdict", DECLARED, _REVIEWER),
    ("predicate.review.decisions[*].note", DECLARED, _REVIEWER),
    ("predicate.review.decisions[*].policy.deviation", DECLARED, _REVIEWER),
    ("predicate.review.decisions[*].policy.criteria", VERIFIED, "judged by `mlpipe review` "
                                                                "against the cited bundle"),
    ("predicate.review.decisions[*].policy.passed", VERIFIED, "judged by `mlpipe review` "
                                                              "against the cited bundle"),
    ("predicate.review.decisions[*].policy", DECLARED, "the policy file the reviewer or the "
                                                       "submitter wrote"),
    ("predicate.review.decisions", RECORDED, "recorded by `mlpipe review` when the reviewer "
                                             "decided"),
    ("predicate.promotions", RECORDED, "recorded by `mlpipe promote` when it registered the "
                                       "model"),
    ("predicate.model_signature", RECORDED, "recorded when the model was signed"),
    ("predicate.candidate.name", DECLARED, _AUTHOR),
    ("predicate.candidate.model", RECORDED, _HASHED),
    ("predicate.candidate.evaluation", RECORDED, _HASHED),
    ("predicate.candidate", RECORDED, _RUN),
    ("predicate.pipeline.name", DECLARED, _AUTHOR),
    ("predicate.pipeline.digest", RECORDED, "the digest of the pipeline's spec, taken when the "
                                            "run was submitted"),
    ("predicate.run.params", DECLARED, _SUBMITTER),
    ("predicate.run.options.policy", DECLARED, "the policy the submitter committed the run to "
                                               "before it ran"),
    ("predicate.run", RECORDED, _RUN),
    ("predicate.code", RECORDED, "read from git when the run was submitted"),
    ("predicate.ci", RECORDED, "read from the CI service's environment when the run was "
                               "submitted"),
    ("predicate.checks", RECORDED, "the compile-time checks run when the run was submitted"),
    ("predicate.coordination", RECORDED, _RUN),
    ("predicate.snapshots[*].input", DECLARED, _SUBMITTER),
    ("predicate.snapshots[*].reference", DECLARED, _SUBMITTER),
    ("predicate.snapshots", RECORDED, _HASHED),
    ("predicate.artifacts[*].digest", RECORDED, _HASHED),
    ("predicate.artifacts", RECORDED, _RUN),
    ("predicate.steps[*].step", DECLARED, _AUTHOR),
    ("predicate.steps[*].component.name", DECLARED, _AUTHOR),
    ("predicate.steps[*].component.version", DECLARED, _AUTHOR),
    ("predicate.steps[*].component", RECORDED, "digested from the component's source when the "
                                               "run was submitted"),
    ("predicate.steps[*].environment.name", DECLARED, _AUTHOR),
    ("predicate.steps[*].environment.version", DECLARED, _AUTHOR),
    ("predicate.steps[*].compute.declared", DECLARED, _AUTHOR),
    ("predicate.steps[*].interpreter.declared_environment", DECLARED, _AUTHOR),
    ("predicate.steps[*].params", DECLARED, f"{_AUTHOR}, or {_SUBMITTER}"),
    ("predicate.steps[*].inputs[*].digest", RECORDED, _HASHED),
    ("predicate.steps[*].outputs[*].digest", RECORDED, _HASHED),
    ("predicate.steps", RECORDED, _RUN),
)

#: Fields whose null means the fact is not known (else a null is a known "none"), and why.
NULL_UNKNOWN: tuple[tuple[str, str], ...] = (
    ("predicate.snapshots[*].size", "the input's size was not recorded"),
    ("predicate.snapshots[*].file_count", "the input's file count was not recorded"),
    ("predicate.artifacts[*].size", "the artifact's size was not recorded"),
    ("predicate.artifacts[*].file_count", "the artifact's file count was not recorded"),
    ("predicate.run.user", "the user who submitted was not recorded"),
    ("predicate.run.host", "the host that ran it was not recorded"),
    ("predicate.code", "the run was not submitted from a git checkout"),
    ("predicate.code.commit", "the run was not submitted from a git checkout"),
    ("predicate.steps[*].compute.ran_on", "where the step ran was not recorded"),
    ("predicate.evaluation.metrics[*].population", "the metric's population was not logged"),
    ("predicate.steps[*].metrics[*].population", "the metric's population was not logged"),
    ("predicate.evaluation.report.population", "the report states no population"),
    ("predicate.steps[*].interpreter", "the step's interpreter was not recorded"),
)
_REFERENCE_WHY = ("only a reference was recorded (a remote or registered asset): its content "
                  "was never hashed")


def _pattern(path: str) -> str:
    return re.sub(r"\[\d+\]", "[*]", path)


def _starts(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def tier_of(path: str, value: Any = "") -> tuple[str, str] | None:
    """``(tier, why)`` of the field at ``path`` (``predicate.steps[0].status``) holding
    ``value``, or None when no rule names the field.

    Example:
        >>> tier_of("subject[0].digest.sha256", "ab12")[0]
        'verified'
    """
    p = _pattern(path)
    if isinstance(value, str) and value.startswith("ref:"):
        return UNKNOWN, _REFERENCE_WHY
    if value is None:
        for field, why in NULL_UNKNOWN:
            if p == field:
                return UNKNOWN, why
    for prefix, tier, why in RULES:
        if _starts(p, prefix):
            return tier, why
    return None


def leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every field of a JSON value as ``(path, value)``: scalars, and empty lists and
    objects (a field that holds nothing still says something)."""
    if isinstance(value, dict) and value:
        return [x for k, v in value.items() for x in leaves(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list) and value:
        return [x for i, v in enumerate(value) for x in leaves(v, f"{path}[{i}]")]
    return [(path, value)]


def classify(statement: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """``{path: (tier, why)}`` for every field of the bundle ``statement``; a field no rule
    names is ``unknown`` and says so."""
    out = {}
    for path, value in leaves(statement):
        out[path] = tier_of(path, value) or (UNKNOWN, "mlpipe does not say how this field is "
                                                      "known (a defect: report it)")
    return out


def summary(statement: dict[str, Any]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """How many fields are known each way, and each unknown field with why."""
    tiers = classify(statement)
    counts = dict.fromkeys(TIERS, 0)
    for tier, _ in tiers.values():
        counts[tier] += 1
    return counts, [(p, why) for p, (tier, why) in tiers.items() if tier == UNKNOWN]


def by_section(statement: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """Per part of the bundle (``subject``, ``candidate``, ``steps``, ...), how many of its
    fields are known each way, in the bundle's order."""
    out: dict[str, dict[str, int]] = {}
    for path, (tier, _) in classify(statement).items():
        head = path.split(".", 2)[1] if path.startswith("predicate.") else path.split(".")[0]
        part = re.sub(r"\[\d+\].*", "", head)
        out.setdefault(part, dict.fromkeys(TIERS, 0))[tier] += 1
    return list(out.items())


def lines(statement: dict[str, Any]) -> list[str]:
    """The text view's "How each fact is known" section."""
    counts, unknown = summary(statement)
    said = [f"{counts[VERIFIED]} verified (recomputed from bytes or the store when the bundle "
            f"was sealed), {counts[RECORDED]} recorded (observed by the runtime as the run ran), "
            f"{counts[DECLARED]} declared (written by an author, submitter or reviewer), "
            f"{counts[UNKNOWN]} unknown"]
    for part, n in by_section(statement):
        said.append(f"  {part}: " + ", ".join(f"{n[t]} {t}" for t in TIERS if n[t]))
    said += [f"  unknown {path}: {why}" for path, why in unknown]
    return said


__all__ = ["DECLARED", "RECORDED", "RULES", "TIERS", "UNKNOWN", "VERIFIED", "by_section",
           "classify", "leaves", "lines", "summary", "tier_of"]
