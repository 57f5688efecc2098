"""The pipeline drawing of an evidence bundle as an inline SVG element: laid out by Graphviz
``dot`` where it is installed, else by a layered layout of mlpipe's own, with a note saying so.

Draws a bundle's ``graph`` only: reads no store. Both layouts put each step one layer right of
its sources, route every edge around the boxes (never behind one) and label it with its ports.
Why ``dot`` run directly rather than through the ``graphviz`` Python package: that package
only writes DOT text and runs this same executable; mlpipe writes the DOT itself, so the
package would add a dependency and nothing else.
"""
from __future__ import annotations

import html
import itertools
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

COLORS = {"executed": "#d8f0d8", "reused": "#fdf0c8", "input": "#e4ecf7",
          "failed": "#f6d0d0", "skipped": "#eeeeee", "running": "#e8e0f4"}
_FONT = "Helvetica,Arial,sans-serif"
_DOT_TIMEOUT = 20.0
#: Above this many boxes plus layer crossings of edges (the virtual nodes dot routes edges
#: through), dot's time grows past seconds into minutes: a drawing that size is laid out here.
DOT_MAX_SIZE = 2500


@dataclass(frozen=True)
class Edge:
    """One recorded data flow: ``src`` node's ``src_port`` into ``dst`` node's ``dst_port``."""
    src: str
    src_port: str
    dst: str
    dst_port: str

    @property
    def label(self) -> str:
        """The port names it carries: ``model``, or ``model → weights`` when they differ."""
        if self.src_port and self.dst_port and self.src_port != self.dst_port:
            return f"{self.src_port} → {self.dst_port}"
        return self.src_port or self.dst_port

    @property
    def title(self) -> str:
        src = self.src if not self.src_port else f"{self.src}.{self.src_port}"
        return f"{src} -> {self.dst}.{self.dst_port}"


@dataclass(frozen=True)
class Node:
    id: str          # "input:data" or the step name
    title: str
    sub: str
    state: str       # a step's status, or "input"

    @property
    def anchor(self) -> str:
        """The link to the node's facts on the page (percent-encoded: dot writes it as is)."""
        kind = "input" if self.state == "input" else "step"
        return f"#{kind}-{quote(self.title, safe='')}"

    @property
    def dom_id(self) -> str:
        return f"dag-{'input' if self.state == 'input' else 'step'}-{_slug(self.title)}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


@dataclass
class Drawing:
    """The drawing's nodes and edges, read from a bundle predicate."""
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)


def read(p: dict[str, Any]) -> Drawing:
    """Nodes (inputs, then steps) and edges (one per recorded flow, duplicates dropped) of a
    bundle predicate's ``graph``; a source the store did not record becomes an input node."""
    graph = p["graph"]
    status = {st["step"]: st["status"] for st in p["steps"]}
    components = {st["step"]: f"{st['component']['name']}@{st['component']['version']}"
                  for st in p["steps"]}
    d = Drawing()
    for name in graph["inputs"]:
        d.nodes[f"input:{name}"] = Node(f"input:{name}", name, "data snapshot", "input")
    for name in graph["steps"]:
        d.nodes[name] = Node(name, name, f"{components.get(name, '?')} · "
                                         f"{status.get(name, 'executed')}",
                             status.get(name, "executed"))
    seen = set()
    for e in graph["edges"]:
        src, src_port = _endpoint(e["from"])
        dst, dst_port = _endpoint(e["to"])
        if src not in d.nodes and src.startswith("input:"):
            d.nodes[src] = Node(src, src[len("input:"):], "not recorded", "input")
        if (src not in d.nodes or dst not in d.nodes or src == dst
                or (e["from"], e["to"]) in seen):
            continue
        seen.add((e["from"], e["to"]))
        d.edges.append(Edge(src, src_port, dst, dst_port))
    return d


def _endpoint(text: str) -> tuple[str, str]:
    if text.startswith("input:"):
        return text, ""
    node, _, port = text.partition(".")
    return node, port


