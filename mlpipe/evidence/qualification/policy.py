"""Qualification policies: a YAML file of acceptance criteria, read strictly, and judged
against a candidate's sealed bundle (``mlpipe qualify``, ``mlpipe review --policy``).

Judges a bundle's JSON and a verification's verdict; decides nothing and writes nothing (a
decision is ``review``'s, and only a reviewer's). The file format is in docs/review.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mlpipe.codes import (
    POLICY_FINDING_PRESENT,
    POLICY_METRIC_MISSING,
    POLICY_POPULATION_MISMATCH,
    POLICY_THRESHOLD_NOT_MET,
    POLICY_VERIFICATION_FAILED,
)
from mlpipe.digests import digest_bytes
from mlpipe.errors import UsageError
from mlpipe.evidence.records.findings import every_finding
from mlpipe.evidence.records.populations import population_name

_TOP = ("name", "description", "metrics", "findings_absent", "verify")
_METRIC = ("name", "at_least", "at_most", "population")
_SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True, slots=True)
class MetricRule:
    """A global metric the evaluation must have, on ``population``, within its bounds."""

    name: str
    population: str
    at_least: float | None = None
    at_most: float | None = None

    def required(self) -> str:
        bounds = [f">= {self.at_least:g}" if self.at_least is not None else "",
                  f"<= {self.at_most:g}" if self.at_most is not None else ""]
        return f"{' and '.join(b for b in bounds if b)} on {self.population}"


@dataclass(frozen=True, slots=True)
class Policy:
    """A parsed policy file: its name, where it came from, the sha256 of its bytes."""

    name: str
    file: str
    digest: str
    metrics: tuple[MetricRule, ...] = ()
    findings_absent: tuple[str, ...] = ()
    verify: str | None = None   # None, "pass" or "complete"

    def cited(self) -> dict[str, Any]:
        """How a decision names the policy it was judged against."""
        return {"name": self.name, "file": self.file, "digest": self.digest}


@dataclass(slots=True)
class Criterion:
    """One criterion's verdict: what was required, what was found, and, when unmet, the code."""

    criterion: str
    required: str
    found: str
    passed: bool
    code: str | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "required": self.required, "found": self.found,
                "passed": self.passed, "code": self.code, "message": self.message}


@dataclass(slots=True)
class Qualification:
    """A policy judged against one sealed bundle."""

    policy: Policy
    candidate: str
    bundle: str
    criteria: list[Criterion] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.criteria)

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.cited(), "candidate": self.candidate,
                "bundle": self.bundle, "passed": self.passed,
                "criteria": [c.to_dict() for c in self.criteria]}


def _bad(file: str, where: str, what: str, hint: str) -> UsageError:
    return UsageError(f"{where}: {what}", file=file, hint=hint)


