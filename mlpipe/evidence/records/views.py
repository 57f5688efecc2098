"""Text views of the store for the CLI: the runs table, one run, why a step ran, two runs' diff.

Read-only, and rendering only: the facts come from the ``reader`` (plain records, no ORM: a
command that shows the store starts as fast as mlpipe does).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpipe.digests import digest_of
from mlpipe.errors import UsageError
from mlpipe.evidence.records.populations import population_name
from mlpipe.evidence.records.read_records import (
    EXECUTED,
    FAILED,
    INTERRUPTED,
    REUSED,
    Candidate,
    Run,
    StepRun,
)
from mlpipe.evidence.records.reader import Reader

if TYPE_CHECKING:
    from mlpipe.evidence.signatures.trust import Trust


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip()
             for row in [header, *rows]]
    return "\n".join(lines)


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def runs_table(runs: list[Run]) -> str:
    """One line per run: id, pipeline, status, target, started, duration."""
    if not runs:
        return "no runs recorded yet"
    rows = [[r.id, r.pipeline_name, r.status, r.target, _when(r.started_at),
             _secs((r.finished_at - r.started_at).total_seconds() if r.finished_at else None)]
            for r in runs]
    return _table(["RUN", "PIPELINE", "STATUS", "TARGET", "STARTED (UTC)", "TOOK"], rows)


def headline(metrics: list[tuple[str, float, str | None]], most: int = 2) -> str:
    """The first global metrics of an evaluation, each with its population's split.

    Example:
        >>> headline([("accuracy", 0.875, "test, 8 examples")])
        'accuracy 0.875 on test'
    """
    if not metrics:
        return "-"
    shown = [f"{name} {value:.4g} on {population_name(pop) or 'population not recorded'}"
             for name, value, pop in metrics[:most]]
    return ", ".join(shown) + (f" (+{len(metrics) - most})" if len(metrics) > most else "")


def findings_summary(counts: dict[str, int] | None,
                     by_source: dict[str, int] | None = None) -> str:
    """``{"error": 1, "warning": 2, "info": 0}`` -> ``1 error, 2 warnings``; with where they
    came from, ``1 error, 2 warnings (2 compile-time, 1 evidence)``."""
    if counts is None:
        return "not sealed"
    parts = [f"{n} {sev}{'' if n == 1 else 's'}" for sev, n in counts.items() if n]
    where = [f"{n} {source}" for source, n in sorted((by_source or {}).items()) if n]
    return (", ".join(parts) + (f" ({', '.join(where)})" if where else "")) if parts else "none"


def review_status(c: Candidate) -> str:
    """``accepted by dana`` / ``rejected by lee`` / ``unreviewed``."""
    return "unreviewed" if c.review is None else f"{c.review[0]} by {c.review[1]}"


def candidates_table(rows: list[Candidate], signed: dict[str, str] | None = None) -> str:
    """One line per candidate (from ``Reader.candidate_rows``): id, pipeline, run, created,
    headline global metrics with their population, findings by severity, review status, and
    who signed its newest bundle (``signed``: candidate id -> label)."""
    if not rows:
        return "no candidates recorded yet"
    signed = signed or {}
    return _table(["CANDIDATE", "PIPELINE", "RUN", "CREATED (UTC)", "GLOBAL METRICS",
                   "FINDINGS", "REVIEW", "SIGNED"],
                  [[c.id + (f" ({c.name})" if c.name and c.name != c.pipeline else ""),
                    c.pipeline,
                    c.run_id + (f" (+{c.productions} re-run{'' if c.productions == 1 else 's'})"
                                if c.productions else ""),
                    c.created_at.strftime("%Y-%m-%d %H:%M:%S"), headline(c.metrics),
                    findings_summary(c.findings, c.findings_by_source), review_status(c),
                    signed.get(c.id, "-")]
                   for c in rows])


def get_run(s: Reader, ref: str) -> Run:
    """The run ``ref`` names (an id or a unique prefix), or a UsageError."""
    run = s.find_run(ref)
    if run is None:
        raise UsageError(f"no run {ref!r} in the evidence store",
                         hint="list runs with `mlpipe runs`")
    return run


def show_run(s: Reader, run: Run) -> str:
    """A run's header, inputs and a table of its steps with status, reuse and duration."""
    lines = [f"run {run.id}  pipeline {run.pipeline_name!r}  {run.status}",
             f"  target {run.target}  started {_when(run.started_at)} UTC  by "
             f"{run.user or '?'}@{run.host or '?'}",
             f"  pipeline digest {run.pipeline_digest}"]
    if run.target == "azure" and (run.options or {}).get("job_name"):
        opts = run.options
        lines.append(f"  azure job {opts['job_name']} ({opts.get('azure_status') or '?'})"
                     + (f"  {opts['studio_url']}" if opts.get("studio_url") else ""))
    if run.code_revision is not None:
        lines.append(f"  code {run.code_revision.commit or '(no git)'}"
                     f"{' (dirty tree)' if run.code_revision.dirty else ''}")
    if run.params:
        lines.append("  params " + ", ".join(f"{k}={v!r}" for k, v in sorted(run.params.items())))
    for ri in sorted(run.inputs, key=lambda r: r.name):
        if ri.snapshot.digest.startswith("ref:"):  # an Azure reference: content not hashed
            lines.append(f"  input {ri.name} = {ri.snapshot.reference}  (reference"
                         f"{', mutable' if ri.snapshot.mutable else ''}; content not hashed)")
            continue
        lines.append(f"  input {ri.name} = {ri.snapshot.reference}  {ri.snapshot.digest[:26]}  "
                     f"({ri.snapshot.file_count} file{'' if ri.snapshot.file_count == 1 else 's'}, "
                     f"{ri.snapshot.size} bytes)")
    if run.message:
        lines.append(f"  note: {run.message}")
    rows = []
    for sr in s.run_steps(run.id):
        rows.append([sr.step, sr.status, sr.reused_from_id or "-", _secs(sr.duration),
                     f"{sr.component.name}@{sr.component.version}", sr.id])
    lines += ["", _table(["STEP", "STATUS", "REUSED FROM", "TOOK", "COMPONENT", "STEP RUN"],
                         rows)]
    steps = s.run_steps(run.id)
    notes = [(sr.step, sr.topology.get("note")) for sr in steps
             if sr.topology and sr.topology.get("note")]
    notes += [(sr.step, sr.message) for sr in steps
              if sr.message and (sr.status in (EXECUTED, INTERRUPTED)
                                 or (sr.status == REUSED and not sr.reused_from_id))]
    if notes:
        lines.append("")
        lines += [f"  {step}: {text}" for step, text in notes]
    for sr in steps:
        if sr.status == FAILED:
            lines += ["", *failure_lines(s, sr)]
    for cand in s.candidates_of_run(run.id):
        lines.append(f"candidate {cand.id}  model {cand.model_digest[:26]}"
                     + ("" if cand.run_id == run.id else
                        f"  (reproduced: the model and evaluation bytes of run {cand.run_id})"))
    return "\n".join(lines)


