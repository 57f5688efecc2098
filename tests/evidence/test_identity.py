"""A candidate is one model from one pipeline, and every screen counts one notion of findings.

Two pipelines make the same model and evaluation bytes: a clean one (with a Param[Secret]), and
a data-parallel one (2 ranks, a real gloo process group) that logs rank 0's shard loss as a
global metric (MP703); a third has only a compile-time warning (MP801). Real CLI processes on
real SQLite and PostgreSQL stores: submit reports and gates, the other pipeline gets its own
candidate, and runs, show, diff, candidates, evidence, qualify and review read the bundles'
structure (coordination records, secrets, decisions), never their text.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlpipe.evidence.bundles.seal import canonical
from mlpipe.evidence.qualification.gate import FAILING, failing
from mlpipe.evidence.qualification.policy import judge, parse_policy
from mlpipe.evidence.records.findings import every_finding, severities
from mlpipe.evidence.records.reader import _severities
from mlpipe.evidence.reports.html import render_html

FIXTURE = Path(__file__).parents[1] / "fixtures" / "evidence" / "identity.py"
GOLDEN = Path(__file__).parents[1] / "golden" / "evidence" / "review.json"
TOKEN = "tok-7f3c9a0e5d2b4c61"   # the Param[Secret]: never in any output
DIGEST = "sha256:" + "b" * 64


def _finding(code="MP703", severity="error", step="fit", message="one rank's view"):
    return {"code": code, "name": "n", "severity": severity, "step": step,
            "message": message, "hint": "h"}


def _statement(**parts) -> dict:
    """The golden bundle, with no finding of any source unless ``parts`` gives some."""
    statement = json.loads(GOLDEN.read_text())
    statement["predicate"].update(
        findings=[], coordination=[], productions=[],
        checks={"recorded": True, "errors": 0, "error_results": [], "warnings": [], "info": []})
    statement["predicate"].update(parts)
    return statement


# --- structured reads ---------------------------------------------------------------------------

def test_the_candidates_count_reads_the_findings_not_the_first_list_called_findings():
    # sorted keys put a coordination record's empty "findings" before the predicate's own
    statement = _statement(
        coordination=[{"step": "fit", "ok": True, "world_size": 2, "findings": []}],
        findings=[_finding()])
    content = canonical(statement)
    assert content.index(b'"findings":[]') < content.index(b'"findings":[{')
    counts, by_source = _severities(content)
    assert counts == {"error": 1, "warning": 0, "info": 0}
    assert by_source == {"evidence": 1}


def test_text_that_looks_like_a_findings_list_inside_a_value_is_a_value():
    statement = _statement(findings=[], run={**json.loads(GOLDEN.read_text())["predicate"]["run"],
                                             "params": {"note": '"findings":[{"severity":'
                                                                '"error","code":"MP701"}]'}})
    assert _severities(canonical(statement))[0] == {"error": 0, "warning": 0, "info": 0}


def test_bytes_that_are_not_a_bundle_count_as_unknown():
    assert _severities(b'{"predicate": [1]}\n') is None
    assert _severities(b"\xff not json") is None


_SEVERITY = st.sampled_from(["error", "warning", "info"])
_ONE = st.builds(_finding, code=st.sampled_from(["MP416", "MP522", "MP702", "MP703", "MP801"]),
                 severity=_SEVERITY, step=st.sampled_from(["fit", "score", None]),
                 message=st.text(max_size=30))


@settings(max_examples=60, deadline=None)
@given(checks=st.lists(_ONE, max_size=4), coordination=st.lists(st.lists(_ONE, max_size=3),
                                                                max_size=3),
       evidence=st.lists(_ONE, max_size=4), productions=st.lists(st.lists(_ONE, max_size=3),
                                                                 max_size=2))
def test_every_screen_counts_what_every_finding_lists(checks, coordination, evidence,
                                                      productions):
    statement = _statement(
        checks={"recorded": True, "errors": 0, "error_results": [],
                "warnings": [c for c in checks if c["severity"] != "info"],
                "info": [c for c in checks if c["severity"] == "info"]},
        coordination=[{"step": f"fit{i}", "ok": True, "world_size": 2, "findings": found}
                      for i, found in enumerate(coordination)],
        findings=evidence,
        productions=[{"run": f"r-{i:010d}", "status": "succeeded", "started_at": "2026-12-01",
                      "findings": [{**f, "source": "evidence"} for f in found]}
                     for i, found in enumerate(productions)])
    listed = every_finding(statement["predicate"])
    counts, by_source = _severities(canonical(statement))
    assert counts == severities(listed)
    assert sum(by_source.values()) == len(listed)
    own = len(checks) + sum(map(len, coordination)) + len(evidence)
    assert len(listed) >= own and {f["source"] for f in listed} <= {
        "compile-time", "run-time", "evidence"}
    errors = [f for f in listed if f["severity"] == "error"]
    assert failing(listed, "error") == errors
    assert len(failing(listed, "info")) == len(listed)


def test_a_production_finding_is_labelled_with_its_run_and_said_once():
    same = _finding("MP717", "warning", None, "files not committed")
    p = _statement(findings=[same], productions=[
        {"run": "r-0000000001", "status": "succeeded", "started_at": "2026-12-01",
         "findings": [{**same, "source": "evidence"},
                      {**_finding("MP703"), "source": "evidence"}]}])["predicate"]
    listed = [(f["code"], f["source"], f["run"]) for f in every_finding(p)]
    assert listed == [("MP717", "evidence", p["run"]["id"]),
                      ("MP703", "evidence", "r-0000000001")]


def test_fail_on_means_what_it_means_for_check():
    assert FAILING == {"error": ("error",), "warning": ("error", "warning"),
                       "info": ("error", "warning", "info")}


# --- one notion of findings: policies and the page ----------------------------------------------

def _compile_time_only() -> dict:
    warning = {**_finding("MP801", "warning", "fit", "environment 'env' has no version"),
               "port": None, "from": None, "to": None, "file": "p.py", "line": 3}
    return _statement(findings=[], checks={"recorded": True, "errors": 0, "error_results": [],
                                           "warnings": [warning], "info": []})


@pytest.mark.parametrize("absent, passed", [("[MP801]", False), ("[warning]", False),
                                            ("[error]", True), ("[MP703]", True)])
def test_findings_absent_counts_compile_time_diagnostics(absent, passed):
    policy = parse_policy(f"name: p\nfindings_absent: {absent}\n", "p.yml")
    result = judge(policy, _compile_time_only(), DIGEST)
    assert result.passed is passed
    if not passed:
        assert re.fullmatch(r"the bundle has MP801 n \(compile-time, run r-<run>\): "
                            r"environment 'env' has no version", result.criteria[0].message)


def test_the_page_is_not_green_with_only_a_compile_time_warning():
    page = render_html(_compile_time_only(), DIGEST)
    section = page[page.index('<section id="findings"'):page.index('<section id="evaluation"')]
    assert "No findings" not in section and 'class="ok"' not in section
    assert "Findings (1 warning)" in section and "compile-time" in section


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PROBE = """<script>
const f = document.getElementById("findings");
document.body.setAttribute("data-probe", JSON.stringify({
  text: f.innerText, green: f.querySelectorAll("p.ok").length,
  rows: [...f.querySelectorAll("table.findings tbody tr")].map(
    tr => [...tr.children].map(c => c.innerText.trim())),
  first: [...document.body.children].filter(e => e.id).map(e => e.id).slice(0, 2)}));
