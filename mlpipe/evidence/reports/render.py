"""The reviewer's text and Markdown views of a sealed bundle, and the text of a verification.

Renders a bundle's JSON only: no store, no hashing. What a reviewer decides on comes first:
findings, the candidate, its evaluation, then provenance, steps (reuse called out), checks.
"""
from __future__ import annotations

from typing import Any

from mlpipe.evidence.records.findings import every_finding, where_from
from mlpipe.evidence.reports import tiers
from mlpipe.evidence.reports.terminal import shown

_SEV = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}


def own_name(p: dict[str, Any]) -> str | None:
    """The candidate's name where it is its own (``Candidate(name=...)``); None where it is
    its pipeline's, the default, which the pipeline line already shows."""
    name = p["candidate"].get("name")
    return name if name and name != (p.get("pipeline") or {}).get("name") else None


def production_line(x: dict[str, Any]) -> str:
    """A production of the candidate: its run, pipeline where it was recorded, and how many
    findings of its own it has (listed with the candidate's findings)."""
    pipe = x.get("pipeline") or {}
    found = x.get("findings")
    counts = ("" if found is None else
              f"; its own findings: {len(found)}" if found else "; no finding of its own")
    return (f"reproduced by run {x['run']} ({x['status']}, started {x['started_at']}"
            + (f", pipeline {pipe['name']} {pipe['digest']}" if pipe else "")
            + f"): the same model and evaluation bytes{counts}")


def _short(digest: str | None, n: int = 19) -> str:
    return "-" if not digest else digest[:n]


def metric_value(v: float) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _metric_line(x: dict[str, Any]) -> str:
    scope = x["scope"] if x.get("rank") is None else f"{x['scope']}, rank {x['rank']}"
    if x.get("reduced_over"):
        scope += f", reduced over {x['reduced_over']} ranks"
    pop = x.get("population") or "population not recorded"
    return f"{x['name']} = {metric_value(x['value'])}  [{scope}]  on {pop}"


def population_text(p: Any) -> str:
    if isinstance(p, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(p.items()))
    return str(p) if p else "not stated"


def topology_text(t: dict[str, Any]) -> str | None:
    if not t or not t.get("declared"):
        return None
    d = t["declared"]
    dist = (d.get("distribution") or {}).get("type", "none")
    text = f"declared {dist} x{d.get('world_size')} ({d.get('instances')} node(s))"
    if t.get("local_scale"):
        text += f"; scaled down here to x{t['local_scale'].get('world_size')} (--local-scale)"
    ran = t.get("ran")
    if ran:
        text += (f"; ran {ran.get('instances')} node(s) x {ran.get('processes_per_node')} "
                 f"process(es) = world {ran.get('world_size')}")
    return text


def _held(art: dict[str, Any]) -> str:
    """Where an artifact's bytes are and who hashed them, when that is not "here, by mlpipe"."""
    if art.get("digest_by", "mlpipe") is None:
        return f"  (content unknown: only its location {art['location']} was recorded)"
    if art.get("remote"):
        return (f"  (only on {art['location']}; digest recorded by the step runtime that wrote "
                f"it, not re-hashed here)")
    return ""


def _reuse_line(st: dict[str, Any]) -> str:
    r = st["reused_from"]
    if r["executed_step_run"] is None:
        return (f"REUSED from step run {r['step_run']} - not re-executed for this candidate, and "
                f"no executed run of it is in this store")
    return (f"REUSED from run {r['executed_run']}, step {r['step'] or st['step']} (step run "
            f"{r['executed_step_run']}) - not re-executed for this candidate")


def _code_lines(code: dict[str, Any] | None) -> list[str]:
    """The code revision; ``(clean)`` only when every file the pipeline loaded was committed
    and unmodified (and no tracked file was changed), each file that was not listed."""
    if not code:
        return ["code revision not recorded"]
    head = f"code {code['commit'] or '(not in git)'}"
    files = code.get("files")
    if files is None:  # bundles of runs that did not record which files the pipeline loaded
        return [head + (" (DIRTY working tree)" if code["dirty"] else
                        " (tracked files unchanged; the files the pipeline loaded were not "
                        "recorded)")]
    loose = [f for f in files if f["state"] != "committed"]
    if code.get("clean"):
        return [f"{head} (clean: the {len(files)} files the pipeline loaded are committed)"]
    why = [f"{len(loose)} of {len(files)} loaded files not committed"] if loose else []
    if code["dirty"]:
        why.append("DIRTY working tree")
    return [f"{head} (NOT clean: {', '.join(why)})"] + [
        f"  file {f['path']}  {f['state']}" for f in loose]


