"""The HTML bundle, rendered by a real headless Chromium (Debian's ``chromium`` package)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from bundle_project import BundleProject

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

# Appended to a copy of the page (the page itself has no script): it measures what the browser
# laid out and writes it into the DOM that --dump-dom prints.
PROBE = """<script>
const box = e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
const dag = document.getElementById("dag");
document.body.setAttribute("data-probe", JSON.stringify({
  dag: box(dag),
  nodes: [...dag.querySelectorAll("g.node")].map(g => [g.dataset.node, box(g)]),
  edges: dag.querySelectorAll("path.edge").length,
  steps: [...document.querySelectorAll("div.step")].map(d => d.id),
  text: document.body.innerText}));
</script></body>"""


def _chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_the_html_bundle_renders_with_the_dag_visible_and_every_step_described(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    page = tmp_path / "bundle.html"
    done = proj.evidence(cand, "--format", "html", "-o", str(page))
    assert done.returncode == 0, done.stderr
    source = page.read_text()
    assert "<script" not in source and not re.search(r"(src|href)=\"https?:", source)
    probe_page = tmp_path / "probe.html"
    probe_page.write_text(source.replace("</body>", PROBE))
    dom = _chromium(tmp_path, "--dump-dom", probe_page.as_uri())
    assert dom.returncode == 0, dom.stderr
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, dom.stdout[:2000]
    import html
    probe = json.loads(html.unescape(found.group(1)))
    x, _y, width, height = probe["dag"]
    assert width > 300 and height > 40
    assert sorted(n for n, _ in probe["nodes"]) == ["fit", "input:data", "score"]
    for _, (nx, _ny, nw, nh) in probe["nodes"]:
        assert nw > 50 and nh > 20 and x <= nx and nx + nw <= x + width + 1
    assert probe["edges"] == 3  # data -> fit, data -> score, fit -> score
    assert probe["steps"] == ["step-fit", "step-score"]
    for fact in ("fit@1.0.0", "score@1.0.0", "accuracy", "test, 8 examples", "review-env",
                 "No findings.", "code digest", "cache key"):
        assert fact in probe["text"], fact
    shot = tmp_path / "bundle.png"
    taken = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900",
                      page.as_uri())
    assert taken.returncode == 0 and shot.stat().st_size > 5000