</script></body>"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_the_page_verdict_in_chromium_with_only_a_compile_time_warning(tmp_path):
    import html

    page = tmp_path / "page.html"
    page.write_text(render_html(_compile_time_only(), DIGEST).replace("</body>", PROBE))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr
    probe = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', dom.stdout).group(1)))
    assert probe["first"] == ["who", "findings"]
    assert probe["green"] == 0 and "No findings" not in probe["text"]
    assert probe["text"].startswith("Findings (1 warning)")
    [[severity, finding, source, message, _fix]] = probe["rows"]
    assert (severity, source) == ("warning", "compile-time")
    assert finding.startswith("MP801") and message == "environment 'env' has no version"


# --- the real thing: submit, identity, and every read command -----------------------------------

class _Project:
    def __init__(self, root: Path, url: str) -> None:
        self.root, self.url = root, url
        root.mkdir(parents=True)
        shutil.copy(FIXTURE, root / "identity.py")
        (root / "mlpipe.toml").write_text("")
        (root / "data.txt").write_text("1 2 3 4 5 6 7 8\n")
        (root / "held.txt").write_text("9 10 11 12\n")
        self.outputs: list[str] = []

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME",)}
        env.update(MLPIPE_STORE_URL=self.url, CREDIT_TOKEN=TOKEN)
        done = subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=self.root,
                              env=env, capture_output=True, text=True, timeout=300)
        self.outputs += [done.stdout, done.stderr]
        return done

    def submit(self, pipeline: str, *extra: str) -> subprocess.CompletedProcess:
        secret = ("--secret", "token=CREDIT_TOKEN") if pipeline == "clean" else ()
        return self.cli("submit", f"identity.py:{pipeline}", "--input", "data=data.txt",
                        "--input", "held=held.txt", *secret, *extra)

    def table(self) -> dict[str, list[str]]:
        done = self.cli("candidates")
        assert done.returncode == 0, done.stderr
        return {row[0].split()[0]: row for row in
                (re.split(r"\s{2,}", line) for line in done.stdout.splitlines()[1:])}


