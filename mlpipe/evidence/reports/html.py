"""The bundle as one self-contained HTML page a reviewer reads top down: who and what (candidate,
pipeline, model, run, status, decision), findings, the evaluation table, reuse, provenance,
then the pipeline drawing and each step's facts as tables. Prints to an archivable PDF.

Renders a bundle's JSON only (the drawing through ``dag``); reads no store. No script, and no
stylesheet, font or image from anywhere: everything is in the one file.
"""
from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

from mlpipe.evidence.records.findings import every_finding, where_from
from mlpipe.evidence.reports import tiers
from mlpipe.evidence.reports.dag import COLORS, svg
from mlpipe.evidence.reports.render import (
    bar_text,
    decision_text,
    metric_value,
    own_name,
    population_text,
    production_line,
    reuse_origins,
    reuse_summary,
    topology_text,
)

_STYLE = """
:root{--line:#d4d4d4;--muted:#555}
body{font-family:Helvetica,Arial,sans-serif;margin:2em auto;max-width:1180px;padding:0 1.5em;
 color:#1d1d1d;line-height:1.4}
h1{font-size:1.5em;margin:.2em 0 .4em}h2{font-size:1.15em;border-bottom:2px solid #333;
 margin:1.8em 0 .6em;padding-bottom:.15em}h3{font-size:1.02em;margin:.2em 0 .5em}
code,.digest{font-family:Menlo,Consolas,monospace;font-size:.85em;word-break:break-all}
table{border-collapse:collapse;margin:.3em 0 .8em;width:100%}
th,td{border:1px solid var(--line);padding:.25em .55em;text-align:left;vertical-align:top}
thead th{background:#f1f1f1}table.kv>tbody>tr>th{width:13em;background:#fafafa;
 font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.inner{margin:0}table.inner th,table.inner td{border-color:#e6e6e6;font-size:.95em}
.who{border:2px solid #333;border-radius:8px;padding:.8em 1.2em;margin-bottom:1em}
.who table.kv{margin:0}.badge{display:inline-block;padding:.05em .5em;border-radius:4px;
 font-weight:700;font-size:.85em;border:1px solid #999}
.sev-error,.st-failed,.dec-rejected{background:#f6d0d0;border-color:#b22}
.sev-warning,.st-reused,.dec-none,.dec-unreviewed{background:#fdf0c8;border-color:#c90}
.sev-info{background:#e4ecf7;border-color:#48c}.st-executed,.st-succeeded,.dec-accepted{
 background:#d8f0d8;border-color:#393}.flag{color:#a11;font-weight:700}
.ok{color:#285;font-weight:700}.muted{color:var(--muted)}.note{border-left:4px solid #c90;
 background:#fdf6e3;padding:.4em .7em}
.reuse{font-size:1.05em;font-weight:600}
.step{border:1px solid #bbb;border-radius:6px;padding:.6em 1em;margin:.9em 0}
.drawing{overflow-x:auto}#dag{max-width:100%;height:auto}
.legend span{display:inline-block;margin-right:1em}.legend i{display:inline-block;width:.9em;
 height:.9em;border:1px solid #333;border-radius:2px;vertical-align:-.1em;margin-right:.3em}
@media print{
 @page{size:A4;margin:14mm 12mm}
 body{margin:0;max-width:none;padding:0;font-size:10pt}
 a{color:inherit;text-decoration:none}
 h2{break-after:avoid;page-break-after:avoid}
 tr,.finding,.who,.drawing{break-inside:avoid;page-break-inside:avoid}
 .step{break-inside:auto}.step h3{break-after:avoid}
 .drawing{overflow:visible}
 *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _is_digest(text: str) -> bool:
    return ":" in text and len(text) > 40 and " " not in text


def value_html(v: Any) -> str:
    """Any JSON value as HTML, never as JSON text: a mapping as a nested table, a list as its
    items, a digest in code type, null as a dash."""
    if v is None:
        return '<span class="muted">-</span>'
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        if not v:
            return '<span class="muted">none</span>'
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{value_html(v[k])}</td></tr>"
                       for k in sorted(v))
        return f'<table class="kv inner"><tbody>{rows}</tbody></table>'
    if isinstance(v, (list, tuple)):
        if not v:
            return '<span class="muted">none</span>'
        if all(not isinstance(x, (dict, list)) for x in v):
            return ", ".join(value_html(x) for x in v)
        if all(isinstance(x, dict) for x in v):
            keys = list(dict.fromkeys(k for x in v for k in x))
            return _table(keys, [[value_html(x.get(k)) for k in keys] for x in v], "inner")
        return "".join(f"<div>{value_html(x)}</div>" for x in v)
    if isinstance(v, float):
        return _e(metric_value(v))
    text = str(v)
    return f"<code>{_e(text)}</code>" if _is_digest(text) else _e(text)


def _kv(rows: list[tuple[str, str]], cls: str = "kv") -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="{cls}"><tbody>{body}</tbody></table>'


def _table(header: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" if not c.startswith("<td") else c
                                    for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls}">{_e(text)}</span>'


def _review(p: dict[str, Any]) -> dict[str, Any] | None:
    """The bundle's review (status and decisions), or None for a bundle sealed before review
    decisions were recorded."""
    review = p.get("review")
    return review if isinstance(review, dict) else None


def _decision_text(d: dict[str, Any], digest: str, previous: str | None) -> str:
    verdict = str(d["verdict"])
    if d["bundle"] == digest:
        read = "this bundle"
    elif d["bundle"] == previous:  # sealing the decision made this bundle, its successor
        read = f"bundle <code>{_e(d['bundle'][:19])}</code> (this bundle's predecessor)"
    else:
        read = f"bundle <code>{_e(d['bundle'][:19])}</code>"
    pol = d.get("policy")
    policy = ""
    if pol:
        unmet = [c["code"] or c["criterion"] for c in pol["criteria"] if not c["passed"]]
        policy = (f"; policy <b>{_e(pol['name'])}</b> "
                  + ("<span class='ok'>passed</span>" if pol["passed"] else
                     f"<span class='flag'>NOT met ({_e(', '.join(unmet))})</span>"))
        said = decision_text(pol)
        if said:
            policy += (f" <span class='flag' id='deviation'>{_e(said)}</span>"
                       if pol.get("deviation") else f" <span class='muted'>· {_e(said)}</span>")
    return (f"{_badge(verdict, 'dec-' + verdict)} by <b>{_e(d['by'])}</b> at "
            f"{_e(d['decided_at'][:19])} UTC on {read}{policy}"
            + (f": “{_e(d['note'])}”" if d.get("note") else ""))


def _who(statement: dict[str, Any], digest: str) -> str:
    p = statement["predicate"]
    c, run, pipe = p["candidate"], p["run"], p["pipeline"]
    review = _review(p)
    if review is None:
        status, status_cls = "not recorded", "dec-none"
        decision = ('<span class="muted">none: this bundle was sealed before review decisions '
                    'were recorded</span>')
    else:
        status, status_cls = review["status"], "dec-" + review["status"]
        decision = ("".join(f"<div>{_decision_text(d, digest, p['previous_bundle'])}</div>"
                            for d in review["decisions"][-1:])
                    or '<span class="muted">no decision recorded (mlpipe review)</span>')
        if len(review["decisions"]) > 1:
            decision += (f'<div class="muted">{len(review["decisions"]) - 1} earlier '
                         f'decision(s): see <a href="#decisions">Review decisions</a></div>')
    files = statement["subject"]
    model = (f"<code>{_e(c['model'])}</code> <span class='muted'>({len(files)} file"
             f"{'' if len(files) == 1 else 's'} named in the subject)</span>" if files else
             f"<code>{_e(c['model'])}</code> <span class='flag'>(its files are unknown: no "
             f"digest of them was recorded)</span>")
    trained = (p.get("training") or {}).get("step")
    model += f" <span class='muted'>trained by step {_e(trained)}</span>" if trained else ""
    rows = [("candidate", f"<code>{_e(c['id'])}</code>"
             + (f" <b>{_e(c['name'])}</b>" if own_name(p) else "")
             + f" <span class='muted'>created {_e(c['created_at'][:19])}</span>"),
            ("pipeline", f"<b>{_e(pipe['name'])}</b> <code>{_e(pipe['digest'])}</code>"),
            ("model", model),
            ("evaluation", f"<code>{_e(c['evaluation'])}</code>" if c["evaluation"] else
             "<span class='flag'>none</span>"),
            ("run", f"<code>{_e(run['id'])}</code> {_badge(run['status'], 'st-' + run['status'])}"
                    f" on {_e(run['target'])}, started {_e(run['started_at'][:19])}"
                    + (f" by {_e(run['user'])}@{_e(run['host'])}" if run.get("user") else "")),
            ("qualification bar", f"<span id='bar'>{_e(bar_text(p))}</span>"),
            ("review status", _badge(status, status_cls)),
            ("decision", decision),
            *[("reproduced by", _e(production_line(x).removeprefix("reproduced by ")))
              for x in p.get("productions") or []],
            ("bundle", f"<code id='bundle-digest'>{_e(digest)}</code> "
                       f"<span class='muted'>sealed {_e(p['sealed_at'])} UTC</span>")]
    title = f"Candidate <code>{_e(c['id'])}</code>" + (f" · {_e(c['name'])}" if own_name(p)
                                                       else "")
    return (f'<header class="who" id="who"><h1>{title}</h1>'
            f'<p class="muted">Evidence for review. Orchestration produced this candidate; '
            f'accepting it is a separate, recorded decision.</p>{_kv(rows)}</header>')


def _findings(p: dict[str, Any]) -> str:
    """The verdict: every finding the bundle carries (``every_finding``: compile-time,
    run-time and evidence, of every production), each with where it came from; green only
    when there is none at all."""
    found = every_finding(p)
    if not found:
        return ('<section id="findings"><h2>Findings</h2><p class="ok">No findings: no '
                'compile-time, run-time or evidence finding (evaluation, metric scope, reuse, '
                'provenance) needs attention.</p></section>')
    counts: dict[str, int] = {}
    for f in found:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    summary = ", ".join(f"{counts[sev]} {sev}" for sev in ("error", "warning", "info")
                        if sev in counts)
    rows = [[_badge(f["severity"], "sev-" + f["severity"]),
             f"<code>{_e(f['code'])}</code> {_e(f['name'])}"
             + (f"<br><span class='muted'>step {_e(f['step'])}</span>" if f.get("step") else ""),
             _e(where_from(f, p["run"]["id"])), _e(f["message"]), _e(f.get("hint") or "-")]
            for f in found]
    return (f'<section id="findings"><h2>Findings ({_e(summary)})</h2>'
            f'{_table(["Severity", "Finding", "From", "What is wrong", "Fix"], rows, "findings")}'
            f'</section>')


def _scope(x: dict[str, Any]) -> str:
    scope = x["scope"] if x.get("rank") is None else f"{x['scope']}, rank {x['rank']}"
    if x.get("reduced_over"):
        scope += f", reduced over {x['reduced_over']} ranks"
    return scope


def _evaluation(p: dict[str, Any]) -> str:
    ev = p["evaluation"]
    rows = [[_e(x["name"]), f'<td class="num">{_e(metric_value(x["value"]))}</td>', _e(_scope(x)),
             _e(x.get("population") or "not recorded"), f"logged by step {_e(ev['step'])}"]
            for x in ev["metrics"]]
    rep = ev["report"]
    if rep:
        rows += [[_e(x["name"]), f'<td class="num">{_e(metric_value(x["value"]))}</td>',
                  _e(x["scope"]), _e(population_text(x.get("population") or rep["population"])),
                  f"report <code>{_e(rep['digest'][:19])}</code>"] for x in rep["metrics"]]
    head = []
    if ev["step"]:
        head.append(f"Evaluated by step <b>{_e(ev['step'])}</b>"
                    + ("" if ev["reads_model"] else
                       " <span class='flag'>which did NOT read this model</span>") + ".")
    if rep and not rep["readable"]:
        head.append(f"<span class='flag'>The report <code>{_e(rep['digest'])}</code> is not "
                    f"readable.</span>")
    body = (_table(["Metric", "Value", "Scope", "Population", "Source"], rows, "evaluation")
            if rows else "<p class='flag'>No evaluation metric was recorded.</p>")
    return (f'<section id="evaluation"><h2>Evaluation</h2><p>{" ".join(head)}</p>{body}'
            f'</section>')


def _reuse(p: dict[str, Any]) -> str:
    origins = reuse_origins(p)
    lines = [f'<p class="reuse" id="reuse-summary">{_e(reuse_summary(p))}.</p>']
    if origins:
        rows = [[f"<code>{_e(run)}</code>" if run else
                 "<span class='flag'>no executed run in this store</span>",
                 ", ".join(f'<a href="#step-{_e(quote(s, safe=""))}">{_e(s)}</a>'
                           for s in steps)]
                for run, steps in origins.items()]
        lines.append(_table(["Executed in run", "Reused steps"], rows))
        lines.append("<p class='muted'>Reused steps were not re-executed for this candidate. "
                     "Reuse is an execution fact, not evidence of quality.</p>")
    return f'<section id="reuse"><h2>Reuse</h2>{"".join(lines)}</section>'


def _code_rows(code: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The code revision: "clean" only when every file the pipeline loaded was committed and no
    tracked file changed (``code.clean``); each loaded file with its git state."""
    if code is None:
        return [("code", "<span class='flag'>revision not recorded</span>")]
    head = f"<code>{_e(code.get('commit') or '(not in git)')}</code> "
    files = code.get("files")
    if not isinstance(files, list):   # runs that did not record which files were loaded
        head += ("<span class='flag'>DIRTY working tree</span>" if code.get("dirty") else
                 "<span class='muted'>tracked files unchanged; the files the pipeline loaded "
                 "were not recorded</span>")
        rows = [("code", head)]
    else:
        loose = [f for f in files if f.get("state") != "committed"]
        if code.get("clean"):
            head += ("<span class='ok'>clean</span>: "
                     + ("the file the pipeline loaded is" if len(files) == 1 else
                        f"the {len(files)} files the pipeline loaded are") + " committed")
        else:
            why = ([f"{len(loose)} of {len(files)} loaded files not committed"] if loose
                   else []) + (["DIRTY working tree"] if code.get("dirty") else [])
            head += f"<span class='flag'>NOT clean: {_e(', '.join(why) or 'not committed')}</span>"
        table = _table(["File the pipeline loaded", "State"], [
            [f"<code>{_e(f.get('path'))}</code>",
             _e(f.get("state")) if f.get("state") == "committed" else
             f"<span class='flag'>{_e(f.get('state'))}</span>"]
            for f in sorted(files, key=lambda f: (f.get("state") == "committed",
                                                  str(f.get("path"))))], "inner")
        rows = [("code", head), ("loaded files", table)]
    rows += [(f"code {k}", value_html(v)) for k, v in sorted(code.items())
             if k not in ("commit", "dirty", "files", "clean")]
    return rows