def svg(p: dict[str, Any], *, dot: str | None = "auto") -> tuple[str, str | None]:
    """The drawing of a bundle predicate: ``(svg element, note)``. ``note`` is None when
    Graphviz ``dot`` laid it out, else one sentence saying which layout was used and why.

    Args:
        p: the bundle's predicate.
        dot: the ``dot`` executable; "auto" looks it up on PATH, None skips it.

    Example:
        >>> element, note = svg(statement["predicate"])
        >>> element.startswith("<svg")
        True
    """
    drawing = read(p)
    if not drawing.nodes:
        return ('<svg xmlns="http://www.w3.org/2000/svg" id="dag" width="10" height="10">'
                '</svg>', None)
    exe = shutil.which("dot") if dot == "auto" else dot
    size = _size(drawing)
    if exe is None:
        reason = "Graphviz dot is not installed here (Debian package graphviz)"
    elif size > DOT_MAX_SIZE:
        reason = (f"This drawing is too large for Graphviz dot to lay out in reasonable time "
                  f"({size} boxes and layer crossings of edges; at most {DOT_MAX_SIZE})")
    else:
        try:
            return run_dot(exe, to_dot(drawing)), None
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            reason = f"Graphviz dot failed ({_one_line(exc)})"
    return layered_svg(drawing), (f"{reason}, so mlpipe drew this with its own layered layout: "
                                  f"the same nodes, edges and port names, drawn more plainly.")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(d: Drawing) -> str:
    """The drawing as Graphviz DOT: left to right, boxes coloured by status, labelled edges."""
    # nslimit bounds dot's network-simplex passes: the same drawing for small pipelines, and
    # seconds instead of minutes where many edges span many layers
    out = ["digraph pipeline {", "  rankdir=LR; nodesep=0.35; ranksep=0.7; bgcolor=transparent;",
           "  nslimit=4; nslimit1=4;",
           f'  node [shape=box, style="rounded,filled", fontname={_q(_FONT)}, fontsize=11, '
           f'color="#333333", margin="0.15,0.06"];',
           f'  edge [fontname={_q(_FONT)}, fontsize=10, color="#555555", fontcolor="#222222", '
           f'arrowsize=0.7];']
    for key, n in d.nodes.items():
        shape = ', style="rounded,filled,dashed"' if n.state == "input" else ""
        label = (f'<<b>{html.escape(n.title)}</b><br/><font point-size="10" color="#444444">'
                 f'{html.escape(n.sub)}</font>>')
        out.append(f"  {_q(key)} [id={_q(n.dom_id)}, label={label}, "
                   f"fillcolor={_q(COLORS.get(n.state, '#ffffff'))}, URL={_q(n.anchor)}, "
                   f"tooltip={_q(n.title)}{shape}];")
    for i, e in enumerate(d.edges):
        out.append(f"  {_q(e.src)} -> {_q(e.dst)} [id={_q(f'dag-edge-{i}')}, "
                   f"label={_q(e.label)}, tooltip={_q(e.title)}];")
    out.append("}")
    return "\n".join(out) + "\n"


_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def run_dot(exe: str, source: str) -> str:
    """``dot -Tsvg`` of ``source`` as an element to inline: no XML prolog, DOCTYPE or comments,
    ``id="dag"`` on the root, scaled to the page's width.

    Raises:
        ValueError: dot printed no SVG.
        OSError, subprocess.SubprocessError: dot could not run, failed or timed out.
    """
    done = subprocess.run([exe, "-Tsvg"], input=source, capture_output=True, text=True,
                          timeout=_DOT_TIMEOUT, check=False)
    if done.returncode != 0:
        raise subprocess.SubprocessError(done.stderr.strip() or f"exit {done.returncode}")
    # dot writes every "-" as "&#45;"; outside comments (dropped) the two are the same
    body = _COMMENT.sub("", _PROLOG.sub("", done.stdout, count=1)).replace("&#45;", "-").strip()
    if not body.startswith("<svg"):
        raise ValueError("dot printed no <svg> element")
    return body.replace("<svg ", '<svg id="dag" class="dag dot" role="img" '
                                 'aria-label="pipeline drawing" ', 1)


# -- mlpipe's own layered layout (where dot is absent) -------------------------------------------

_W, _H, _PAD, _ROW_GAP, _SLOT, _PORT_STEP = 210, 46, 16, 16, 14, 18
_CHAR = 6.6  # average advance of an 11px sans-serif character