def bar_text(predicate: dict[str, Any]) -> str:
    """The qualification policy the run committed to before it ran (``run.options.policy``,
    ``evidence.commitment``) as the views show it (text, HTML, card): which, by digest, or
    none."""
    c = ((predicate.get("run") or {}).get("options") or {}).get("policy")
    if not isinstance(c, dict):
        return "none committed before the run (a policy given later judges it)"
    return f"{c['name']} ({c['file']}, {c['digest']}), committed before the run"


def decision_text(policy: dict[str, Any] | None) -> str | None:
    """How a decision's policy relates to the committed one, as the views show it; None for a
    decision recorded before commitments existed, or judged against no policy."""
    if not policy or "committed" not in policy:
        return None
    d = policy.get("deviation")
    if d:
        c = policy.get("committed") or {}
        return (f"DEVIATION from the committed policy {c.get('name')} ({c.get('digest')}): "
                f"judged against {d['name']} ({d['digest']}) by {d['by']}, because: {d['why']}")
    if policy.get("committed"):
        return "the policy committed before the run"
    return "a policy given after the run (none was committed before it)"


def review_lines(review: dict[str, Any]) -> list[str]:
    """The review status and every recorded decision, oldest first, each with the bundle it
    cites and the policy it was judged against."""
    lines = [f"status {review['status']}" + ("" if review["decisions"] else
                                              ": no decision recorded (mlpipe review)")]
    for d in review["decisions"]:
        lines.append(f"{d['verdict']} by {d['by']} at {d['decided_at']} UTC, on bundle "
                     f"{d['bundle']}: {d['note']}")
        pol = d.get("policy")
        if pol:
            unmet = [c["code"] for c in pol["criteria"] if not c["passed"]]
            lines.append(f"  policy {pol['name']} ({pol['file']}, {pol['digest'][:19]}): "
                         + ("passed" if pol["passed"] else f"NOT met ({', '.join(unmet)})"))
            said = decision_text(pol)
            if said:
                lines.append(f"  {said}")
    return lines


def reuse_origins(p: dict[str, Any]) -> dict[str | None, list[str]]:
    """The reused steps of a bundle predicate by the run that executed them (None: no executed
    run of it is in the store), runs in the order their first step appears."""
    out: dict[str | None, list[str]] = {}
    for st in p["steps"]:
        if st["reused_from"]:
            out.setdefault(st["reused_from"]["executed_run"], []).append(st["step"])
    return out


def reuse_summary(p: dict[str, Any]) -> str:
    """One line on reuse: ``3 of 4 steps were reused from run r-1a2b3c4d5e``, or with several
    origins ``3 of 4 steps were reused: 2 from run r-a, 1 with no executed run in this store``,
    or ``none of 2 steps was reused: all ran for run r-...``.

    Example:
        >>> reuse_summary({"run": {"id": "r-1"}, "steps": [
        ...     {"step": "a", "reused_from": None},
        ...     {"step": "b", "reused_from": {"executed_run": "r-0"}}]})
        '1 of 2 steps was reused from run r-0'
    """
    origins = reuse_origins(p)
    total = len(p["steps"])
    if not origins:
        return (f"none of {total} step{'' if total == 1 else 's'} was reused: "
                f"{'it' if total == 1 else 'all'} ran for run {p['run']['id']}")
    count = sum(len(v) for v in origins.values())
    verb = "was" if count == 1 else "were"
    head = f"{count} of {total} step{'' if total == 1 else 's'} {verb} reused"

    def origin(run: str | None) -> str:
        return f"from run {run}" if run else "with no executed run in this store"

    if len(origins) == 1:
        return f"{head} {origin(next(iter(origins)))}"
    return head + ": " + ", ".join(f"{len(v)} {origin(r)}" for r, v in origins.items())


def sections(statement: dict[str, Any], digest: str) -> list[tuple[str, list[str]]]:
    """The bundle as titled sections of lines, shared by the text and Markdown views."""
    p = statement["predicate"]
    out: list[tuple[str, list[str]]] = [("Findings", _findings_lines(p)),
                                        ("Candidate", _candidate_lines(statement))]
    if "review" in p:  # bundles sealed before decisions were recorded have no such field
        out.append(("Review", review_lines(p["review"])))
    out.append(("Evaluation", _evaluation_lines(p["evaluation"]) or ["no evaluation"]))
    out.append(("Provenance", _provenance_lines(p)))
    out.append(("Steps", _steps_lines(p)))
    out += [("Coordination", _coordination_lines(co)) for co in p["coordination"]]
    out.append(("Compile-time checks", _checks_lines(p["checks"])))
    out.append(("How each fact is known", tiers.lines(statement)))
    out.append(("Bundle", [f"digest {digest}", f"sealed {p['sealed_at']} UTC",
                           f"previous {p['previous_bundle'] or 'none (first bundle)'}"]))
    return out