def _provenance(p: dict[str, Any]) -> str:
    rows = _code_rows(p["code"])
    if "ci" in p:
        from mlpipe.evidence.storage.ci import describe

        rows.append(("ci", _e(describe(p["ci"]))))
    envs = sorted({(st["environment"]["name"], st["environment"]["version"] or "",
                    st["environment"]["digest"], st["environment"]["mutable"])
                   for st in p["steps"] if st["environment"]})
    for name, version, dig, mutable in envs:
        rows.append((f"environment {name}", f"{_e(version or '(no version)')} <code>{_e(dig)}"
                                            f"</code>" + (" <span class='flag'>mutable</span>"
                                                          if mutable else "")))
    if p["run"]["params"]:
        rows.append(("parameters", value_html(p["run"]["params"])))
    snaps = []
    for s in p["snapshots"]:
        if s["file_count"] is None:
            what = ("<span class='flag'>a reference: content not recorded"
                    + (", and it can move" if s["mutable"] else "") + "</span>")
        else:
            what = (f"{s['file_count']} file{'' if s['file_count'] == 1 else 's'}, "
                    f"{s['size']} bytes" + (", mutable reference: snapshotted by content"
                                            if s["mutable"] else ""))
        snaps.append([f'<span id="input-{_e(s["input"])}">{_e(s["input"])}</span>',
                      f"<code>{_e(s['reference'])}</code>", f"<code>{_e(s['digest'])}</code>",
                      what])
    data = (_table(["Input", "Reference", "Digest", "Content"], snaps, "snapshots") if snaps
            else "<p class='muted'>No data inputs.</p>")
    return (f'<section id="provenance"><h2>Provenance</h2>{_kv(rows)}<h3>Data snapshots</h3>'
            f'{data}</section>')