@dataclass
class Layout:
    """Where everything goes: each item's layer and box (``x, y, w, h``); an edge's polyline."""
    layer: dict[str, int]
    boxes: dict[str, tuple[float, float, float, float]]
    routes: list[list[tuple[float, float]]]
    labels: list[tuple[float, float]]
    width: float
    height: float


def _layers(d: Drawing) -> dict[str, int]:
    """Longest-path layering; an edge that closes a cycle is ignored for layering."""
    preds: dict[str, set[str]] = {n: set() for n in d.nodes}
    for e in d.edges:
        if e.src != e.dst:
            preds[e.dst].add(e.src)
    layer: dict[str, int] = {}
    state: dict[str, int] = {}

    def visit(n: str) -> int:
        if n in layer:
            return layer[n]
        state[n] = 1
        below = [visit(p) for p in sorted(preds[n]) if state.get(p) != 1]
        state[n] = 2
        layer[n] = 1 + max(below) if below else 0
        return layer[n]

    for n in d.nodes:
        visit(n)
    return layer


def _size(d: Drawing) -> int:
    """Boxes plus the layers edges cross: what a layered layout has to place."""
    layer = _layers(d)
    return len(d.nodes) + sum(max(0, abs(layer[e.dst] - layer[e.src]) - 1) for e in d.edges)


def layout(d: Drawing) -> Layout:
    """A layered layout whose edges never cross a box: an edge spanning several layers gets a
    slot of its own in each layer between (so it passes between boxes, never behind one), rows
    are ordered by the barycentre of their neighbours to cut crossings, and an edge's port
    label sits in the gap just before the box it enters."""
    layer = _layers(d)
    n_layers = max(layer.values()) + 1
    rows: list[list[str]] = [[] for _ in range(n_layers)]
    for n in d.nodes:
        rows[layer[n]].append(n)
    # each edge as a chain of items, one per layer from its lower to its higher end
    chains: list[list[str]] = []
    for i, e in enumerate(d.edges):
        lo, hi = (e.src, e.dst) if layer[e.src] < layer[e.dst] else (e.dst, e.src)
        chain = [lo]
        for k in range(layer[lo] + 1, layer[hi]):
            slot = f"\0{i}.{k}"
            rows[k].append(slot)
            chain.append(slot)
        chains.append(chain + [hi])
    links_up: dict[str, list[str]] = {}
    links_down: dict[str, list[str]] = {}
    for chain in chains:
        for a, b in itertools.pairwise(chain):
            if a != b:
                links_down.setdefault(a, []).append(b)
                links_up.setdefault(b, []).append(a)
    pos = {n: j for r in rows for j, n in enumerate(r)}
    sweeps = 8 if len(pos) < 5000 else 2   # each sweep orders every item once
    for sweep in range(sweeps):
        order = range(1, n_layers) if sweep % 2 == 0 else range(n_layers - 2, -1, -1)
        links = links_up if sweep % 2 == 0 else links_down
        for k in order:
            rows[k].sort(key=lambda n: (sum(pos[m] for m in links[n]) / len(links[n])
                                        if links.get(n) else pos[n]))
            pos.update((n, j) for j, n in enumerate(rows[k]))
    # sizes: a box grows with the edges entering or leaving it, so each gets its own height
    fan_in = dict.fromkeys(d.nodes, 0)
    fan_out = dict.fromkeys(d.nodes, 0)
    for chain in chains:
        fan_out[chain[0]] += 1
        fan_in[chain[-1]] += 1
    label_w = [0.0] * n_layers
    for e, chain in zip(d.edges, chains):
        label_w[layer[chain[-1]]] = max(label_w[layer[chain[-1]]], len(e.label) * _CHAR)
    xs, x = [], float(_PAD)
    for k in range(n_layers):
        if k:
            x += max(60.0, label_w[k] + 48)
        xs.append(x)
        x += _W
    boxes: dict[str, tuple[float, float, float, float]] = {}
    height = 0.0
    for k, r in enumerate(rows):
        y = float(_PAD)
        for n in r:
            if n.startswith("\0"):
                boxes[n] = (xs[k], y, _W, _SLOT)
                y += _SLOT + _ROW_GAP // 2
            else:
                h = max(_H, 14 + _PORT_STEP * max(fan_in[n], fan_out[n]))
                boxes[n] = (xs[k], y, _W, h)
                y += h + _ROW_GAP
        height = max(height, y)
    routes, labels = _routes(d, chains, boxes)
    return Layout(layer, boxes, routes, labels, x + _PAD, height + _PAD)