def _ids(done: subprocess.CompletedProcess) -> tuple[str, str]:
    return (re.search(r"^run (r-[0-9a-f]{10}) ", done.stdout, re.M).group(1),
            re.search(r"^candidate (c-[0-9a-f]{10})$", done.stdout, re.M).group(1))


@pytest.mark.slow
def test_another_pipeline_with_the_same_bytes_is_its_own_candidate_and_every_screen_says_so(
        tmp_path, store_url):
    pytest.importorskip("torch")
    proj = _Project(tmp_path / "proj", store_url)

    # submit reports and gates
    done = proj.submit("clean")
    assert done.returncode == 0, done.stderr
    clean_run, clean = _ids(done)
    assert "no findings: no compile-time, run-time or evidence finding" in done.stdout
    done = proj.submit("ddp")
    assert done.returncode == 1, done.stdout + done.stderr
    ddp_run, ddp = _ids(done)
    assert ddp != clean   # the same model and report bytes, another pipeline
    assert ("error[MP703] global-metric-from-too-few-ranks (evidence, step fit_ddp): metric "
            "'train_loss' of step 'fit_ddp' is labelled global but was logged by rank 0 of a "
            "world of 2 without aggregation" in done.stdout), done.stdout
    assert done.stderr.rstrip().endswith(
        f"error: candidate {ddp} carries 1 finding of severity error or worse (MP703): it is "
        f"not ready for review (--fail-on error)")
    done = proj.submit("ddp", "--format", "json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert (document["candidate_id"], document["fail_on"], document["failing_findings"]) == (
        ddp, "error", 1)
    assert [(f["code"], f["source"]) for f in document["findings"]] == [("MP703", "evidence")]
    done = proj.submit("clean")   # the same pipeline again: a production, not a candidate
    assert done.returncode == 0 and _ids(done)[1] == clean, done.stderr
    done = proj.submit("warned")
    assert done.returncode == 0, done.stderr   # a warning passes the default gate
    warned_run, warned = _ids(done)
    assert re.search(r"^  warning\[MP801\] environment-unversioned \(compile-time, step "
                     r"fit_unpinned\): environment 'credit-env'", done.stdout, re.M)
    gated = proj.submit("warned", "--fail-on", "warning")
    assert gated.returncode == 1 and _ids(gated)[1] == warned
    assert "(MP801): it is not ready for review (--fail-on warning)" in gated.stderr

    # one rule for an unsealed candidate: qualify and --verify refuse, naming the fix
    (proj.root / "policy.yml").write_text("name: gate\nfindings_absent: [error, MP801]\n")
    refused = proj.cli("qualify", clean, "--policy", "policy.yml")
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        f"error: [MP720 bundle-chain-missing] candidate {clean} has no sealed bundle to qualify")
    assert f"run `mlpipe evidence {clean}`" in refused.stderr
    verified = proj.cli("evidence", clean, "--verify")
    assert verified.returncode == 1 and "error[MP720] bundle-chain-missing" in verified.stdout
    assert proj.table()[clean][5] == "not sealed"

    # evidence seals and gates on every finding
    assert proj.cli("evidence", clean).returncode == 0
    shown = proj.cli("evidence", ddp)
    assert shown.returncode == 1
    assert ("ERROR [MP703 global-metric-from-too-few-ranks] (evidence) metric 'train_loss'"
            in shown.stdout)
    assert "coordination" in proj.cli("evidence", ddp, "--format", "json").stdout
    shown = proj.cli("evidence", warned)
    assert shown.returncode == 0   # a warning is not an error
    assert "WARNING [MP801 environment-unversioned] (compile-time) environment" in shown.stdout
    page = proj.cli("evidence", warned, "--format", "html")
    assert 'class="ok"' not in page.stdout[page.stdout.index('id="findings"'):][:400]

    # candidates: what every bundle carries, by severity and by source, never "none" for ddp
    table = proj.table()
    assert table[ddp][1:3] == ["credit-risk-ddp", f"{ddp_run} (+1 re-run)"]   # the JSON one
    assert table[ddp][5] == "1 error (1 evidence)"
    assert table[warned][5] == "1 warning (1 compile-time)"
    assert table[clean][1:3] == ["credit-risk", f"{clean_run} (+1 re-run)"]
    assert table[clean][5] == "none"
    listed = {c["candidate_id"]: c for c in json.loads(
        proj.cli("candidates", "--format", "json").stdout)["candidates"]}
    assert listed[ddp]["findings"] == {"error": 1, "warning": 0, "info": 0}
    assert listed[ddp]["findings_by_source"] == {"evidence": 1}
    assert listed[warned]["findings_by_source"] == {"compile-time": 1}
    assert {c: listed[c]["name"] for c in (clean, ddp)} == {clean: "credit-risk",
                                                            ddp: "credit-risk-ddp"}
    assert (listed[clean]["productions"], listed[ddp]["productions"]) == (1, 1)

    # policies count compile-time diagnostics and evidence findings alike
    judged = proj.cli("qualify", warned, "--policy", "policy.yml", "--format", "json")
    assert judged.returncode == 1
    criteria = {c["criterion"]: c for c in json.loads(judged.stdout)["criteria"]}
    assert criteria["no finding MP801"]["found"] == "MP801 (1)"
    assert criteria["no error findings"]["passed"] is True
    judged = proj.cli("qualify", ddp, "--policy", "policy.yml")
    assert judged.returncode == 1 and "FAIL [MP708]" in judged.stdout
    assert proj.cli("qualify", clean, "--policy", "policy.yml").returncode == 0

    # decisions, and the read commands on bundles with coordination, secrets and decisions
    decided = proj.cli("review", clean, "--accept", "--by", "dana", "--note", "clean run")
    assert decided.returncode == 0, decided.stderr
    refused = proj.cli("review", ddp, "--accept", "--by", "dana", "--note", "fine")
    assert refused.returncode == 1 and "first MP703" in refused.stderr
    assert proj.cli("review", ddp, "--reject", "--by", "lee", "--note", "MP703").returncode == 0
    table = proj.table()
    assert (table[clean][6], table[ddp][6]) == ("accepted by dana", "rejected by lee")
    assert table[ddp][5] == "1 error (1 evidence)"   # a decision changes no count
    assert "accepted by dana" in proj.cli("evidence", clean).stdout
    runs = proj.cli("runs", "--format", "json")
    assert runs.returncode == 0
    assert {r["run_id"] for r in json.loads(runs.stdout)["runs"]} >= {clean_run, ddp_run,
                                                                    warned_run}
    assert proj.cli("runs").returncode == 0
    shown = proj.cli("show", ddp_run, "--format", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["candidates"] == [ddp]
    assert ddp in proj.cli("show", ddp_run).stdout
    shown = proj.cli("show", clean_run, "--format", "json")
    assert json.loads(shown.stdout)["candidates"] == [clean]
    assert proj.cli("diff", clean_run, ddp_run).returncode in (0, 1)
    assert proj.cli("evidence", ddp, "--verify").returncode == 0

    # a production recorded from another pipeline (as an older mlpipe did) is judged and shown
    import sqlalchemy as sa

    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO candidate_productions (candidate_id, run_id, "
                             "recorded_at) VALUES (:c, :r, CURRENT_TIMESTAMP)"),
                     {"c": clean, "r": ddp_run})
    engine.dispose()
    rebuilt = proj.cli("evidence", clean, "--rebuild")
    assert rebuilt.returncode == 1
    assert (f"ERROR [MP703 global-metric-from-too-few-ranks] (evidence, run {ddp_run}) metric"
            in rebuilt.stdout), rebuilt.stdout
    assert "pipeline credit-risk-ddp sha256:" in rebuilt.stdout
    assert proj.table()[clean][5] == "1 error (1 evidence)"

    # the secret reached the step (fit_one asserts it) and no output ever shows it
    assert not [o for o in proj.outputs if TOKEN in o]
