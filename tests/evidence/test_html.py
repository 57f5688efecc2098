"""The HTML review page, rendered by a real headless Chromium (Debian's ``chromium`` package):
what the reviewer reads in what order, the pipeline drawing's geometry, a screenshot at 1280 px
and a PDF printed the way "Save as PDF" does. Everything the browser writes goes to tmp_path."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess

import pytest

from bundle_project import GATED, BundleProject

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    (shutil.which("chromium") or shutil.which("chromium-browser")) is None,
    reason="chromium is not installed (.ci/run installs it)")]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DOT = shutil.which("dot")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--hide-scrollbars"]

# Appended to a copy of the page (the page itself has no script): it measures what the browser
# laid out and writes it into the DOM that --dump-dom prints.
PROBE = """<script>
const box = e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
const text = e => e ? e.innerText.trim() : null;
const rows = sel => [...document.querySelectorAll(sel + " tbody tr")].map(
  tr => [...tr.children].map(c => c.innerText.trim()));
const dag = document.getElementById("dag");
const edges = [...dag.querySelectorAll("g.edge")].map(g => {
  const path = g.querySelector("path"), n = path.getTotalLength(), m = path.getScreenCTM();
  const pts = [];
  for (let i = 0; i <= 80; i++) {
    const p = path.getPointAtLength(n * i / 80);
    const q = new DOMPoint(p.x, p.y).matrixTransform(m);
    pts.push([q.x, q.y]);
  }
  return {label: [...g.querySelectorAll("text")].map(t => t.textContent).join(" "),
          length: n, points: pts};
});
document.body.setAttribute("data-probe", JSON.stringify({
  order: [...document.body.children].filter(e => e.id).map(e => e.id),
  who: rows("#who"),
  findings: text(document.getElementById("findings")),
  evaluation: rows("#evaluation table.evaluation"),
  findingRows: rows("#findings table.findings"),
  decisions: text(document.getElementById("decisions")) &&
    [...document.querySelectorAll("div.decision")].map(text),
  reuse: text(document.getElementById("reuse-summary")),
  provenance: text(document.getElementById("provenance")),
  note: text(document.getElementById("dag-note")),
  dag: box(dag), dagClass: dag.getAttribute("class"),
  nodes: [...dag.querySelectorAll("g.node")].map(g => [g.id, box(g)]),
  edges: edges,
  steps: [...document.querySelectorAll("div.step")].map(d => d.id),
  stepTables: document.querySelectorAll("div.step table").length,
  text: document.body.innerText}));