def _drawing(p: dict[str, Any]) -> str:
    element, note = svg(p)
    legend = "".join(f'<span><i style="background:{COLORS[k]}"></i>{k}</span>'
                     for k in ("input", "executed", "reused", "failed"))
    note_html = f'<p class="note" id="dag-note">{_e(note)}</p>' if note else ""
    return (f'<section id="pipeline"><h2>Pipeline</h2>{note_html}<div class="drawing">'
            f'{element}</div><p class="legend muted">{legend} · edges are labelled with the '
            f'ports they connect</p></section>')


def _ports(p: dict[str, Any], st: dict[str, Any]) -> str:
    arts = {a["digest"]: a for a in p["artifacts"]}
    rows = []
    for direction, ports in (("in", st["inputs"]), ("out", st["outputs"])):
        for x in ports:
            a = arts.get(x["digest"], {})
            size = "-" if a.get("size") is None else f"{a['size']} bytes"
            rows.append([direction, _e(x["port"]), f"<code>{_e(x['digest'])}</code>",
                         _e(a.get("kind", "-")), size])
    return _table(["", "Port", "Digest", "Kind", "Size"], rows) if rows else ""


_STEP_SHOWN = {"step", "step_run", "status", "reused_from", "component", "environment",
               "compute", "topology", "params", "cache_key", "inputs", "outputs", "metrics",
               "message", "step_record"}