def _routes(d: Drawing, chains: list[list[str]],
            boxes: dict[str, tuple[float, float, float, float]]
            ) -> tuple[list[list[tuple[float, float]]], list[tuple[float, float]]]:
    def centre(n: str) -> float:
        return boxes[n][1] + boxes[n][3] / 2

    # ports: a box's exits (right side) and entries (left side) spread evenly, in the order of
    # the rows they come from or go to
    exits: dict[str, list[int]] = {}
    entries: dict[str, list[int]] = {}
    for i, chain in enumerate(chains):
        exits.setdefault(chain[0], []).append(i)
        entries.setdefault(chain[-1], []).append(i)

    def spread(table: dict[str, list[int]], toward: int) -> dict[int, float]:
        at = {}
        for n, ids in table.items():
            ids.sort(key=lambda i: (centre(chains[i][toward]), i))
            _, y, _, h = boxes[n]
            for j, i in enumerate(ids):
                at[i] = y + h * (j + 1) / (len(ids) + 1)
        return at

    y_exit, y_entry = spread(exits, 1), spread(entries, -2)
    routes, labels = [], []
    for i, (e, chain) in enumerate(zip(d.edges, chains)):
        first, last = chain[0], chain[-1]
        fx, _, fw, _ = boxes[first]
        pts = [(fx + fw, y_exit[i])]
        for slot in chain[1:-1]:
            sx, _, sw, _ = boxes[slot]
            pts += [(sx, centre(slot)), (sx + sw, centre(slot))]
        lx = boxes[last][0]
        room = len(e.label) * _CHAR + 14
        pts += [(lx - room, y_entry[i]), (lx, y_entry[i])]
        reverse = chain[0] != e.src
        routes.append(pts[::-1] if reverse else pts)
        labels.append((lx - 5, y_entry[i] - 4))
    return routes, labels


def layered_svg(d: Drawing) -> str:
    """The drawing laid out by :func:`layout`, as an ``<svg>`` element."""
    lay = layout(d)
    w, h = round(lay.width), round(lay.height)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="dag" class="dag layered" role="img" '
             f'aria-label="pipeline drawing" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
             f'font-family="{_FONT}" font-size="11">',
             '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
             'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" '
             'fill="#555"/></marker></defs>']
    for i, (e, pts, (lx, ly)) in enumerate(zip(d.edges, lay.routes, lay.labels)):
        path = " ".join(f"{'M' if j == 0 else 'L'}{x:.1f},{y:.1f}" for j, (x, y) in enumerate(pts))
        parts.append(
            f'<g id="dag-edge-{i}" class="edge"><title>{html.escape(e.title)}</title>'
            f'<path d="{path}" fill="none" stroke="#555" stroke-width="1.4" '
            f'marker-end="url(#dag-arrow)"/><text x="{lx:.1f}" y="{ly:.1f}" '
            f'text-anchor="end" fill="#222" font-size="10" stroke="#fff" stroke-width="3" '
            f'paint-order="stroke">{html.escape(e.label)}</text></g>')
    for key, n in d.nodes.items():
        x, y, bw, bh = lay.boxes[key]
        dash = ' stroke-dasharray="4 3"' if n.state == "input" else ""
        parts.append(
            f'<a href="{html.escape(n.anchor)}"><g id="{html.escape(n.dom_id)}" class="node">'
            f'<title>{html.escape(n.title)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw}" height="{bh}" rx="6" '
            f'fill="{COLORS.get(n.state, "#ffffff")}" stroke="#333"{dash}/>'
            f'<text x="{x + 10:.1f}" y="{y + bh / 2 - 3:.1f}" font-weight="bold">'
            f'{html.escape(_fit(n.title, bw))}</text><text x="{x + 10:.1f}" '
            f'y="{y + bh / 2 + 12:.1f}" fill="#444">{html.escape(_fit(n.sub, bw))}</text>'
            f'</g></a>')
    parts.append("</svg>")
    return "".join(parts)


def _fit(text: str, width: float) -> str:
    most = int((width - 20) / _CHAR)
    return text if len(text) <= most else text[:most - 1] + "…"
