"""The bundle's pipeline drawing: Graphviz dot where installed, mlpipe's layered layout where
not; edges carry port names and never pass behind a box."""
from __future__ import annotations

import itertools
import re
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlpipe.evidence.reports.dag import Drawing, Edge, Node, layout, read, svg
from mlpipe.evidence.reports.render import reuse_summary

DOT = shutil.which("dot")


def _predicate(steps: dict[str, str], edges: list[tuple[str, str]], inputs=("data",)) -> dict:
    return {"graph": {"steps": list(steps), "inputs": list(inputs),
                      "edges": [{"from": a, "to": b, "digest": "blake3:" + "0" * 64}
                                for a, b in edges]},
            "steps": [{"step": s, "status": status, "component": {"name": s, "version": "1"}}
                      for s, status in steps.items()]}


REVIEW = _predicate({"fit": "executed", "score": "reused"},
                    [("input:data", "fit.data"), ("input:data", "score.data"),
                     ("fit.model", "score.weights")])


def test_edges_carry_their_port_names():
    assert Edge("fit", "model", "score", "model").label == "model"
    assert Edge("fit", "model", "score", "weights").label == "model → weights"
    assert Edge("input:data", "", "fit", "data").label == "data"
    assert Edge("fit", "model", "score", "weights").title == "fit.model -> score.weights"


def test_a_source_the_store_did_not_record_is_drawn_as_such():
    d = read(_predicate({"fit": "executed"}, [("input:(unrecorded)", "fit.data")], ()))
    assert d.nodes["input:(unrecorded)"].sub == "not recorded"
    assert [e.title for e in d.edges] == ["input:(unrecorded) -> fit.data"]


def _crosses(a, b, box, margin=0.5) -> bool:
    """Whether segment a-b enters the interior of box (x, y, w, h) shrunk by margin
    (Liang-Barsky clipping)."""
    x, y, w, h = box
    lo_x, hi_x, lo_y, hi_y = x + margin, x + w - margin, y + margin, y + h - margin
    (x1, y1), (x2, y2) = a, b
    dx, dy = x2 - x1, y2 - y1
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x1 - lo_x), (dx, hi_x - x1), (-dy, y1 - lo_y), (dy, hi_y - y1)):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return t1 - t0 > 1e-9


@st.composite
def drawings(draw) -> Drawing:
    n = draw(st.integers(1, 9))
    d = Drawing()
    names = [f"s{i}" for i in range(n)]
    for name in names:
        d.nodes[name] = Node(name, name, "c@1 · executed", "executed")
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                          max_size=20, unique=True))
    for i, j in pairs:
        # i > j: a cycle, which equal bytes produced by two steps can record
        if i != j and (i < j or draw(st.booleans())):
            port = draw(st.sampled_from(["model", "data", "a_rather_long_port_name", "x"]))
            d.edges.append(Edge(names[i], port, names[j], draw(st.sampled_from([port, "in"]))))
    return d


@settings(max_examples=150, deadline=None)
@given(drawings())
def test_the_layered_layout_never_draws_an_edge_behind_a_box(d):
    lay = layout(d)
    boxes = {k: b for k, b in lay.boxes.items() if k in d.nodes}
    for e, route in zip(d.edges, lay.routes):
        sx, sy, sw, sh = boxes[e.src]
        dx, dy, dw, dh = boxes[e.dst]
        forward = lay.layer[e.dst] > lay.layer[e.src]
        assert route[0][0] == (sx + sw if forward else sx) and sy < route[0][1] < sy + sh
        assert route[-1][0] == (dx if forward else dx + dw) and dy < route[-1][1] < dy + dh
        for a, b in itertools.pairwise(route):
            for key, box in boxes.items():
                assert not _crosses(a, b, box), (e.title, key, a, b)
    keys = list(boxes)
    for i, a in enumerate(keys):      # no two boxes overlap
        for b in keys[i + 1:]:
            (ax, ay, aw, ah), (bx, by, bw, bh) = boxes[a], boxes[b]
            assert ax + aw <= bx or bx + bw <= ax or ay + ah <= by or by + bh <= ay
    for e in d.edges:                 # each step one layer right of its sources
        assert lay.layer[e.dst] != lay.layer[e.src]
    acyclic = all(int(e.src[1:]) < int(e.dst[1:]) for e in d.edges)
    assert not acyclic or all(lay.layer[e.dst] > lay.layer[e.src] for e in d.edges)


def test_without_dot_the_layered_drawing_says_so_and_keeps_every_port_name():
    element, note = svg(REVIEW, dot=None)
    assert note == ("Graphviz dot is not installed here (Debian package graphviz), so mlpipe "
                    "drew this with its own layered layout: the same nodes, edges and port "
                    "names, drawn more plainly.")
    assert element.startswith('<svg xmlns="http://www.w3.org/2000/svg" id="dag"')
    for text in (">data</text>", ">model → weights</text>", 'id="dag-step-fit"',
                 'id="dag-step-score"', 'id="dag-input-data"', 'href="#step-score"'):
        assert text in element


def test_a_dot_that_fails_falls_back_with_the_reason(tmp_path):
    broken = tmp_path / "dot"
    broken.write_text("#!/bin/sh\necho 'Error: syntax error in line 1' >&2\nexit 1\n")
    broken.chmod(0o755)
    element, note = svg(REVIEW, dot=str(broken))
    assert note.startswith("Graphviz dot failed (Error: syntax error in line 1), so mlpipe drew "
                           "this with its own layered layout")
    assert 'class="dag layered"' in element