#: Predicate fields the sections above show; any other is listed under "Also recorded".
_SHOWN = {"generator", "candidate", "findings", "run", "pipeline", "code", "ci", "snapshots",
          "steps", "artifacts", "graph", "training", "evaluation", "checks", "coordination",
          "previous_bundle", "sealed_at", "review", "productions"}


def _step(p: dict[str, Any], st: dict[str, Any]) -> str:
    comp = st["component"]
    rows = [("component", f"{_e(comp['name'])}@{_e(comp['version'])}"),
            ("status", _badge(st["status"], "st-" + st["status"])),
            ("step run", f"<code>{_e(st['step_run'])}</code>"),
            ("code digest", f"<code>{_e(comp['code_digest'])}</code>"),
            ("spec digest", f"<code>{_e(comp['spec_digest'])}</code>"),
            ("environment", "-" if not st["environment"] else
             f"{_e(st['environment']['name'])}:{_e(st['environment']['version'] or '-')} "
             f"<code>{_e(st['environment']['digest'])}</code>"),
            ("compute", value_html(st["compute"])),
            ("cache key", value_html(st["cache_key"]))]
    topo = topology_text(st["topology"])
    if topo:
        rows.append(("topology", _e(topo)))
    if st["params"]:
        rows.append(("parameters", value_html(st["params"])))
    if st.get("message"):
        rows.append(("message", _e(st["message"])))
    # what later versions record about a step (hidden inputs, the interpreter, ...) is shown
    # too, as tables: the page never drops a recorded fact
    rows += [(k.replace("_", " "), value_html(st[k])) for k in sorted(st)
             if k not in _STEP_SHOWN]
    if st.get("step_record") is False and st["status"] != "skipped":
        rows.append(("step record", "<span class='flag'>none: what its runtime would have "
                                    "observed is unknown, not absent</span>"))
    reuse = ""
    r = st["reused_from"]
    if r:
        origin = (f"run <code>{_e(r['executed_run'])}</code>, step run "
                  f"<code>{_e(r['executed_step_run'])}</code>" if r["executed_step_run"] else
                  f"step run <code>{_e(r['step_run'])}</code>, with no executed run of it in "
                  f"this store")
        reuse = f'<p class="note">Reused from {origin}: not re-executed for this candidate.</p>'
    metrics = ""
    if st["metrics"]:
        metrics = _table(["Metric", "Value", "Scope", "Population"],
                         [[_e(x["name"]), f'<td class="num">{_e(metric_value(x["value"]))}</td>',
                           _e(_scope(x)), _e(x.get("population") or "not recorded")]
                          for x in st["metrics"]])
    return (f'<div class="step" id="step-{_e(st["step"])}"><h3>{_e(st["step"])}</h3>{reuse}'
            f'{_kv(rows)}{_ports(p, st)}{metrics}</div>')