def _findings_lines(p: dict[str, Any]) -> list[str]:
    own = p["run"]["id"]
    findings = [f"{_SEV[f['severity']]} [{f['code']} {f['name']}] ({where_from(f, own)}) "
                f"{f['message']}" + (f" (fix: {f['hint']})" if f.get("hint") else "")
                for f in every_finding(p)]
    return findings or ["none: no compile-time, run-time or evidence finding "
                        "(evaluation, metric scope, reuse, provenance)"]


def _candidate_lines(statement: dict[str, Any]) -> list[str]:
    p = statement["predicate"]
    c = p["candidate"]
    model = next((a for a in p["artifacts"] if a["digest"] == c["model"]), {})
    return [
        f"id {c['id']}" + (f"  name {c['name']}" if own_name(p) else ""),
        f"model {c['model']}" + _held(model),
        *([f"  file {s['name']}  sha256:{s['digest']['sha256']}" for s in statement["subject"]]
          or ["  files: unknown (no digest of them was recorded)"]),
        f"run {p['run']['id']} ({p['run']['status']}, {p['run']['target']}) pipeline "
        f"{p['pipeline']['name']} {p['pipeline']['digest']}",
        f"qualification policy {bar_text(p)}",
        *[production_line(x) for x in p.get("productions") or []]]


def _evaluation_lines(ev: dict[str, Any]) -> list[str]:
    lines = []
    if ev["step"]:
        lines.append(f"by step {ev['step']}" + ("" if ev["reads_model"] else
                                                  " (which did NOT read this model)"))
    lines += [_metric_line(x) for x in ev["metrics"]]
    rep = ev["report"]
    if rep:
        lines.append(f"report {rep['digest']}" + ("" if rep["readable"] else " (unreadable)"))
        lines.append(f"  population: {population_text(rep['population'])}")
        lines += [f"  {x['name']} = {metric_value(x['value'])}  [{x['scope']}]"
                  for x in rep["metrics"]]
    return lines


def _provenance_lines(p: dict[str, Any]) -> list[str]:
    prov = _code_lines(p["code"])
    if "ci" in p:  # bundles sealed before CI provenance was recorded have no such field
        from mlpipe.evidence.storage.ci import describe

        prov.append(f"ci {describe(p['ci'])}")
    for snap in p["snapshots"]:
        if snap["file_count"] is None:  # a reference (an Azure ML data asset): content unknown
            prov.append(f"data {snap['input']} = {snap['reference']}  {snap['digest']}  "
                        f"(a reference: its content was not recorded"
                        f"{', and it can move' if snap['mutable'] else ''})")
            continue
        files = f"{snap['file_count']} file{'' if snap['file_count'] == 1 else 's'}"
        prov.append(f"data {snap['input']} = {snap['reference']}  {snap['digest']}  "
                    f"({files}, {snap['size']} bytes"
                    f"{', mutable reference: snapshotted by content' if snap['mutable'] else ''})")
    envs = sorted({(st['environment']['name'], st['environment']['version'],
                    st['environment']['digest'], st['environment']['mutable'])
                   for st in p["steps"] if st["environment"]})
    prov += [f"environment {n}:{v or '(no version)'}  {d}{'  (mutable)' if mu else ''}"
             for n, v, d, mu in envs]
    if p["run"]["params"]:
        prov.append("parameters " + ", ".join(f"{k}={v!r}" for k, v in
                                              sorted(p["run"]["params"].items())))
    return prov


def _steps_lines(p: dict[str, Any]) -> list[str]:
    steps = [line for st in p["steps"] for line in _step_lines(st, p["artifacts"])]
    reused = [st["step"] for st in p["steps"] if st["reused_from"]]
    if reused:
        steps.append(f"{reuse_summary(p)}, not executed for this candidate: "
                     f"{', '.join(reused)}. Reuse is an execution fact, not evidence of quality.")
    return steps


