"""The review page's content from a bundle's JSON, without a browser: decisions and their policy,
later productions, findings with their fixes, and every value as a table, never JSON text.
(tests/evidence/test_html.py renders it in headless Chromium.)"""
from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser

import pytest

from golden_files import GOLDEN
from mlpipe.evidence.reports.html import render_html, value_html

DIGEST = "sha256:" + "b" * 64
EARLIER = "sha256:" + "a" * 64


class _Text(HTMLParser):
    """The page's visible text, and the text of each row of the table inside #who."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.rows: list[list[str]] = []
        self._skip = 0
        self._in_who = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("th", "td", "tr", "div", "p", "br", "h2", "h3", "section"):
            self.handle_data(" ")   # where the browser would break or space the text
        if tag in ("style", "svg"):
            self._skip += 1
        if attrs.get("id") == "who":
            self._in_who = True
        if self._in_who and tag == "tr":
            self.rows.append([])
        if self._in_who and tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("style", "svg"):
            self._skip -= 1
        if tag == "header":
            self._in_who = False
        if self._cell is not None and tag in ("th", "td"):
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)
            if self._cell is not None:
                self._cell.append(data)


def _read(page: str) -> _Text:
    parser = _Text()
    parser.feed(page)
    return parser


@pytest.fixture
def statement() -> dict:
    return json.loads((GOLDEN / "evidence" / "review.json").read_text())


def _policy(passed: bool) -> dict:
    return {"name": "defect-gate", "file": "policies/defect-classifier.yml",
            "digest": "sha256:" + "c" * 64, "passed": passed, "criteria": [
                {"criterion": "metric accuracy", "required": ">= 0.9 on test",
                 "found": "0.875 on test, 8 examples", "passed": passed,
                 "code": None if passed else "MP716",
                 "message": None if passed else "accuracy 0.875 is below 0.9"}]}


def test_the_latest_decision_its_policy_and_later_productions_head_the_page(statement):
    p = statement["predicate"]
    p["review"] = {"status": "accepted", "decisions": [
        {"verdict": "rejected", "by": "Ana", "note": "accuracy below the gate",
         "decided_at": "2026-12-01T01:00:00", "bundle": EARLIER, "policy": _policy(False)},
        {"verdict": "accepted", "by": "Dana", "note": "re-evaluated on the held-out split",
         "decided_at": "2026-12-01T02:00:00", "bundle": DIGEST, "policy": _policy(True)}]}
    p["productions"] = [{"run": "r-0123456789", "status": "succeeded",
                         "started_at": "2026-12-01T01:30:00"}]
    page = render_html(statement, DIGEST)
    who = dict(_read(page).rows)
    assert who["review status"] == "accepted"
    assert who["decision"] == ("accepted by Dana at 2026-12-01T02:00:00 UTC on this bundle; "
                               "policy defect-gate passed: “re-evaluated on the held-out "
                               "split” 1 earlier decision(s): see Review decisions")
    assert who["reproduced by"] == ("run r-0123456789 (succeeded, started 2026-12-01T01:30:00):"
                                    " the same model and evaluation bytes")
    text = " ".join("".join(_read(page).parts).split())
    assert ("verdict rejected by Ana at 2026-12-01T01:00:00 UTC bundle read " + EARLIER
            + " note accuracy below the gate policy defect-gate "
              "policies/defect-classifier.yml") in text
    assert ("metric accuracy >= 0.9 on test 0.875 on test, 8 examples NOT met MP716 accuracy "
            "0.875 is below 0.9") in text
    assert page.index('id="who"') < page.index('id="findings"') < page.index('id="decisions"')
    p["previous_bundle"] = DIGEST   # the decision sealed in: it read this bundle's predecessor
    who = dict(_read(render_html(statement, "sha256:" + "e" * 64)).rows)
    assert who["decision"].startswith("accepted by Dana at 2026-12-01T02:00:00 UTC on bundle "
                                      "sha256:bbbbbbbbbbbb (this bundle's predecessor); policy")


def test_a_bundle_without_review_decisions_says_so(statement):
    p = statement["predicate"]
    p.pop("review", None)
    p.pop("productions", None)
    who = dict(_read(render_html(statement, DIGEST)).rows)
    assert who["review status"] == "not recorded"
    assert who["decision"] == ("none: this bundle was sealed before review decisions were "
                               "recorded")
    assert "reproduced by" not in who
    p["review"] = {"status": "unreviewed", "decisions": []}
    who = dict(_read(render_html(statement, DIGEST)).rows)
    assert who["review status"] == "unreviewed"
    assert who["decision"] == "no decision recorded (mlpipe review)"


def test_findings_show_severity_code_message_and_fix(statement):
    p = statement["predicate"]
    p["checks"] = {**p["checks"], "warnings": []}  # only the findings below (no compile-time MP416)
    p["findings"] = [
        {"code": "MP702", "name": "evaluation-on-training-data", "severity": "error",
         "step": "score", "message": "evaluation ran on population 'train'",
         "hint": "evaluate on a split the model never trained on"},
        {"code": "MP660", "name": "content-unknown", "severity": "warning", "step": None,
         "message": "only a reference was recorded", "hint": "sync the run"}]
    page = render_html(statement, DIGEST)
    section = page[page.index('<section id="findings"'):page.index('<section id="evaluation"')]
    text = " ".join("".join(_read(section).parts).split())
    assert text.startswith("Findings (1 error, 1 warning) Severity Finding From What is wrong "
                           "Fix error MP702 evaluation-on-training-data step score evidence "
                           "evaluation ran on population 'train' evaluate on a split the model "
                           "never trained on warning MP660 content-unknown evidence only a "
                           "reference was recorded sync the run")


def test_no_value_is_shown_as_json_text(statement):
    p = copy.deepcopy(statement)["predicate"]
    # the fixture's compile-time MP416 hint quotes layout='{split}/...', which is no JSON value
    p["checks"] = {**p["checks"], "warnings": []}
    p["steps"][0]["params"] = {"layers": [64, 32], "optim": {"lr": 0.001, "betas": [0.9, 0.99]},
                               "schedule": [{"epoch": 1, "lr": 0.1}, {"epoch": 5, "lr": 0.01}]}
    page = render_html({**statement, "predicate": p}, DIGEST)
    text = "".join(_read(page).parts)
    assert not re.search(r"[{}\[\]]", text), re.findall(r".{30}[{}\[\]].{30}", text)
    assert ("<table class=\"inner\"><thead><tr><th>epoch</th><th>lr</th></tr></thead>"
            in page)


@pytest.mark.parametrize("value, html", [
    (None, '<span class="muted">-</span>'),
    (True, "yes"),
    ([1, "a"], "1, a"),
    ({}, '<span class="muted">none</span>'),
    ({"b": 1, "a": "x<y"}, '<table class="kv inner"><tbody><tr><th>a</th><td>x&lt;y</td></tr>'
                           '<tr><th>b</th><td>1</td></tr></tbody></table>'),
    ("sha256:" + "0" * 64, "<code>sha256:" + "0" * 64 + "</code>"),
])
def test_values_render_as_html(value, html):
    assert value_html(value) == html


def test_facts_the_page_has_no_section_for_are_still_shown_as_tables(statement):
    p = statement["predicate"]
    p["steps"][0]["hidden_inputs"] = [{"path": "/etc/labels.csv", "ranks": [0], "size": 12,
                                       "blake3": "blake3:" + "d" * 64}]
    p["steps"][0]["interpreter"] = {"note": "ran on mlpipe's own interpreter", "isolated": False}
    p["lineage"] = {"parent": "c-0123456789"}
    page = render_html(statement, DIGEST)
    text = " ".join("".join(_read(page).parts).split())
    assert ("hidden inputs path ranks size blake3 /etc/labels.csv 0 12 blake3:" + "d" * 64
            in text)
    assert "interpreter isolated no note ran on mlpipe's own interpreter" in text
    assert "Also recorded lineage parent c-0123456789" in text


def test_what_is_unknown_is_flagged_not_dropped(statement):
    """An Azure ML candidate's shapes: a reference snapshot, a model whose files are unknown,
    a remote artifact, a step without a step record, reuse with no executed run behind it,
    a failed coordination, check warnings and a dirty tree."""
    p = statement["predicate"]
    statement["subject"] = []
    p["code"] = {"commit": "1a2b3c4d5e6f", "dirty": True}
    p["snapshots"][0].update(file_count=None, size=None, mutable=True,
                             reference="azureml:raw:3")
    p["steps"][0].update(step_record=False)
    p["steps"][1].update(status="reused", reused_from={
        "step_run": "s-000000000001", "run": None, "step": None, "executed_step_run": None,
        "executed_run": None, "chain": ["s-000000000001"]})
    p["coordination"] = [{"step": "fit", "ok": False, "world_size": 2, "recorded_ranks": [0],
                          "covered": 4, "population": 8, "writers": [0], "findings": [
                              {"severity": "error", "code": "MP521",
                               "message": "rank 1 left no record"}]}]
    p["checks"]["warnings"] = [{"severity": "warning", "code": "MP605", "name": "x-y",
                                "message": "a warning"}]
    page = render_html(statement, DIGEST)
    who = dict(_read(page).rows)
    assert who["model"].endswith("(its files are unknown: no digest of them was recorded) "
                                 "trained by step fit")
    text = " ".join("".join(_read(page).parts).split())
    for shown in ("code 1a2b3c4d5e6f DIRTY working tree",
                  "azureml:raw:3 blake3:",
                  "a reference: content not recorded, and it can move",
                  "step record none: what its runtime would have observed is unknown, not absent",
                  "1 of 2 steps was reused with no executed run in this store.",
                  "Reused from step run s-000000000001, with no executed run of it in this store",
                  "Coordination of fit result FAILED world size 2 ranks recorded 0 examples "
                  "covered 4 of 8 writers 0 error MP521 rank 1 left no record",
                  "0 error(s) (a run with check errors never starts) Severity Code Name Message "
                  "warning MP605 x-y a warning"):
        assert shown in text, shown


@pytest.mark.parametrize("code, shown", [
    (None, "code revision not recorded"),
    ({"commit": "1a2b3c", "dirty": False},
     "code 1a2b3c tracked files unchanged; the files the pipeline loaded were not recorded"),
    ({"commit": "1a2b3c", "dirty": False, "clean": True,
      "files": [{"path": "review.py", "state": "committed"}]},
     "code 1a2b3c clean: the file the pipeline loaded is committed loaded files "
     "File the pipeline loaded State review.py committed"),
    ({"commit": "1a2b3c", "dirty": True, "clean": False,
      "files": [{"path": "review.py", "state": "committed"},
                {"path": "helpers.py", "state": "untracked"},
                {"path": "../lib/x.py", "state": "outside"}]},
     "code 1a2b3c NOT clean: 2 of 3 loaded files not committed, DIRTY working tree loaded "
     "files File the pipeline loaded State ../lib/x.py outside helpers.py untracked review.py "
     "committed"),
])
def test_the_code_is_called_clean_only_when_every_loaded_file_is_committed(statement, code,
                                                                           shown):
    statement["predicate"]["code"] = code
    page = render_html(statement, DIGEST)
    section = page[page.index('<section id="provenance"'):page.index('<section id="pipeline"')]
    text = " ".join("".join(_read(section).parts).split())
    assert shown in text, text[:400]
    assert ("clean" in shown) == (">clean</span>" in section or "NOT clean" in section)