def _details(p: dict[str, Any]) -> str:
    parts = ['<section id="details"><h2>Steps</h2>']
    parts += [_step(p, st) for st in p["steps"]]
    for co in p["coordination"]:
        rows = [("result", "<span class='ok'>ok</span>" if co["ok"] else
                 "<span class='flag'>FAILED</span>"),
                ("world size", _e(co.get("world_size"))),
                ("ranks recorded", value_html(co.get("recorded_ranks"))),
                ("examples covered", f"{_e(co.get('covered'))} of {_e(co.get('population'))}"),
                ("writers", value_html(co.get("writers")))]
        rows += [(f"{f['severity']} {f['code']}", _e(f["message"]))
                 for f in co.get("findings", [])]
        parts.append(f'<h3 id="coordination-{_e(co["step"])}">Coordination of '
                     f'{_e(co["step"])}</h3>{_kv(rows)}')
    review = _review(p)
    if review and review["decisions"]:
        parts.append('<h2 id="decisions">Review decisions</h2>')
        for d in review["decisions"]:
            rows = [("verdict", _badge(d["verdict"], "dec-" + d["verdict"])),
                    ("by", _e(d["by"])), ("at", f"{_e(d['decided_at'])} UTC"),
                    ("bundle read", f"<code>{_e(d['bundle'])}</code>"),
                    ("note", _e(d["note"]) or "-")]
            pol = d.get("policy")
            if pol:
                rows.append(("policy", f"<b>{_e(pol['name'])}</b> <code>{_e(pol['file'])}"
                                       f"</code> <code>{_e(pol['digest'])}</code> "
                            + ("<span class='ok'>passed</span>" if pol["passed"] else
                               "<span class='flag'>NOT met</span>")))
                said = decision_text(pol)
                if said:
                    rows.append(("committed bar", f"<span class='flag'>{_e(said)}</span>"
                                 if pol.get("deviation") else _e(said)))
            parts.append(f'<div class="step decision">{_kv(rows)}')
            if pol and pol["criteria"]:
                parts.append(_table(["Criterion", "Required", "Found", "Result"], [
                    [_e(c["criterion"]), _e(c["required"]), _e(c["found"]),
                     "<span class='ok'>met</span>" if c["passed"] else
                     f"<span class='flag'>NOT met</span> {_e(c['code'] or '')}"
                     + (f"<br>{_e(c['message'])}" if c.get("message") else "")]
                    for c in pol["criteria"]]))
            parts.append("</div>")
    ch = p["checks"]
    parts.append("<h2>Compile-time checks</h2>")
    if not ch["recorded"]:
        parts.append("<p class='muted'>The check results of this run were not recorded.</p>")
    else:
        found = ch.get("error_results", []) + ch["warnings"] + ch["info"]
        parts.append(f"<p>{ch['errors']} error(s)" + (" (a run with check errors never starts)"
                                                       if ch["errors"] == 0 else
                                                       ": <span class='flag'>it ran with check "
                                                       "errors</span>") + "</p>")
        if found:
            parts.append(_table(["Severity", "Code", "Name", "Message"],
                                [[_badge(d["severity"], "sev-" + d["severity"]), _e(d["code"]),
                                  _e(d["name"]), _e(d["message"])] for d in found]))
    more = [(k.replace("_", " "), value_html(p[k])) for k in sorted(p) if k not in _SHOWN]
    if more:
        parts.append('<h2 id="more">Also recorded</h2>' + _kv(more))
    parts.append("<h2>Bundle</h2>" + _kv([
        ("generator", _e(p["generator"])),
        ("previous bundle", f"<code>{_e(p['previous_bundle'])}</code>" if p["previous_bundle"]
         else "none (first bundle)")]))
    parts.append("</section>")
    return "".join(parts)