def failure_lines(s: Reader, sr: StepRun) -> list[str]:
    """A failed step: its message, its diagnosis (the layer that failed, code, fix) and the
    paths of its logs, step first then each rank's (docs/step-record.md, Diagnosis)."""
    diagnosis = (s.step_record(sr.id) or {}).get("diagnosis")
    head = f"  {sr.step}: {sr.message or 'failed'}"
    if not diagnosis:  # recorded before diagnoses were
        return [head, *([f"    log: {sr.log_path}"] if sr.log_path else [])]
    lines = [f"  {sr.step}: {diagnosis['message']}",
             f"    error[{diagnosis['code']}] {diagnosis['name']}: failed at the layer of "
             f"{diagnosis['layer_title']}"
             + (f" (rank {diagnosis['rank']})" if diagnosis.get("rank") is not None else ""),
             f"    help: {diagnosis['hint']}"]
    return lines + [f"    {line}" for line in log_lines(diagnosis)]


def log_lines(diagnosis: dict[str, Any]) -> list[str]:
    """The log paths of a diagnosis, one ``label: path`` line each, the step's first.

    Example:
        >>> log_lines({"logs": {"step": "/l/train.log", "ranks": {"1": "/l/r1.log"}}})
        ['log: /l/train.log', 'rank 1 log: /l/r1.log']
    """
    logs = diagnosis.get("logs") or {}
    lines = [f"log: {logs['step']}"] if logs.get("step") else []
    ranks = logs.get("ranks") or {}
    lines += [f"rank {r} log: {ranks[r]}" for r in sorted(ranks, key=int)]
    return lines


