"""The reviewer's side: one candidate per model and evaluation, the candidates list, policies
judged by `mlpipe qualify`, decisions recorded by `mlpipe review` on the exact bundle read.
Real submits, a real store (SQLite and PostgreSQL), the CLI as a process."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bundle_project import GATED, BundleProject

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POLICY = """name: review-policy
metrics:
  - {name: accuracy, population: test, at_least: 0.8}
findings_absent: [error]
verify: true
"""


def _submit(proj: BundleProject, *extra: str) -> tuple[str, str]:
    done = proj.cli("submit", "review.py:review", "--input", "data=data.txt", *extra)
    assert done.returncode == (1 if GATED.search(done.stderr) else 0), done.stderr
    return (re.search(r"^run (r-[0-9a-f]+)", done.stdout, re.M).group(1),
            re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1))


def _policy(proj: BundleProject, text: str = POLICY, name: str = "policy.yml") -> str:
    (proj.root / name).write_text(text)
    return name


def _decisions(proj: BundleProject) -> int:
    import sqlalchemy as sa

    url = proj.store_url or f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        count = conn.execute(sa.text("SELECT COUNT(*) FROM decisions")).scalar_one()
    engine.dispose()
    return count


def _candidates(proj: BundleProject) -> list[dict]:
    done = proj.cli("candidates", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["candidates"]


# --- one candidate per model and evaluation ----------------------------------------------------

def test_a_rerun_of_the_same_bytes_is_another_production_of_the_candidate(store_url, tmp_path):
    proj = BundleProject(tmp_path / "proj", store_url)
    run1, cand = _submit(proj)
    run2, again = _submit(proj)   # every step reused: the same model and evaluation bytes
    assert again == cand
    p = proj.bundle(cand)["predicate"]
    assert p["run"]["id"] == run1
    assert [(x["run"], x["status"]) for x in p["productions"]] == [(run2, "succeeded")]
    [listed] = _candidates(proj)
    assert (listed["candidate_id"], listed["run_id"], listed["productions"]) == (cand, run1, 1)
    shown = proj.cli("show", run2).stdout
    assert (f"candidate {cand}  model blake3:" in shown
            and f"(reproduced: the model and evaluation bytes of run {run1})" in shown)
    assert f"reproduced by run {run2} (succeeded, started " in proj.evidence(cand).stdout
    # another evaluation of the same model is another candidate
    _, other = _submit(proj, "--param", "split=validation")
    assert other != cand
    assert [c["candidate_id"] for c in _candidates(proj)] == [other, cand]


# --- the candidates list ----------------------------------------------------------------------

def test_candidates_show_metrics_with_population_findings_and_review(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    _, good = _submit(proj)
    _, bad = _submit(proj, "--param", "split=train")   # evaluated on the training split
    table = [re.split(r"\s{2,}", line) for line in proj.cli("candidates").stdout.splitlines()]
    assert table[0] == ["CANDIDATE", "PIPELINE", "RUN", "CREATED (UTC)", "GLOBAL METRICS",
                        "FINDINGS", "REVIEW", "SIGNED"]
    rows = {row[0]: row[4:] for row in table[1:]}
    assert rows == {good: ["accuracy 0.875 on test", "not sealed", "unreviewed", "-"],
                    bad: ["accuracy 0.875 on train", "not sealed", "unreviewed", "-"]}
    assert proj.evidence(good).returncode == 0
    assert proj.evidence(bad).returncode == 1
    done = proj.cli("review", bad, "--reject", "--by", "lee", "--note", "evaluated on train")
    assert done.returncode == 0, done.stderr
    rows = {row[0]: row[4:] for row in (re.split(r"\s{2,}", line) for line in
                                        proj.cli("candidates").stdout.splitlines()[1:])}
    # the review pipeline's score reads fit's data: MP416 at compile time, counted like any
    assert rows == {good: ["accuracy 0.875 on test", "1 warning (1 compile-time)", "unreviewed",
                           "local key (untrusted)"],
                    bad: ["accuracy 0.875 on train",
                          "1 error, 1 warning (1 compile-time, 1 evidence)", "rejected by lee",
                          "local key (untrusted)"]}
    listed = {c["candidate_id"]: c for c in _candidates(proj)}
    assert listed[bad]["metrics"] == [{"name": "accuracy", "value": 0.875,
                                       "population": "train, 8 examples"}]
    assert listed[bad]["findings"] == {"error": 1, "warning": 1, "info": 0}
    assert listed[bad]["review"]["status"] == "rejected"
    assert listed[bad]["review"]["by"] == "lee"
    assert listed[bad]["review"]["bundle"].startswith("sha256:")
    assert listed[good]["findings"] == {"error": 0, "warning": 1, "info": 0}
    assert listed[good]["review"] == {"status": "unreviewed", "by": None, "decided_at": None,
                                      "bundle": None}


# --- policies and qualify ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    proj = BundleProject(tmp_path_factory.mktemp("qualify") / "proj")
    _, proj.candidate = _submit(proj)
    _, proj.on_train = _submit(proj, "--param", "split=train")
    for cand in (proj.candidate, proj.on_train):   # read (and so sealed) before it is judged
        assert proj.evidence(cand).returncode in (0, 1)
    return proj


def test_qualify_prints_a_table_and_decides_nothing(judged):
    done = judged.cli("qualify", judged.candidate, "--policy", _policy(judged))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("policy review-policy (policy.yml, sha256:")
    assert re.fullmatch(rf"candidate {judged.candidate}  bundle sha256:[0-9a-f]{{64}}", lines[1])
    assert [ln.split("  ")[0] for ln in lines[3:7]] == [
        "CRITERION", "metric accuracy", "no error findings", "--verify"]
    assert re.search(r"metric accuracy\s+>= 0.8 on test\s+0.875 on test\s+pass$", lines[4])
    assert lines[-1] == (f"PASS: 3 of 3 criteria met; nothing was decided (record a decision "
                         f"with `mlpipe review {judged.candidate} --accept|--reject --by NAME "
                         f"--note TEXT`)")
    assert _decisions(judged) == 0
    as_json = json.loads(judged.cli("qualify", judged.candidate, "--policy", "policy.yml",
                                    "--format", "json").stdout)
    assert as_json["passed"] is True and as_json["policy"]["name"] == "review-policy"
    assert [c["passed"] for c in as_json["criteria"]] == [True, True, True]


@pytest.mark.parametrize("policy, on_train, code, message", [
    ("metrics: [{name: f1, population: test, at_least: 0.5}]", False, "MP705",
     "the evaluation has no global metric 'f1'"),
    ("metrics: [{name: accuracy, population: test, at_least: 0.9}]", False, "MP706",
     "accuracy = 0.875 on test, required >= 0.9 on test"),
    ("metrics: [{name: accuracy, population: test, at_most: 0.5}]", False, "MP706",
     "accuracy = 0.875 on test, required <= 0.5 on test"),
    ("metrics: [{name: accuracy, population: test, at_least: 0.5}]", True, "MP707",
     "'accuracy' was measured on train, not on 'test'"),
    ("findings_absent: [MP702]", True, "MP708",
     r"the bundle has MP702 evaluation-overlaps-training \(evidence, run r-[0-9a-f]+\): the "
     r"evaluation in step 'score' ran on population 'train'"),
])
def test_each_unmet_criterion_has_its_code(judged, policy, on_train, code, message):
    name = _policy(judged, f"name: strict\n{policy}\n", f"{code}.yml")
    cand = judged.on_train if on_train else judged.candidate
    done = judged.cli("qualify", cand, "--policy", name)
    assert done.returncode == 1, done.stderr
    assert f"FAIL [{code}]" in done.stdout
    assert re.search(f"  {code}: {message}", done.stdout), done.stdout
    assert done.stdout.splitlines()[-1].startswith("FAIL: 0 of 1 criteria met")


def test_a_policy_that_requires_verify_fails_on_a_changed_model(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    _, cand = _submit(proj)
    assert proj.evidence(cand).returncode == 0
    weights = next((proj.root / "evidence" / "artifacts").rglob("weights.txt"))
    weights.chmod(0o644)
    weights.write_text("999")
    done = proj.cli("qualify", cand, "--policy", _policy(proj))
    assert done.returncode == 1
    assert re.search(r"--verify\s+passes\s+\d+ mismatch\(es\)\s+FAIL \[MP709\]", done.stdout)
    # the bundle no longer names these bytes: no decision can cite it
    refused = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok")
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "error: [MP715 decision-on-stale-bundle] the model's files changed since bundle sha256:")
    assert "no longer at blake3/" in refused.stderr   # the root holds no intact copy of them
    assert _decisions(proj) == 0


@pytest.mark.parametrize("text, message", [
    ("name: [unclosed", r"policy\.yml:1: not valid YAML"),
    ("- a list", r"policy\.yml: \(top\): a policy is a mapping"),
    ("name: p\nmetrics: [{name: accuracy, population: test, at_least: 0.8}]\nverfy: true",
     r"policy\.yml: verfy: unknown key \(a policy has name, description, metrics, "
     r"findings_absent, verify\)"),
    ("metrics: []\nverify: true", r"policy\.yml: name: missing"),
    ("name: p\nmetrics: [{name: accuracy, at_least: 0.8}]",
     r"policy\.yml: metrics\[0\]\.population: missing"),
    ("name: p\nmetrics: [{name: accuracy, population: test, minimum: 0.8}]",
     r"policy\.yml: metrics\[0\]\.minimum: unknown key"),
    ("name: p\nmetrics: [{name: accuracy, population: test}]",
     r"policy\.yml: metrics\[0\]: metric 'accuracy' has no threshold"),
    ("name: p\nmetrics: [{name: accuracy, population: test, at_least: high}]",
     r"policy\.yml: metrics\[0\]\.at_least: 'high' is not a number"),
    ("name: p\nmetrics: [{name: accuracy, population: test, at_least: .nan}]",
     r"policy\.yml: metrics\[0\]\.at_least: nan is not a number"),
    ("name: p\nfindings_absent: [MP999]",
     r"policy\.yml: findings_absent: 'MP999' is neither a published code nor a severity"),
    ("name: p\nverify: yes please", r"policy\.yml: verify: 'yes please' is not true, false or "
                                     r"complete"),
    ("name: p", r"policy\.yml: \(top\): the policy states no criterion"),
])
def test_a_bad_policy_is_one_clear_message(text, message):
    from mlpipe.errors import UsageError
    from mlpipe.evidence.qualification.policy import parse_policy

    with pytest.raises(UsageError, match=message):
        parse_policy(text, "policy.yml")


def test_a_bad_policy_file_exits_2_before_reading_the_store(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    missing = proj.cli("qualify", "c-any", "--policy", "nothere.yml")
    assert missing.returncode == 2
    assert missing.stderr == ("error: cannot read policy nothere.yml: No such file or directory\n"
                              "  help: give the path of a policy YAML file (docs/review.md)\n")
    assert not (proj.root / "evidence").exists()


def test_the_example_policy_is_valid():
    from mlpipe.evidence.qualification.policy import load_policy

    policy = load_policy(str(ROOT / "policies" / "defect-classifier.yml"))
    assert [(r.name, r.population) for r in policy.metrics] == [("accuracy", "test"),
                                                               ("recall_dent", "test")]
    assert policy.findings_absent == ("error",) and policy.verify == "pass"


# --- decisions --------------------------------------------------------------------------------

def test_a_decision_cites_the_bundle_read_and_is_sealed_into_the_next(store_url, tmp_path):
    proj = BundleProject(tmp_path / "proj", store_url)
    _, cand = _submit(proj)
    review = ("review", cand, "--accept", "--by", "dana", "--note", "meets Q-7")
    unsealed = proj.cli(*review)
    assert unsealed.returncode == 1
    assert unsealed.stderr == (
        f"error: [MP715 decision-on-stale-bundle] no bundle of candidate {cand} has been "
        f"sealed, so there is no digest to cite\n  help: run `mlpipe evidence {cand} "
        f"--rebuild`, read the bundle it seals, then decide on that one\n")
    first = proj.evidence(cand, "--format", "json").stdout
    digest = "sha256:" + __import__("hashlib").sha256(first.encode()).hexdigest()
    assert json.loads(first)["predicate"]["review"] == {"status": "unreviewed",
                                                        "decisions": []}
    done = proj.cli(*review, "--policy", _policy(proj), "--bundle", digest)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"accepted candidate {cand} by dana, citing bundle {digest}"
    sealed = re.search(r"sealed (sha256:[0-9a-f]{64}) with the decision", lines[1]).group(1)
    bundle = proj.bundle(cand)
    p = bundle["predicate"]
    assert p["previous_bundle"] == digest
    assert p["review"]["status"] == "accepted"
    [d] = p["review"]["decisions"]
    assert (d["verdict"], d["by"], d["note"], d["bundle"]) == ("accepted", "dana", "meets Q-7",
                                                              digest)
    assert d["policy"]["name"] == "review-policy" and d["policy"]["passed"] is True
    assert [c["criterion"] for c in d["policy"]["criteria"]] == [
        "metric accuracy", "no error findings", "--verify"]
    assert "sha256:" + __import__("hashlib").sha256(
        proj.evidence(cand, "--format", "json").stdout.encode()).hexdigest() == sealed
    text = proj.evidence(cand).stdout
    assert "REVIEW\n  status accepted\n  accepted by dana at " in text
    assert f"on bundle {digest}: meets Q-7\n    policy review-policy (policy.yml, " in text
    assert proj.evidence(cand, "--verify").returncode == 0
    assert _candidates(proj)[0]["review"]["status"] == "accepted"

    # the cited digest is no longer the newest: refused, nothing recorded
    again = proj.cli("review", cand, "--reject", "--by", "lee", "--note", "x", "--bundle", digest)
    assert again.returncode == 1
    assert again.stderr.startswith(f"error: [MP715 decision-on-stale-bundle] the decision cites "
                                   f"bundle {digest}, but the newest sealed bundle of {cand} is "
                                   f"{sealed}\n")
    # the store changed since the newest bundle was sealed: refused until re-sealed
    proj.sql("UPDATE metrics SET value = 0.5 WHERE name = 'accuracy'")
    stale = proj.cli("review", cand, "--reject", "--by", "lee", "--note", "worse now")
    assert stale.returncode == 1
    assert stale.stderr.startswith(
        f"error: [MP715 decision-on-stale-bundle] the store or the model's files changed since "
        f"bundle {sealed} was sealed (2 differences, first: predicate.evaluation.metrics[accuracy]"
        f".value: 0.875 -> 0.5)")
    assert _decisions(proj) == 1
    assert proj.evidence(cand, "--rebuild").returncode == 0
    assert proj.cli("review", cand, "--reject", "--by", "lee", "--note", "worse now"
                    ).returncode == 0
    p = proj.bundle(cand)["predicate"]
    assert p["review"]["status"] == "rejected"
    assert [d["verdict"] for d in p["review"]["decisions"]] == ["accepted", "rejected"]
    assert _decisions(proj) == 2


def test_an_error_finding_blocks_acceptance_not_rejection(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    run, cand = _submit(proj, "--param", "split=train")
    assert proj.evidence(cand).returncode == 1
    accept = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "looks fine")
    assert accept.returncode == 1
    assert accept.stderr == (
        f"error: [MP716 acceptance-refused] candidate {cand} cannot be accepted: its bundle has "
        f"1 error-severity finding, first MP702 evaluation-overlaps-training (evidence, run "
        f"{run})\n  help: fix the "
        f"cause and produce a new candidate, or record `mlpipe review {cand} --reject` with the "
        f"reason\n")
    assert _decisions(proj) == 0
    assert proj.cli("review", cand, "--reject", "--by", "dana", "--note", "on train"
                    ).returncode == 0


def test_a_policy_not_met_blocks_acceptance(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    _, cand = _submit(proj)
    assert proj.evidence(cand).returncode == 0
    strict = _policy(proj, "name: strict\nmetrics: [{name: accuracy, population: test, "
                           "at_least: 0.9}]\n")
    accept = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok", "--policy",
                      strict)
    assert accept.returncode == 1
    assert accept.stderr == (
        f"error: [MP716 acceptance-refused] candidate {cand} cannot be accepted: it does not "
        f"meet policy strict (1 criterion unmet, first MP706: accuracy = 0.875 on test, "
        f"required >= 0.9 on test)\n  help: see `mlpipe qualify {cand} --policy policy.yml`; "
        f"produce a candidate that meets it, or record --reject\n")
    assert _decisions(proj) == 0
    reject = proj.cli("review", cand, "--reject", "--by", "dana", "--note", "below 0.9",
                      "--policy", strict)
    assert reject.returncode == 0, reject.stderr
    [d] = proj.bundle(cand)["predicate"]["review"]["decisions"]
    assert d["policy"]["passed"] is False
    assert [c["code"] for c in d["policy"]["criteria"]] == ["MP706"]
    assert "policy strict (policy.yml, sha256:" in proj.evidence(cand).stdout
    assert "NOT met (MP706)" in proj.evidence(cand).stdout


@pytest.mark.parametrize("args, message", [
    (("--by", "dana", "--note", "x"), "error: a decision is --accept or --reject; neither was "
                                      "given\n"),
    (("--accept", "--by", " ", "--note", "x"), "error: a decision names who decided (--by) and "
                                               "why (--note); one is empty\n"),
])
def test_a_decision_needs_a_verdict_a_name_and_a_note(tmp_path, args, message):
    proj = BundleProject(tmp_path / "proj")
    _, cand = _submit(proj)
    done = proj.cli("review", cand, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(message)


def test_nothing_in_orchestration_records_a_decision():
    """Only `mlpipe review` decides: no executor, backend, step runtime or run command writes a
    decision or calls the module that does."""
    sources = [*(ROOT / "mlpipe" / "backends").rglob("*.py"),
               *(ROOT / "mlpipe" / "runtime").rglob("*.py"),
               ROOT / "mlpipe" / "cli" / "running.py", ROOT / "mlpipe" / "cli" / "azure.py"]
    assert len(sources) > 10
    for path in sources:
        text = path.read_text()
        # (the executor's reuse decision is reuse.Decision: about cache keys, not candidates)
        assert not re.search(r"\bm\.Decision\b|evidence\.review\b|record_decision|"
                             r"\bACCEPTED\b|INSERT INTO decisions", text), path


def test_a_later_production_keeps_the_sealed_bundle_verifiable(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    run1, cand = _submit(proj)
    sealed = proj.bundle(cand)
    assert sealed["predicate"]["productions"] == []
    run2, again = _submit(proj)   # reproduces it after its bundle was sealed
    assert again == cand
    verified = json.loads(proj.evidence(cand, "--verify", "--format", "json").stdout)
    assert (verified["ok"], verified["mismatches"]) == (True, [])
    # but a decision must cite a bundle that says what the store holds: re-seal first
    stale = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok")
    assert stale.returncode == 1
    assert "first: predicate.productions[" in stale.stderr
    rebuilt = json.loads(proj.evidence(cand, "--rebuild", "--format", "json").stdout)
    assert [x["run"] for x in rebuilt["predicate"]["productions"]] == [run2]
    assert proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok").returncode == 0
    assert proj.evidence(cand, "--verify").returncode == 0
    assert run1 != run2