@pytest.mark.skipif(DOT is None, reason="Graphviz dot is not installed (.ci/run installs it)")
def test_dot_draws_an_inline_svg_with_ids_links_and_port_labels():
    element, note = svg(REVIEW)
    assert note is None
    assert element.startswith('<svg id="dag" class="dag dot"')
    assert "<?xml" not in element and "<!DOCTYPE" not in element and "<!--" not in element
    for text in ('id="dag-step-fit"', 'id="dag-step-score"', 'id="dag-input-data"',
                 ">model → weights</text>", ">data</text>", "#step-fit"):
        assert text in element, text


@pytest.mark.parametrize("steps, expected", [
    ([None, None], "none of 2 steps was reused: all ran for run r-now"),
    ([None], "none of 1 step was reused: it ran for run r-now"),
    (["r-a", None], "1 of 2 steps was reused from run r-a"),
    (["r-a", "r-a", "r-a", None], "3 of 4 steps were reused from run r-a"),
    (["r-a", "r-b", "r-a", None], "3 of 4 steps were reused: 2 from run r-a, 1 from run r-b"),
    ([None, "missing", "r-b"], "2 of 3 steps were reused: 1 with no executed run in this store, "
                               "1 from run r-b"),
])
def test_the_reuse_summary_names_the_runs_steps_were_reused_from(steps, expected):
    p = {"run": {"id": "r-now"}, "steps": [
        {"step": f"s{i}", "reused_from": None if r is None else
         {"executed_run": None if r == "missing" else r}} for i, r in enumerate(steps)]}
    assert reuse_summary(p) == expected


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


def _bezier_points(d: str) -> list[tuple[float, float]]:
    """Points along dot's edge path ``M x,y C x1,y1 x2,y2 x3,y3 ...``."""
    nums = _numbers(d)
    pts = list(zip(nums[0::2], nums[1::2]))
    out = [pts[0]]
    for i in range(1, len(pts) - 2, 3):
        p0, p1, p2, p3 = pts[i - 1], pts[i], pts[i + 1], pts[i + 2]
        for k in range(1, 21):
            t = k / 20
            out.append(tuple(
                (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t * t * c + t ** 3 * e
                for a, b, c, e in zip(p0, p1, p2, p3)))
    return out


@pytest.mark.slow   # a dot process per example
@pytest.mark.skipif(DOT is None, reason="Graphviz dot is not installed (.ci/run installs it)")
@settings(max_examples=25, deadline=None)
@given(drawings())
def test_dot_routes_no_edge_behind_a_box(d):
    from xml.etree import ElementTree

    from mlpipe.evidence.reports.dag import run_dot, to_dot

    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ElementTree.fromstring(run_dot(DOT, to_dot(d)))
    boxes = {}
    for g in root.iterfind(".//s:g[@class='node']", ns):
        xs_ys = _numbers(g.find(".//s:path", ns).get("d"))
        xs, ys = xs_ys[0::2], xs_ys[1::2]
        boxes[g.get("id")] = (min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys))
    assert len(boxes) == len(d.nodes)
    edges = root.findall(".//s:g[@class='edge']", ns)
    assert len(edges) == len(d.edges)
    for g in edges:
        e = d.edges[int(g.get("id").rsplit("-", 1)[1])]
        assert "".join(g.find(".//s:text", ns).itertext()) == e.label
        pts = _bezier_points(g.find(".//s:path", ns).get("d"))
        for a, b in itertools.pairwise(pts[1:-1]):   # the ends touch their own boxes
            for box in boxes.values():
                assert not _crosses(a, b, box, margin=1.0), (e.title, box)


@pytest.mark.skipif(DOT is None, reason="Graphviz dot is not installed (.ci/run installs it)")
def test_dot_draws_names_with_markup_and_quotes_as_text():
    name = 'eval<&"x>'
    element, note = svg(_predicate({name: "executed"}, [("input:data", f"{name}.data")]))
    assert note is None
    assert ">eval&lt;&amp;&quot;x&gt;</text>" in element
    assert 'id="dag-step-eval___x_"' in element
    assert 'xlink:href="#step-eval%3C%26%22x%3E"' in element


def _fan(n: int, every: int) -> dict:
    """A chain of n steps, and one input read by every ``every``-th step (edges that span many
    layers: what makes layered layouts slow)."""
    edges = [("input:data", "s0.data")] + [(f"s{i}.out", f"s{i + 1}.inp") for i in range(n - 1)]
    edges += [("input:data", f"s{i}.data") for i in range(every, n, every)]
    return _predicate({f"s{i}": "executed" for i in range(n)}, edges)


def test_a_drawing_too_large_for_dot_is_laid_out_here_in_bounded_time():
    import time

    start = time.perf_counter()
    element, note = svg(_fan(80, 1), dot=DOT or "/nonexistent/dot")
    assert note.startswith("This drawing is too large for Graphviz dot to lay out in reasonable "
                           "time (3241 boxes and layer crossings of edges; at most 2500), so "
                           "mlpipe drew this with its own layered layout")
    assert element.count('class="node"') == 81 and element.count('class="edge"') == 80 + 79
    element, note = svg(_fan(1000, 10), dot=DOT or "/nonexistent/dot")
    assert note.startswith("This drawing is too large") and element.count('class="edge"') == 1 + 999 + 99
    assert time.perf_counter() - start < 20