def why(s: Reader, run: Run, step: str) -> str:
    """Why ``step`` of ``run`` was reused or re-run: key parts that differ from its last run."""
    sr = next((x for x in s.run_steps(run.id) if x.step == step), None)
    if sr is None:
        steps = ", ".join(x.step for x in s.run_steps(run.id)) or "none"
        raise UsageError(f"run {run.id} has no step {step!r} (steps: {steps})",
                         hint="give one of those step names to --why")
    head = f"step {step} of run {run.id}: {sr.status}"
    if sr.status == REUSED:
        origin = sr.reused_from
        assert origin is not None  # reused_from_id is a foreign key: the step run it names exists
        return (f"{head} from step run {origin.id} (run {origin.run_id}): every part of the "
                f"cache key matched\n  key {sr.cache_key}")
    if sr.key_material is None:
        return f"{head}; no cache key was recorded ({sr.message or 'never started'})"
    lines = [head]
    if sr.message and sr.status == EXECUTED:
        lines.append(f"  {sr.message}")
    before = s.previous_step_run(sr)
    if before is None:
        lines.append("  no earlier run of this step: nothing to reuse")
        return "\n".join(lines)
    diff = differences(before.key_material, sr.key_material)
    lines.append(f"  compared with step run {before.id} (run {before.run_id}, {before.status}):")
    if diff:
        lines += [f"    {d}" for d in diff]
        if before.component.code_digest != sr.component.code_digest:
            from mlpipe.evidence.records.sourcediff import change_lines, source_change

            change = source_change(s.source_text(before.component.code_digest),
                                   s.source_text(sr.component.code_digest))
            lines += [f"    {line}" for line in change_lines(change)]
    else:
        reason = ("it was not reusable: " + before.message) if before.message else (
            "its outputs were no longer in the artifact store or no longer matched their "
            "digests" if before.status == EXECUTED else f"it ended {before.status}")
        lines.append(f"    the cache key is identical; {reason}")
    return "\n".join(lines)


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The key parts that differ, one line each: ``params.epochs: 10 -> 12``.

    Example:
        >>> differences({"params": {"epochs": 10}}, {"params": {"epochs": 12}})
        ['params.epochs: 10 -> 12']
    """
    lines: list[str] = []
    for part in sorted(set(before) | set(after)):
        a, b = before.get(part), after.get(part)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    lines.append(f"{part}.{name}: {_show(a.get(name), name in a)} -> "
                                 f"{_show(b.get(name), name in b)}")
        else:
            lines.append(f"{part}: {_show(a, part in before)} -> {_show(b, part in after)}")
    return lines


def _show(value: Any, present: bool) -> str:
    if not present:
        return "(absent)"
    if isinstance(value, str) and ":" in value and len(value) > 30:
        algo, _, rest = value.partition(":")
        return f"{algo}:{rest[:12]}"
    return repr(value) if not isinstance(value, dict) else digest_of(value)[:19]


def _step_facts(s: Reader, run: Run) -> dict[str, dict[str, Any]]:
    facts = {}
    for sr in s.run_steps(run.id):
        origin = sr.reused_from if sr.reused_from_id else sr
        assert origin is not None  # reused_from_id is a foreign key: the step run it names exists
        facts[sr.step] = {
            "status": sr.status if not sr.reused_from_id else f"reused from {sr.reused_from_id}",
            "code": sr.component.code_digest,
            "component": f"{sr.component.name}@{sr.component.version}",
            "environment": None if sr.environment is None else
            f"{sr.environment.name}:{sr.environment.version} {sr.environment.digest[:19]}",
            "interpreter": _interpreter(_executed(sr)),
            "metrics": {f"{x.name}[{x.scope}{'' if x.rank is None else f' rank {x.rank}'}]":
                        x.value for x in origin.metrics},
        }
    return facts


def _executed(sr: Any) -> dict[str, Any] | None:
    """The interpreter of the step run that executed ``sr``'s result (a reuse chain followed
    to its executed end); None where it is not in the store."""
    seen = 0
    while sr is not None and sr.reused_from_id and seen < 100:
        sr, seen = sr.reused_from, seen + 1
    return None if sr is None else sr.interpreter


def _interpreter(found: dict[str, Any] | None) -> str | None:
    """The package set that ran a step, and whether it was its declared environment."""
    if not found:
        return None
    where = ("isolated" if found.get("isolated") else "mlpipe's own" +
             (", outside its declared environment"
              if found.get("in_declared_environment") is False else ""))
    return f"python {found.get('version')}, packages {found.get('packages_digest')} ({where})"


#: The sections of a diff, in order: (JSON key, text title).
DIFF_SECTIONS = (("pipeline", "pipeline"), ("code_revision", "code revision"),
                 ("data_snapshots", "data snapshots"), ("parameters", "parameters"),
                 ("components", "components"), ("code", "code"),
                 ("environment", "environment"), ("interpreter", "interpreter"),
                 ("steps_and_reuse", "steps and reuse"), ("metrics", "metrics"))


def run_differences(s: Reader, a: Run, b: Run) -> dict[str, list[dict[str, Any]]]:
    """What differs between runs ``a`` and ``b``, by section (``DIFF_SECTIONS``): each a list
    of ``{"what", "before", "after"}`` with the full values (None where absent).

    Example:
        >>> run_differences(s, a, b)["parameters"]
        [{'what': 'epochs', 'before': 10, 'after': 12}]
    """
    def item(what: str, before: Any, after: Any) -> dict[str, Any]:
        return {"what": what, "before": before, "after": after}

    def code(r: Run) -> dict[str, Any] | None:
        return None if r.code_revision is None else {"commit": r.code_revision.commit,
                                                     "dirty": r.code_revision.dirty}

    out: dict[str, list[dict[str, Any]]] = {key: [] for key, _ in DIFF_SECTIONS}
    if a.pipeline_digest != b.pipeline_digest:
        out["pipeline"].append(item("digest", a.pipeline_digest, b.pipeline_digest))
    if code(a) != code(b):
        out["code_revision"].append(item("commit", code(a), code(b)))
    sa = {i.name: i.snapshot.digest for i in a.inputs}
    sb = {i.name: i.snapshot.digest for i in b.inputs}
    out["data_snapshots"] = [item(k, sa.get(k), sb.get(k)) for k in sorted(set(sa) | set(sb))
                             if sa.get(k) != sb.get(k)]
    out["parameters"] = [item(k, a.params.get(k), b.params.get(k))
                         for k in sorted(set(a.params) | set(b.params))
                         if a.params.get(k) != b.params.get(k)]
    fa, fb = _step_facts(s, a), _step_facts(s, b)
    for key, part in (("components", "component"), ("code", "code"),
                      ("environment", "environment"), ("interpreter", "interpreter"),
                      ("steps_and_reuse", "status")):
        out[key] = [item(step, fa.get(step, {}).get(part), fb.get(step, {}).get(part))
                    for step in sorted(set(fa) | set(fb))
                    if fa.get(step, {}).get(part) != fb.get(step, {}).get(part)]
    from mlpipe.evidence.records.sourcediff import source_change  # difflib: only a diff pays for it

    for found in out["code"]:
        if found["before"] and found["after"]:
            found["source"] = source_change(s.source_text(found["before"]),
                                            s.source_text(found["after"]))
    for step in sorted(set(fa) | set(fb)):
        ma, mb = fa.get(step, {}).get("metrics", {}), fb.get(step, {}).get("metrics", {})
        out["metrics"] += [item(f"{step}.{k}", ma.get(k), mb.get(k))
                           for k in sorted(set(ma) | set(mb)) if ma.get(k) != mb.get(k)]
    return out


def runs_differ(found: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether ``run_differences`` found anything (``mlpipe diff`` exits 1 then, as diff(1))."""
    return any(found.values())