def render_html(statement: dict[str, Any], digest: str) -> str:
    """One self-contained HTML page: who and what, findings, evaluation, reuse, provenance,
    the pipeline drawing, then each step's facts (tables, never JSON text).

    Example:
        >>> page = render_html(statement, digest)
        >>> page.index('id="who"') < page.index('id="findings"') < page.index('id="details"')
        True
    """
    p = statement["predicate"]
    c = p["candidate"]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="bundle-digest" content="{_e(digest)}">'
            f'<title>Evidence for {_e(c["id"])}</title><style>{_STYLE}</style></head><body>'
            f'{_who(statement, digest)}{_findings(p)}{_evaluation(p)}{_reuse(p)}'
            f'{_provenance(p)}{_drawing(p)}{_details(p)}{_tiers(statement)}</body></html>\n')


def _tiers(statement: dict[str, Any]) -> str:
    """How each field of the bundle is known (``tiers``): per part, and every unknown field
    with why, flagged."""
    counts, unknown = tiers.summary(statement)
    rows = [[_e(part)] + [f'<td class="num">{n[t]}</td>' for t in tiers.TIERS]
            for part, n in tiers.by_section(statement)]
    said = ", ".join(f"{counts[t]} {t}" for t in tiers.TIERS)
    flagged = (_table(["Unknown field", "Why"],
                      [[f"<code>{_e(path)}</code>", f"<span class='flag'>{_e(why)}</span>"]
                       for path, why in unknown], "unknown") if unknown else
               "<p class='ok'>No field of this bundle is unknown.</p>")
    return (f'<section id="tiers"><h2>How each fact is known ({_e(said)})</h2><p '
            f'class="muted">verified: recomputed from bytes or the store when the bundle was '
            f'sealed; recorded: observed by the runtime as the run ran; declared: written by an '
            f'author, the submitter or a reviewer; unknown: not known, with why.</p>'
            f'{_table(["Part", *tiers.TIERS], rows, "tiers")}{flagged}</section>')
