"""The bundle as one self-contained HTML page: the pipeline DAG drawn as inline SVG, then each
step's facts. No script, no stylesheet or font from the network.

Renders a bundle's JSON only (layout included); reads no store and no file.
"""
from __future__ import annotations

import html
import json
from typing import Any

from mlpipe.evidence.render import sections

_W, _H, _GAP_X, _GAP_Y, _PAD, _TOP = 190, 46, 70, 22, 16, 48
_COLORS = {"executed": "#d8f0d8", "reused": "#fdf0c8", "input": "#e4ecf7",
           "failed": "#f6d0d0", "skipped": "#eeeeee"}


def _node(endpoint: str) -> str:
    return endpoint if endpoint.startswith("input:") else endpoint.split(".", 1)[0]


def layout(graph: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Column and row of each node: inputs in column 0, each step one right of its sources."""
    nodes = [f"input:{n}" for n in graph["inputs"]] + list(graph["steps"])
    preds: dict[str, set[str]] = {n: set() for n in nodes}
    for e in graph["edges"]:
        src, dst = _node(e["from"]), _node(e["to"])
        if src in preds and dst in preds and src != dst:
            preds[dst].add(src)
    column: dict[str, int] = {}

    def col(n: str, seen: frozenset = frozenset()) -> int:
        if n not in column:
            column[n] = 0 if n in seen or not preds[n] else 1 + max(
                col(p, seen | {n}) for p in preds[n])
        return column[n]

    rows: dict[int, int] = {}
    place = {}
    for n in nodes:
        c = col(n)
        place[n] = (c, rows.get(c, 0))
        rows[c] = rows.get(c, 0) + 1
    return place


def svg(p: dict[str, Any]) -> str:
    """The DAG of a bundle predicate as an ``<svg>`` element (inputs left, steps by depth)."""
    graph = p["graph"]
    status = {st["step"]: st["status"] for st in p["steps"]}
    place = layout(graph)
    if not place:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'
    width = _PAD * 2 + (max(c for c, _ in place.values()) + 1) * (_W + _GAP_X) - _GAP_X
    height = _TOP + _PAD + (max(r for _, r in place.values()) + 1) * (_H + _GAP_Y) - _GAP_Y

    def box(n: str) -> tuple[int, int]:
        c, r = place[n]
        return _PAD + c * (_W + _GAP_X), _TOP + r * (_H + _GAP_Y)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="dag" role="img" '
             f'aria-label="pipeline DAG" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/>'
             '</marker></defs>']
    drawn = set()
    for e in graph["edges"]:
        src, dst = _node(e["from"]), _node(e["to"])
        if src not in place or dst not in place or (src, dst) in drawn:
            continue
        drawn.add((src, dst))
        (x1, y1), (x2, y2) = box(src), box(dst)
        x1, y1, y2 = x1 + _W, y1 + _H // 2, y2 + _H // 2
        # an edge that skips a column arcs above the boxes in between instead of crossing them
        lift = 0 if place[dst][0] - place[src][0] <= 1 else 64
        label = html.escape(f"{e['from']} -> {e['to']}")
        parts.append(f'<path class="edge" d="M{x1},{y1} C{x1 + 60},{y1 - lift} {x2 - 60},'
                     f'{y2 - lift} {x2},{y2}" fill="none" stroke="#555" stroke-width="1.5" '
                     f'marker-end="url(#arrow)"><title>{label}</title></path>')
    for n, _ in place.items():
        x, y = box(n)
        is_input = n.startswith("input:")
        state = "input" if is_input else status.get(n, "executed")
        title = n[len("input:"):] if is_input else n
        sub = "data snapshot" if is_input else state
        fill = _COLORS.get(state, "#ffffff")
        href = f"#input-{title}" if is_input else f"#step-{title}"
        parts.append(
            f'<a href="{html.escape(href)}"><g class="node" data-node="{html.escape(n)}">'
            f'<rect x="{x}" y="{y}" width="{_W}" height="{_H}" rx="6" fill="{fill}" '
            f'stroke="#333"/><text x="{x + 10}" y="{y + 19}" font-weight="bold">'
            f'{html.escape(title[:26])}</text><text x="{x + 10}" y="{y + 36}" fill="#444">'
            f'{html.escape(sub)}</text></g></a>')
    parts.append("</svg>")
    return "".join(parts)


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}
code{font-size:90%;word-break:break-all}h2{border-bottom:1px solid #ccc;margin-top:1.6em}
.finding{padding:.4em .6em;margin:.3em 0;border-left:4px solid #c33;background:#fbeaea}
.finding.warning{border-color:#d90;background:#fdf6e3}.finding.info{border-color:#39c;background:#eaf4fb}
.reused{background:#fdf0c8;padding:.2em .4em}table{border-collapse:collapse}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
.step{border:1px solid #ccc;border-radius:6px;padding:.6em 1em;margin:.8em 0}"""


def _row(k: str, v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(text)}</code></td></tr>"


def _step(st: dict[str, Any]) -> str:
    comp = st["component"]
    rows = [_row("component", f"{comp['name']}@{comp['version']}"),
            _row("status", st["status"]), _row("step run", st["step_run"]),
            _row("spec digest", comp["spec_digest"]), _row("code digest", comp["code_digest"]),
            _row("environment", st["environment"]), _row("compute", st["compute"]),
            _row("topology", st["topology"]), _row("parameters", st["params"]),
            _row("cache key", st["cache_key"] or "-")]
    rows += [_row(f"input {x['port']}", x["digest"]) for x in st["inputs"]]
    rows += [_row(f"output {x['port']}", x["digest"]) for x in st["outputs"]]
    rows += [_row(f"metric {x['name']}", {k: x[k] for k in ("value", "scope", "rank",
                                                            "population", "reduced_over")})
             for x in st["metrics"]]
    reuse = ""
    if st["reused_from"]:
        r = st["reused_from"]
        reuse = (f'<p class="reused">Reused from run {html.escape(str(r["executed_run"]))}, '
                 f'step run {html.escape(str(r["executed_step_run"] or r["step_run"]))} - not '
                 f're-executed for this candidate.</p>')
    return (f'<div class="step" id="step-{html.escape(st["step"])}"><h3>'
            f'{html.escape(st["step"])}</h3>{reuse}<table>{"".join(rows)}</table></div>')


def render_html(statement: dict[str, Any], digest: str) -> str:
    """One self-contained HTML page: findings, the DAG (SVG), the summary, each step's facts.

    Example:
        >>> page = render_html(statement, digest)
        >>> "<svg" in page and "http" not in page.split("<body>")[1].split("evidence-bundle")[0]
        True
    """
    p = statement["predicate"]
    c = p["candidate"]
    findings = "".join(
        f'<div class="finding {html.escape(f["severity"])}"><b>{html.escape(f["code"])} '
        f'{html.escape(f["name"])}</b>: {html.escape(f["message"])}</div>'
        for f in p["findings"]) or "<p>No findings.</p>"
    summary = []
    for title, body in sections(statement, digest):
        if title in ("Findings", "Steps"):
            continue
        items = "".join(f"<li><code>{html.escape(b.strip())}</code></li>" for b in body)
        summary.append(f"<h2>{html.escape(title)}</h2><ul>{items}</ul>")
    inputs = "".join(f'<tr id="input-{html.escape(s["input"])}"><th>{html.escape(s["input"])}'
                     f'</th><td><code>{html.escape(s["reference"])}</code></td><td><code>'
                     f'{html.escape(s["digest"])}</code></td></tr>' for s in p["snapshots"])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="bundle-digest" content="{html.escape(digest)}">'
            f'<title>Evidence for {html.escape(c["id"])}</title><style>{_STYLE}</style></head>'
            f'<body><h1>Evidence for candidate <code>{html.escape(c["id"])}</code></h1>'
            f'<p>Bundle <code id="bundle-digest">{html.escape(digest)}</code></p>'
            f'<h2>Findings</h2><div id="findings">{findings}</div>'
            f'<h2>Pipeline</h2>{svg(p)}'
            f'{"".join(summary)}<h2>Data snapshots</h2><table>{inputs}</table>'
            f'<h2>Steps</h2>{"".join(_step(st) for st in p["steps"])}</body></html>\n')