def diff_runs(s: Reader, a: Run, b: Run,
              found: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """What differs between two runs: code (with a unified diff of the kept source),
    environment, data, parameters, reuse, metrics; ``found``: ``run_differences``' answer,
    where the caller has it already."""
    out = [f"--- {a.id} ({a.pipeline_name}, {a.status})", f"+++ {b.id} ({b.pipeline_name}, "
                                                             f"{b.status})"]
    found = run_differences(s, a, b) if found is None else found

    def commit(value: dict[str, Any] | None) -> str | None:
        return None if value is None else (f"{(value['commit'] or '')[:12]}"
                                           f"{' dirty' if value['dirty'] else ''}")

    text = {
        "pipeline": lambda d: f"digest {d['before'][:19]} -> {d['after'][:19]}",
        "code_revision": lambda d: f"{commit(d['before'])} -> {commit(d['after'])}",
        "data_snapshots": lambda d: f"{d['what']}: {(d['before'] or '(none)')[:26]} -> "
                                    f"{(d['after'] or '(none)')[:26]}",
        "parameters": lambda d: f"{d['what']}: {d['before']!r} -> {d['after']!r}",
    }
    for key, title in DIFF_SECTIONS:
        rows = []
        for d in found[key]:
            rows.append(text.get(key, lambda d: f"{d['what']}: {d['before']} -> {d['after']}")(d))
            if d.get("source") is not None:
                from mlpipe.evidence.records.sourcediff import change_lines

                rows += [f"  {line}" for line in change_lines(d["source"])]
        if rows:
            out.append(f"{title}:")
            out.extend(f"  {r}" for r in rows)
    if len(out) == 2:
        out.append("no differences in code, environment, data, parameters, reuse or metrics")
    return "\n".join(out)


def signature_state(signer: str | None, sealed: bool, trust: Trust | None,
                    local_keyid: str | None) -> dict[str, str | None]:
    """How ``mlpipe candidates`` shows who signed a candidate's newest bundle (by the key id its
    envelope names; ``--verify --trust`` checks the signature itself): ``state`` one of
    ``trusted`` (an identity of ``trust`` that may seal or decide), ``untrusted``, ``local``
    (this home's first-use key, no policy given), ``signed`` (no policy to judge it by),
    ``unsigned``, ``unsealed``."""
    ident = None if trust is None or signer is None else trust.identities.get(signer)
    if not sealed:
        state = "unsealed"
    elif signer is None:
        state = "unsigned"
    elif ident is not None:
        state = "trusted"
    elif trust is not None:
        state = "untrusted"
    else:
        state = "local" if signer == local_keyid else "signed"
    return {"state": state, "keyid": signer, "identity": None if ident is None else ident.name}


def signature_label(sig: dict[str, str | None]) -> str:
    """``signed by ci`` / ``untrusted key 3f9a0c1b`` / ``local key (untrusted)`` / ..."""
    short = (sig["keyid"] or "")[:8]
    return {"trusted": f"signed by {sig['identity']}", "untrusted": f"untrusted key {short}",
            "local": "local key (untrusted)", "signed": f"key {short}",
            "unsigned": "unsigned", "unsealed": "-"}[str(sig["state"])]