def _number(file: str, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(file, where, f"{value!r} is not a number",
                   "give the threshold as a number, e.g. 0.8")
    return float(value)


def parse_policy(text: str, file: str) -> Policy:
    """The policy ``text`` (the YAML of ``file``) states, checked field by field.

    Raises:
        UsageError: not YAML, not a mapping, an unknown key, a missing or mistyped field; one
            message naming the field and the fix.

    Example:
        >>> parse_policy("name: p\\nmetrics:\\n- {name: accuracy, at_least: 0.8, "
        ...              "population: test}\\n", "p.yml").metrics[0].required()
        '>= 0.8 on test'
    """
    from mlpipe.userfiles import load_yaml

    data = load_yaml(text, file=file, hint="fix the YAML (docs/review.md shows a policy)")
    if not isinstance(data, dict):
        raise _bad(file, "(top)", "a policy is a mapping of name, metrics, findings_absent and "
                   "verify", "start from policies/defect-classifier.yml")
    unknown = sorted(set(map(str, data)) - set(_TOP))
    if unknown:
        raise _bad(file, unknown[0], f"unknown key (a policy has {', '.join(_TOP)})",
                   "remove it, or correct its spelling")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _bad(file, "name", "missing: a policy names itself (decisions cite the name)",
                   "add `name: <team>-<model>`")
    rules = []
    metrics = data.get("metrics") or []
    if not isinstance(metrics, list):
        raise _bad(file, "metrics", "must be a list of {name, population, at_least|at_most}",
                   "write each metric as a list item")
    for i, entry in enumerate(metrics):
        where = f"metrics[{i}]"
        if not isinstance(entry, dict):
            raise _bad(file, where, "must be a mapping of name, population, at_least, at_most",
                       "write `- {name: accuracy, population: test, at_least: 0.8}`")
        extra = sorted(set(map(str, entry)) - set(_METRIC))
        if extra:
            raise _bad(file, f"{where}.{extra[0]}", f"unknown key (a metric has "
                       f"{', '.join(_METRIC)})", "remove it, or correct its spelling")
        for key in ("name", "population"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise _bad(file, f"{where}.{key}", "missing: a required metric names itself and "
                           "the population it must be measured on",
                           f"add `{key}: ...` (population: the held-out split, e.g. test)")
        low = None if entry.get("at_least") is None else _number(file, f"{where}.at_least",
                                                                  entry["at_least"])
        high = None if entry.get("at_most") is None else _number(file, f"{where}.at_most",
                                                                 entry["at_most"])
        if low is None and high is None:
            raise _bad(file, where, f"metric {entry['name']!r} has no threshold",
                       "add at_least (or at_most, for a loss or an error rate)")
        rules.append(MetricRule(entry["name"], entry["population"].strip(), low, high))
    absent = data.get("findings_absent") or []
    if not isinstance(absent, list) or not all(isinstance(x, str) for x in absent):
        raise _bad(file, "findings_absent", "must be a list of codes (MP702) or severities "
                   "(error, warning, info)", "write `findings_absent: [error, MP704]`")
    from mlpipe.codes import CODES

    for x in absent:
        if x.lower() not in _SEVERITIES and x.upper() not in CODES:
            raise _bad(file, "findings_absent", f"{x!r} is neither a published code nor a "
                       f"severity", "codes are listed in docs/checks.md")
    verify = data.get("verify", False)
    if verify not in (True, False, "complete"):
        raise _bad(file, "verify", f"{verify!r} is not true, false or complete",
                   "write `verify: true` (or `complete`: nothing may be left un-re-hashed)")
    if not rules and not absent and verify is False:
        raise _bad(file, "(top)", "the policy states no criterion: every candidate would pass it",
                   "add metrics, findings_absent or verify")
    return Policy(name.strip(), file, digest_bytes(text.encode("utf-8")), tuple(rules),
                  tuple(x.lower() if x.lower() in _SEVERITIES else x.upper() for x in absent),
                  None if verify is False else "complete" if verify == "complete" else "pass")


def load_policy(path: str) -> Policy:
    """The policy in the YAML file at ``path``.

    Raises:
        UsageError: the file cannot be read, or is not a valid policy (``parse_policy``).
    """
    from mlpipe.userfiles import read_text

    text = read_text(path, what="policy",
                     hint="give the path of a policy YAML file (docs/review.md)")
    return parse_policy(text, path)


def _values(predicate: dict[str, Any], name: str) -> list[tuple[float, str | None]]:
    """(value, population) of every global value of metric ``name`` the evaluation has: the
    evaluation step's metrics and its report's."""
    ev = predicate["evaluation"]
    found = [(x["value"], x.get("population")) for x in ev["metrics"]
             if x["name"] == name and x["scope"] == "global"]
    report = ev.get("report") or {}
    found += [(x["value"], report.get("population")) for x in report.get("metrics", [])
              if x["name"] == name and x.get("scope", "global") == "global"]
    return found


def _metric(rule: MetricRule, predicate: dict[str, Any]) -> Criterion:
    title = f"metric {rule.name}"
    values = _values(predicate, rule.name)
    if not values:
        return Criterion(title, rule.required(), "absent", False, POLICY_METRIC_MISSING.code,
                         f"the evaluation has no global metric {rule.name!r}")
    wanted = population_name(rule.population)
    on = [(v, p) for v, p in values if population_name(p) == wanted]
    if not on:
        seen = sorted({population_name(p) or "(no population)" for _, p in values})
        return Criterion(title, rule.required(), f"measured on {', '.join(seen)}", False,
                         POLICY_POPULATION_MISMATCH.code,
                         f"{rule.name!r} was measured on {', '.join(seen)}, not on "
                         f"{rule.population!r}")
    found = ", ".join(f"{v:.4g}" for v in sorted({v for v, _ in on}))
    bad = [v for v, _ in on if (rule.at_least is not None and v < rule.at_least)
           or (rule.at_most is not None and v > rule.at_most)]
    if bad:
        return Criterion(title, rule.required(), f"{found} on {wanted}", False,
                         POLICY_THRESHOLD_NOT_MET.code,
                         f"{rule.name} = {bad[0]:.4g} on {wanted}, required {rule.required()}")
    return Criterion(title, rule.required(), f"{found} on {wanted}", True)


def judge(policy: Policy, statement: dict[str, Any], digest: str,
          verification: dict[str, Any] | None = None) -> Qualification:
    """Every criterion of ``policy`` against the sealed bundle ``statement`` (digest
    ``digest``); ``verification``: ``Verification.to_dict()`` when the policy asks for it.

    Example:
        >>> judge(policy, statement, digest).passed
        False
    """
    p = statement["predicate"]
    out = Qualification(policy, p["candidate"]["id"], digest)
    out.criteria += [_metric(rule, p) for rule in policy.metrics]
    found = every_finding(p)   # compile-time, run-time and evidence findings alike
    for wanted in policy.findings_absent:
        hits = [f for f in found if f["code"] == wanted or f["severity"] == wanted]
        label = f"{wanted} findings" if wanted in _SEVERITIES else f"finding {wanted}"
        out.criteria.append(Criterion(
            f"no {label}", "absent", "absent" if not hits else
            ", ".join(sorted({f["code"] for f in hits})) + f" ({len(hits)})", not hits,
            None if not hits else POLICY_FINDING_PRESENT.code,
            None if not hits else f"the bundle has {hits[0]['code']} {hits[0]['name']} "
                                  f"({hits[0]['source']}, run {hits[0]['run']}): "
                                  f"{hits[0]['message']}"))
    if policy.verify is not None:
        v = verification or {}
        ok = bool(v.get("ok")) and (policy.verify == "pass" or bool(v.get("complete")))
        found = ("no mismatch" if v.get("ok") else
                 f"{len(v.get('mismatches') or [])} mismatch(es)")
        if v.get("ok") and not v.get("complete"):
            found += f", {len(v.get('not_rehashed') or [])} not re-hashed"
        message = None
        if not ok:
            first = (v.get("mismatches") or v.get("not_rehashed") or [{}])[0]
            message = (f"--verify: {first.get('message') or 'the verification did not pass'}")
        out.criteria.append(Criterion(
            "--verify", "passes" if policy.verify == "pass" else "passes, everything re-hashed",
            found, ok, None if ok else POLICY_VERIFICATION_FAILED.code, message))
    return out


def qualify(url: str, ref: str, policy: Policy) -> Qualification:
    """``mlpipe qualify REF --policy FILE``: the policy judged against the candidate's newest
    sealed bundle, verified when the policy says so. Records nothing about the judgement and
    seals nothing: like ``--verify``, it is refused (MP720) when no bundle was sealed yet.

    Raises:
        NothingSealed: no bundle of the candidate is sealed (``mlpipe evidence`` seals one).
        UsageError: no candidate, or more than one, matches ``ref``.
        StoreError: the store cannot be opened, or a sealed bundle was altered in it.
    """
    from mlpipe.evidence.bundles.seal import load_sealed, sealed_bundle

    sealed = sealed_bundle(url, ref, first="qualify")
    statement = load_sealed(sealed.digest, sealed.content)
    verification = None
    if policy.verify is not None:
        from mlpipe.evidence.bundles.verify import verify_bundle

        verification = verify_bundle(url, statement["predicate"]["candidate"]["id"]).to_dict()
    return judge(policy, statement, sealed.digest, verification)


def render_qualification(q: Qualification) -> str:
    """The pass/fail table ``mlpipe qualify`` prints, and its verdict line."""
    rows = [["CRITERION", "REQUIRED", "FOUND", "RESULT"]]
    rows += [[c.criterion, c.required, c.found,
              "pass" if c.passed else f"FAIL [{c.code}]"] for c in q.criteria]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"policy {q.policy.name} ({q.policy.file}, {q.policy.digest[:19]})",
             f"candidate {q.candidate}  bundle {q.bundle}", ""]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    failed = [c for c in q.criteria if not c.passed]
    if failed:
        lines.append("")
        lines += [f"  {c.code}: {c.message}" for c in failed]
    lines.append("")
    lines.append(f"{'PASS' if q.passed else 'FAIL'}: {len(q.criteria) - len(failed)} of "
                 f"{len(q.criteria)} criteria met; nothing was decided (record a decision with "
                 f"`mlpipe review {q.candidate} --accept|--reject --by NAME --note TEXT`)")
    return "\n".join(lines)


__all__ = ["Criterion", "MetricRule", "Policy", "Qualification", "judge", "load_policy",
           "parse_policy", "qualify", "render_qualification"]