</script></body>"""


def _chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def _probe(tmp_path, page) -> dict:
    probe_page = tmp_path / f"probe-{page.name}"
    probe_page.write_text(page.read_text().replace("</body>", PROBE))
    dom = _chromium(tmp_path, "--dump-dom", probe_page.as_uri())
    assert dom.returncode == 0, dom.stderr
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, dom.stdout[:2000]
    return json.loads(html.unescape(found.group(1)))


def _self_contained(source: str) -> None:
    assert "<script" not in source and "<link" not in source and "@import" not in source
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", source)
    assert not re.search(r"url\(\s*['\"]?\s*(https?:|//)", source)


def _no_edge_behind_a_box(probe: dict) -> None:
    """No point of an edge, away from its two ends, lies inside any box."""
    boxes = [b for _, b in probe["nodes"]]
    for edge in probe["edges"]:
        assert edge["length"] > 10, edge
        pts = edge["points"][2:-2]   # the ends touch their own boxes' borders
        for x, y in pts:
            for bx, by, bw, bh in boxes:
                inside = bx + 2 < x < bx + bw - 2 and by + 2 < y < by + bh - 2
                assert not inside, (edge["label"], (x, y), (bx, by, bw, bh))


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """A candidate whose steps executed and a re-run that reused its training (a re-run that
    reuses every step reproduces the same candidate), each as an HTML page drawn by dot (where
    installed) and by the layered fallback (PATH without dot)."""
    tmp = tmp_path_factory.mktemp("html")
    proj = BundleProject(tmp / "proj")
    first, again = proj.submit(), proj.submit("review", "--param", "split=validation")
    out = {"tmp": tmp, "candidate": first, "reused candidate": again,
           "bundle": proj.bundle(first)}
    for name, cand in (("first", first), ("again", again)):
        page = tmp / f"{name}.html"
        done = proj.evidence(cand, "--format", "html", "-o", str(page))
        assert done.returncode == 0, done.stderr
        out[name] = page
    # the evaluation on the training split: an error finding, and fit reused from `first`
    done = proj.cli("submit", "review.py:review", "--input", "data=data.txt", "--param",
                    "split=train")
    assert done.returncode == 1 and GATED.search(done.stderr), done.stderr  # submit's gate
    flagged = re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1)
    out["flagged"] = tmp / "flagged.html"
    done = proj.evidence(flagged, "--format", "html", "-o", str(out["flagged"]))
    assert done.returncode == 1 and "(MP702)" in done.stderr   # the page is written all the same
    empty = tmp / "no-dot-here"
    empty.mkdir()
    path = os.environ["PATH"]
    try:
        os.environ["PATH"] = str(empty)   # the CLI runs as sys.executable: no PATH needed
        page = tmp / "fallback.html"
        done = proj.evidence(again, "--format", "html", "-o", str(page))
    finally:
        os.environ["PATH"] = path
    assert done.returncode == 0, done.stderr
    out["fallback"] = page
    # the first candidate reproduced by a fully reused re-run, then accepted under a policy
    assert proj.submit() == first
    (tmp / "proj" / "gate.yml").write_text(
        "name: review-gate\nmetrics:\n  - name: accuracy\n    population: test\n"
        "    at_least: 0.5\nfindings_absent: [error]\nverify: true\n")
    assert proj.evidence(first, "--rebuild").returncode == 0
    done = proj.cli("review", first, "--accept", "--by", "dana", "--note", "meets Q-7",
                    "--policy", "gate.yml")
    assert done.returncode == 0, done.stderr
    out["reviewed"] = tmp / "reviewed.html"
    done = proj.evidence(first, "--format", "html", "-o", str(out["reviewed"]))
    assert done.returncode == 0, done.stderr
    return out


def test_the_page_reads_top_down_who_findings_evaluation_reuse_provenance_details(pages):
    source = pages["first"].read_text()
    _self_contained(source)
    probe = _probe(pages["tmp"], pages["first"])
    assert probe["order"] == ["who", "findings", "evaluation", "reuse", "provenance",
                              "pipeline", "details", "tiers"]
    who = dict(probe["who"])
    assert who["candidate"].startswith(pages["candidate"] + " created ")
    assert who["pipeline"].startswith("review sha256:")
    assert re.match(r"blake3:[0-9a-f]{64} \(2 files named in the subject\) trained by step fit$",
                    who["model"])
    assert re.match(r"r-[0-9a-f]{10} succeeded on local, started ", who["run"])
    if "review" in pages["bundle"]["predicate"]:
        assert who["review status"] == "unreviewed"
        assert who["decision"] == "no decision recorded (mlpipe review)"
    else:  # until review decisions are recorded in bundles
        assert who["review status"] == "not recorded"
    assert who["bundle"].startswith("sha256:")
    assert who["qualification bar"] == ("none committed before the run (a policy given later "
                                        "judges it)")
    # the review pipeline's score reads fit's data: MP416 at compile time, a finding like any
    assert probe["findings"].startswith("Findings (1 warning)")
    assert "No findings" not in probe["findings"]
    [[severity, finding, source, _message, _fix]] = probe["findingRows"]
    assert (severity, source) == ("warning", "compile-time")
    assert finding.split("\n")[0] == "MP416 evaluation-reads-training-artifact"
    assert probe["evaluation"] == [
        ["accuracy", "0.875", "global", "test, 8 examples", "logged by step score"],
        ["accuracy", "0.875", "global", "examples 8, split test",
         f"report {probe['evaluation'][1][4].split()[1]}"]]
    run = who["run"].split()[0]
    assert probe["reuse"] == f"none of 2 steps was reused: all ran for run {run}."
    assert "code\trevision not recorded" in probe["provenance"]
    assert "environment review-env\t1 sha256:" in probe["provenance"]
    assert probe["steps"] == ["step-fit", "step-score"]
    assert probe["stepTables"] >= 2 * 3   # facts, ports, metrics: tables, not JSON text
    assert '{"' not in probe["text"] and "{'" not in probe["text"]
    for fact in ("fit@1.0.0", "score@1.0.0", "review-env", "code digest", "cache key",
                 "train, 8 examples", "uri_folder"):
        assert fact in probe["text"], fact


def test_a_reused_run_says_how_many_steps_and_from_which_run(pages):
    first = _probe(pages["tmp"], pages["first"])
    again = _probe(pages["tmp"], pages["again"])
    origin = dict(first["who"])["run"].split()[0]
    assert again["reuse"] == f"1 of 2 steps was reused from run {origin}."
    assert f"Reused from run {origin}, step run s-" in again["text"]


@pytest.mark.parametrize("which", ["again", "fallback"])
def test_the_drawing_is_layered_labels_ports_and_routes_no_edge_behind_a_box(pages, which):
    source = pages[which].read_text()
    _self_contained(source)
    probe = _probe(pages["tmp"], pages[which])
    if which == "fallback":
        assert probe["dagClass"] == "dag layered"
        assert probe["note"].startswith("Graphviz dot is not installed here (Debian package "
                                        "graphviz), so mlpipe drew this with its own layered "
                                        "layout")
    else:
        assert probe["dagClass"] == ("dag dot" if DOT else "dag layered")
        assert (probe["note"] is None) == bool(DOT)
    x, _y, width, height = probe["dag"]
    assert width > 300 and height > 40
    nodes = dict(probe["nodes"])
    assert sorted(nodes) == ["dag-input-data", "dag-step-fit", "dag-step-score"]
    for nx, _ny, nw, nh in nodes.values():
        assert nw > 50 and nh > 20 and x <= nx and nx + nw <= x + width + 1
    # layered left to right: the input, then fit, then score (which reads fit's model)
    assert nodes["dag-input-data"][0] < nodes["dag-step-fit"][0] < nodes["dag-step-score"][0]
    assert sorted(e["label"] for e in probe["edges"]) == ["data", "data", "model"]
    _no_edge_behind_a_box(probe)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_a_screenshot_at_1280_px_and_a_printed_pdf_have_content(pages):
    from PIL import Image

    tmp = pages["tmp"]
    shot = tmp / "page.png"
    taken = _chromium(tmp, f"--screenshot={shot}", "--window-size=1280,1000",
                      pages["again"].as_uri())
    assert taken.returncode == 0, taken.stderr
    assert _png_size(shot.read_bytes()) == (1280, 1000)
    with Image.open(shot) as img:
        rgb = img.convert("RGB")
        colors = rgb.getcolors(maxcolors=1 << 20) or []
        inked = sum(n for n, c in colors if sum(c) < 3 * 235)
        assert len(colors) > 50                       # text, badges, borders: not one fill
        assert inked > 0.01 * 1280 * 1000, inked      # non-white pixels: something is drawn
        # the header box is in the first screen, its border dark
        top = rgb.crop((0, 0, 1280, 200)).getcolors(maxcolors=1 << 20) or []
        assert sum(n for n, c in top if sum(c) < 3 * 100) > 500
    pdf = tmp / "page.pdf"
    printed = _chromium(tmp, f"--print-to-pdf={pdf}", "--no-pdf-header-footer",
                        pages["again"].as_uri())
    assert printed.returncode == 0, printed.stderr
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-") and len(data) > 20_000
    pages_count = len(re.findall(rb"/Type\s*/Page\b(?!s)", data))
    assert pages_count >= 2, pages_count   # the whole record, not a clipped first screen
    assert b"/Font" in data                   # text, printed as text


def test_a_finding_is_shown_with_its_severity_message_and_fix_before_the_evaluation(pages):
    probe = _probe(pages["tmp"], pages["flagged"])
    assert probe["order"][:3] == ["who", "findings", "evaluation"]
    assert probe["findings"].startswith("Findings (1 error, 1 warning)")
    [[severity, finding, source, message, fix], compiled] = probe["findingRows"]
    assert severity == "error" and source == "evidence"
    assert compiled[:3] == ["warning", "MP416 evaluation-reads-training-artifact\nstep score",
                            "compile-time"]
    assert finding.split("\n")[0] == "MP702 evaluation-overlaps-training"
    assert "ran on population 'train', which overlaps 'train'" in message
    assert fix and fix != "-"
    assert re.fullmatch(r"1 of 2 steps was reused from run r-[0-9a-f]{10}\.", probe["reuse"])
    assert probe["evaluation"][0][:4] == ["accuracy", "0.875", "global", "train, 8 examples"]


def test_a_recorded_decision_and_a_reproduction_head_the_page(pages):
    probe = _probe(pages["tmp"], pages["reviewed"])
    assert probe["order"] == ["who", "findings", "evaluation", "reuse", "provenance",
                              "pipeline", "details", "tiers"]
    who = dict(probe["who"])
    assert who["review status"] == "accepted"
    assert re.fullmatch(r"accepted by dana at \S+ UTC on bundle sha256:[0-9a-f]{12} \(this "
                        r"bundle's predecessor\); policy review-gate passed · a policy given "
                        r"after the run \(none was committed before it\): “meets Q-7”",
                        who["decision"]), who["decision"]
    assert re.fullmatch(r"run r-[0-9a-f]{10} \(succeeded, started \S+, pipeline review "
                        r"sha256:[0-9a-f]{64}\): the same model and evaluation bytes; its own "
                        r"findings: 1", who["reproduced by"]), who["reproduced by"]
    [decision] = probe["decisions"]
    assert "verdict\taccepted\nby\tdana" in decision
    assert re.search(r"metric accuracy\t.*test.*\tmet", decision), decision