def _step_lines(st: dict[str, Any], artifacts: list[dict[str, Any]]) -> list[str]:
    comp = st["component"]
    head = f"{st['step']}: {comp['name']}@{comp['version']}  "
    steps = [head + (_reuse_line(st) if st["reused_from"] else st["status"]),
             f"    code {comp['code_digest']}", f"    spec {comp['spec_digest']}"]
    topo = topology_text(st["topology"])
    if topo:
        steps.append(f"    topology {topo}")
    if st["params"]:
        steps.append("    params " + ", ".join(f"{k}={v!r}" for k, v in
                                               sorted(st["params"].items())))
    for port in st["inputs"]:
        steps.append(f"    in  {port['port']} {port['digest']}")
    for port in st["outputs"]:
        art = next((a for a in artifacts if a["digest"] == port["digest"]), {})
        steps.append(f"    out {port['port']} {port['digest']}" + _held(art))
    for e in st.get("hidden_inputs") or []:
        steps.append(f"    read {e['path']} {e['digest'] or '(content not recorded)'}"
                     + (" (declared with reads=)" if e["declared"] else
                        " (outside the declared inputs)"))
    for x in st["metrics"]:
        steps.append(f"    metric {_metric_line(x)}")
    interp = st.get("interpreter")  # absent from bundles sealed before it was recorded
    if interp:
        where = ("isolated, built from its declared environment" if interp["isolated"]
                 else "mlpipe's own interpreter")
        steps.append(f"    python {interp['version']} ({where}), {interp['packages']} "
                     f"packages {interp['packages_digest']}")
        if interp["in_declared_environment"] is False:
            steps.append(f"    NOT IN ITS DECLARED ENVIRONMENT: {interp['note']}")
    if st.get("step_record") is False and st["status"] != "skipped":
        steps.append("    no step record: what its runtime would have observed (contract "
                     "checks, metrics by rank, coordination, reads and writes) is unknown, "
                     "not absent")
    return steps


def _coordination_lines(co: dict[str, Any]) -> list[str]:
    lines = [f"{co['step']}: {'ok' if co['ok'] else 'FAILED'}, world {co['world_size']}, "
             f"ranks recorded {co.get('recorded_ranks')}, covered "
             f"{co.get('covered')}/{co.get('population')} examples, writers "
             f"{co.get('writers')}"]
    return lines + [f"  {f['severity']}[{f['code']}] {f['message']}"
                    for f in co.get("findings", [])]


def _checks_lines(ch: dict[str, Any]) -> list[str]:
    errors = ch.get("error_results", [])
    checks = ([f"{d['severity']}[{d['code']}] {d['name']}: {d['message']}"
               for d in errors + ch["warnings"] + ch["info"]] if ch["recorded"]
              else ["the check results of this run were not recorded"])
    if not ch["recorded"]:
        count = []
    elif ch["errors"] == 0:
        count = ["0 errors (a run with check errors never starts)"]
    else:
        count = [f"{ch['errors']} ERROR(S) recorded with this run: it ran with check errors"]
    return count + (checks or ["no warnings"])


def render_text(statement: dict[str, Any], digest: str) -> str:
    """The default ``mlpipe evidence`` view; names and values escaped (evidence.terminal)."""
    statement = shown(statement)
    p = statement["predicate"]
    c = p["candidate"]
    lines = [f"evidence for candidate {c['id']}" + (f" ({c['name']})" if own_name(p) else "")]
    for title, body in sections(statement, digest):
        lines += ["", title.upper()] + [f"  {b}" for b in body]
    return "\n".join(lines)


def render_markdown(statement: dict[str, Any], digest: str) -> str:
    """The bundle for a review ticket: one heading per section, code spans for digests; names
    and values escaped (evidence.terminal)."""
    statement = shown(statement)
    c = statement["predicate"]["candidate"]
    lines = [f"# Evidence for candidate `{c['id']}`"]
    for title, body in sections(statement, digest):
        lines += ["", f"## {title}", ""]
        for b in body:
            indent = len(b) - len(b.lstrip(" "))
            lines.append(f"{'  ' * (indent // 2)}- {b.strip()}")
    return "\n".join(lines)


def render_verification(v: dict[str, Any]) -> str:
    """``--verify``'s report: each mismatch, what was not re-hashed (and why), then one verdict
    line that says whether the verification was complete."""
    v = shown(v)
    lines = [f"error[{f['code']}] {f['name']}: {f['message']}\n  help: {f['hint']}"
             for f in v["mismatches"]]
    left = v.get("not_rehashed") or []
    lines += [f"info[{f['code']}] {f['name']}: {f['message']}" for f in left]
    if left:
        hints = list(dict.fromkeys(f["hint"] for f in left))
        lines += [f"  help: {h}" for h in hints]
    fetched = f", {v['fetched']} downloaded" if v.get("fetched") else ""
    verdict = (f"verified bundle {v['bundle']}: {v['bundles_checked']} sealed bundle(s), "
               f"{v['files_hashed']} files ({v['bytes_hashed']} bytes) re-hashed{fetched}")
    if v.get("trust"):
        verdict += f", signatures checked against the trust policy {v['trust']['file']}"
    verdict += ", nothing changed" if v["ok"] else f"; {len(v['mismatches'])} mismatch(es)"
    if left:
        verdict += (f"; {len(left)} artifact(s) and snapshot(s) NOT re-hashed (listed above): "
                    f"the verification is incomplete")
    lines.append(verdict)
    return "\n".join(lines)
