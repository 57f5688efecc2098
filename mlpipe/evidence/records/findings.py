"""What a reviewer must see first about a candidate: missing or misplaced evaluation, global
metrics that are not, reuse with nothing executed behind it, a model or report whose bytes
nothing names, reads outside the declared inputs, code the recorded commit does not hold.
Findings are MP417, MP660, MP701-MP704, MP717, MP804 and MP870.

``every_finding`` is the one list every screen, gate and policy counts: these evidence
findings, the compile-time diagnostics the run was checked with, what the run itself found
(each distributed step's coordination check) and the same for every other production of the
candidate, each labelled with where it came from and the run it is about.

Judges the predicate the builder assembled; reads nothing else and never raises for what it
finds.
"""
from __future__ import annotations

import re
from typing import Any

from mlpipe.codes import (
    CANDIDATE_NOT_EVALUATED,
    CODE_NOT_COMMITTED,
    CONTENT_UNKNOWN,
    EVALUATION_OVERLAP_UNCHECKED,
    EVALUATION_OVERLAPS_TRAINING,
    GLOBAL_METRIC_FROM_TOO_FEW_RANKS,
    READ_OUTSIDE_INPUTS,
    REUSED_WITHOUT_EXECUTED_ORIGIN,
    STEP_FACTS_UNKNOWN,
)
from mlpipe.diagnostics import Code, Severity
from mlpipe.digests import is_reference
from mlpipe.evidence.records.populations import population_name

_WHOLE = {"all", "full", "everything", "whole", "*"}
#: Where a finding came from (``every_finding``'s ``source``).
COMPILE_TIME, RUN_TIME, EVIDENCE = "compile-time", "run-time", "evidence"
_ORDER = {"error": 0, "warning": 1, "info": 2}
_SOURCES = {COMPILE_TIME: 0, RUN_TIME: 1, EVIDENCE: 2}


def _finding(code: Code, message: str, hint: str, step: str | None = None,
             severity: Severity | None = None) -> dict[str, Any]:
    return {"code": code.code, "name": code.name,
            "severity": (severity or code.severity).value, "step": step,
            "message": message, "hint": hint}


def _names(values: list[Any]) -> set[str]:
    return {n for n in (population_name(v) for v in values) if n}


def _parts(name: str) -> set[str]:
    return {p for p in re.split(r"[+&/ ]+", name) if p}


def _world_size(topology: Any) -> int:
    if not isinstance(topology, dict):
        return 1
    for part in ("ran", "coordination"):
        size = (topology.get(part) or {}).get("world_size")
        if isinstance(size, int):
            return size
    return int((topology.get("declared") or {}).get("world_size") or 1)


def _evaluation(p: dict[str, Any]) -> list[dict[str, Any]]:
    ev, cand = p["evaluation"], p["candidate"]
    if cand["evaluation"] is None:
        return [_finding(CANDIDATE_NOT_EVALUATED, f"candidate {cand['id']} has no evaluation: its "
                         f"pipeline's Candidate names no evaluation output",
                         "return Candidate(model=..., evaluation=<an evaluate step's report>)")]
    if ev["step"] is None:
        return [_finding(CANDIDATE_NOT_EVALUATED,
                         f"candidate {cand['id']}'s evaluation {cand['evaluation']}"
                         f" was produced by no step of run {p['run']['id']}",
                         "evaluate the model in a step of the same pipeline")]
    if not ev["reads_model"]:
        return [_finding(CANDIDATE_NOT_EVALUATED,
                         f"evaluation step {ev['step']!r} did not read the "
                         f"candidate's model {cand['model']}: its report is not about this model",
                         "connect the training step's model output to the evaluation step",
                         step=ev["step"])]
    return []


def _population_overlap(p: dict[str, Any], train: dict[str, Any]) -> list[dict[str, Any]]:
    """The evaluation's population names against those training logged."""
    ev = p["evaluation"]
    trained = _names([x["population"] for x in train["metrics"]])
    report = ev["report"] or {}
    evaluated = _names([x["population"] for x in ev["metrics"]]
                       + [report.get("population")]
                       + [x.get("population") for x in report.get("metrics", [])])
    found = []
    for name in sorted(evaluated):
        hit = sorted(t for t in trained if t in _WHOLE or name in _WHOLE
                     or _parts(name) & _parts(t))
        if hit:
            found.append(_finding(
                EVALUATION_OVERLAPS_TRAINING,
                f"the evaluation in step {ev['step']!r} ran on population "
                f"{name!r}, which overlaps {hit[0]!r}, the population step "
                f"{train['step']!r} trained on", "evaluate on a held-out split (test) that "
                "training never reads", step=ev["step"]))
    return found


#: Parameter values that name a population: a step given one may select its rows from an
#: artifact that holds several.
_SPLIT_WORDS = {"train", "training", "val", "valid", "validation", "dev", "test", "testing",
                "eval", "evaluation", "holdout", "heldout", "calibration"}
#: Contract kinds that hold no examples (a label map, a model), or say which example is where.
_NOT_EXAMPLES = {"label-map", "mlflow-model", "model", "metrics-report", "split-manifest"}


def _selects_rows(step: dict[str, Any], spec: dict[str, Any] | None) -> bool:
    """Whether anything the step was given can pick some rows of a shared artifact: a split
    manifest or a contract that declares splits, or a parameter naming a split."""
    for name, value in (step.get("params") or {}).items():
        if "split" in name.lower() or "fold" in name.lower() or (
                isinstance(value, str) and value.strip().lower() in _SPLIT_WORDS):
            return True
    if spec is None:
        return True   # the declaration is not in this store: nothing can be said
    for port in spec.get("inputs") or []:
        contract = port.get("contract") or {}
        if contract.get("kind") == "split-manifest" or contract.get("splits") or \
                "{split}" in str(contract.get("layout") or "") or any(
                    isinstance(c, dict) and c.get("role") == "split"
                    for c in contract.get("columns") or []):
            return True
    return False


#: Names of plain file inputs that describe the data rather than hold it (as MP416 reads them).
_DESCRIPTIVE = re.compile(r"label|class|vocab|token|encod|schema|config|param|map|manifest|"
                          r"split|feature_names|stats|norm", re.I)


def _example_ports(spec: dict[str, Any] | None) -> set[str]:
    """The inputs that hold examples: not a model, a label map, a manifest or a report, nor a
    plain file named for what describes the data."""
    found = set()
    for port in (spec or {}).get("inputs") or []:
        contract = port.get("contract") or {}
        if port.get("kind") in ("mlflow_model", "custom_model", "triton_model") or \
                contract.get("kind") in _NOT_EXAMPLES:
            continue
        if not contract and port.get("kind") == "uri_file" and _DESCRIPTIVE.search(port["name"]):
            continue
        found.add(port["name"])
    return found


def _specs(session: Any, steps: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    if session is None:
        return {}
    from sqlalchemy import select

    from mlpipe.evidence.storage import models as m

    wanted = {st["component"]["spec_digest"] for st in steps}
    rows = session.execute(select(m.ComponentVersion.spec_digest, m.ComponentVersion.spec)
                           .where(m.ComponentVersion.spec_digest.in_(wanted))).all()
    return {row[0]: row[1] for row in rows}


def _recorded(session: Any, step: dict[str, Any], key: str) -> Any:
    """``key`` of the step record of the step (or of the run it was reused from)."""
    if session is None:
        return None
    from mlpipe.evidence.storage import models as m

    origin = step["step_run"] if step["reused_from"] is None \
        else step["reused_from"]["executed_step_run"]
    row = session.get(m.StepRun, origin) if origin else None
    record = row.record if row is not None and isinstance(row.record, dict) else {}
    return (record.get("step") or {}).get(key)


def _ids(session: Any, step: dict[str, Any]) -> dict[str, Any] | None:
    """The example ids the step (or the run it was reused from) consumed, from its record."""
    return _recorded(session, step, "consumed_ids")


def _opened(session: Any, step: dict[str, Any], port: str) -> dict[str, Any] | None:
    """What the step's ranks were seen opening under input ``port`` (``{count, digest,
    files}``), or None when it was not observed or nothing was seen there (the body may have
    read it through native code, which the audit hook does not see)."""
    found = _recorded(session, step, "opened_inputs")
    entry = found.get(port) if isinstance(found, dict) else None
    return entry if isinstance(entry, dict) and entry.get("count") else None


def _id_overlap(ev_step: dict[str, Any], train: dict[str, Any], ev_ids: dict[str, Any],
                tr_ids: dict[str, Any]) -> list[dict[str, Any]]:
    where = (f"the evaluation in step {ev_step['step']!r} consumed", f"step {train['step']!r} "
             f"trained on")
    hint = ("evaluate on examples training never consumes: take the evaluation ids from a "
            "recorded split manifest's held-out split")
    if ev_ids["digest"] == tr_ids["digest"]:
        return [_finding(EVALUATION_OVERLAPS_TRAINING,
                         f"{where[0]} the same {ev_ids['count']} examples {where[1]} (ids "
                         f"{ev_ids['digest']}), whatever its population is called", hint,
                         step=ev_step["step"])]
    if ev_ids.get("ids") is None or tr_ids.get("ids") is None:
        return []
    shared = sorted(set(ev_ids["ids"]) & set(tr_ids["ids"]))
    if not shared:
        return []
    shown = ", ".join(repr(i) for i in shared[:3]) + (
        f" and {len(shared) - 3} more" if len(shared) > 3 else "")
    return [_finding(EVALUATION_OVERLAPS_TRAINING,
                     f"{where[0]} {len(shared)} of its {ev_ids['count']} examples that "
                     f"{where[1]} ({shown}), whatever its population is called", hint,
                     step=ev_step["step"])]


def _content_overlap(p: dict[str, Any], ev_step: dict[str, Any], train: dict[str, Any],
                     specs: dict[str, dict[str, Any] | None], session: Any = None
                     ) -> tuple[list[dict[str, Any]], bool]:
    """An evaluation fed an artifact of examples training read too (the same digest), where
    neither step was given anything that picks different rows from it: judged by the files
    each step was seen opening under it (the same files: MP702; disjoint ones: clean), and
    where that was not observed, said as what it is, an inference (MP417). Also returns
    whether the opened files settled every shared artifact."""
    ev_spec = specs.get(ev_step["component"]["spec_digest"])
    tr_spec = specs.get(train["component"]["spec_digest"])
    if ev_spec is None or tr_spec is None:
        return [], False
    if _selects_rows(ev_step, ev_spec) or _selects_rows(train, tr_spec):
        return [], False
    model = p["candidate"]["model"]
    trained = {i["digest"]: i["port"] for i in train["inputs"]
               if i["port"] in _example_ports(tr_spec)}
    found = []
    settled = False
    for inp in ev_step["inputs"]:
        if inp["digest"] == model or inp["port"] not in _example_ports(ev_spec) \
                or is_reference(inp["digest"]):
            continue   # a model; no examples; a reference to remote bytes names no content
        if inp["digest"] not in trained:
            continue
        tport = trained[inp["digest"]]
        ev_open, tr_open = _opened(session, ev_step, inp["port"]), _opened(session, train, tport)
        same = (f"the evaluation in step {ev_step['step']!r} read input {inp['port']!r} "
                f"with the same content as {train['step']!r}'s training input {tport!r} "
                f"({inp['digest']})")
        hint = ("feed the evaluation a held-out artifact (the test split of a recorded split "
                "manifest), not the training data")
        if ev_open is None or tr_open is None:
            found.append(_finding(
                EVALUATION_OVERLAP_UNCHECKED,
                f"{same}, and neither step was given a split manifest or a split to pick "
                f"different rows; which files of it {'each' if ev_open is tr_open else 'one'} "
                f"opened was not observed, so whether it evaluates on the training examples "
                f"cannot be told", f"{hint}; or let the runtime observe the opens (Python "
                "file reads, MLPIPE_OBSERVE not 0) so the record shows which part each read",
                step=ev_step["step"]))
            continue
        settled = True
        if ev_open["digest"] == tr_open["digest"]:
            found.append(_finding(
                EVALUATION_OVERLAPS_TRAINING,
                f"{same} and opened the same {ev_open['count']} file(s) of it that training "
                f"opened: it evaluates on the training examples, whatever its population is "
                f"called", hint, step=ev_step["step"]))
            continue
        if ev_open.get("files") is None or tr_open.get("files") is None:
            found.append(_finding(
                EVALUATION_OVERLAP_UNCHECKED,
                f"{same}; the two opened different sets of its files, too many to compare "
                f"one by one", hint, step=ev_step["step"]))
            continue
        shared = sorted(set(ev_open["files"]) & set(tr_open["files"]))
        if shared:
            shown = ", ".join(repr(f) for f in shared[:3]) + (
                f" and {len(shared) - 3} more" if len(shared) > 3 else "")
            found.append(_finding(
                EVALUATION_OVERLAPS_TRAINING,
                f"{same} and opened {len(shared)} of its {ev_open['count']} file(s) there "
                f"that training opened too ({shown}): it evaluates on training examples",
                hint, step=ev_step["step"]))
    return found, settled


def _rows_overlap(p: dict[str, Any], session: Any, ev_step: dict[str, Any]
                  ) -> list[dict[str, Any]]:
    """MP702 from the rows per split the runtime counted in the evaluation's split-declaring
    tables, against the examples it says it evaluated (``evidence.evaluatedrows``)."""
    from mlpipe.evidence.records.evaluatedrows import training_rows_evaluated

    ev = p["evaluation"]
    report = ev["report"] or {}
    populations = ([x["population"] for x in ev["metrics"]] + [report.get("population")]
                   + [x.get("population") for x in report.get("metrics", [])])
    return [_finding(EVALUATION_OVERLAPS_TRAINING, message, hint, step=ev["step"])
            for message, hint in training_rows_evaluated(
                ev["step"], _recorded(session, ev_step, "inputs"), populations)]


def _part_name(port: str) -> str:
    return port.lower().split("_")[0]


def _snapshot_parts(p: dict[str, Any], session: Any, ev_step: dict[str, Any],
                    train: dict[str, Any]) -> bool:
    """Whether the evaluation and training read two outputs of one step (``train``,
    ``test``) that was seen opening files of one input only in folders of those very names
    (``train/...``, ``test/...``): it copied the parts the snapshot already holds, which are
    apart by their folders, as MP414 reads the same step's source."""
    producers = {out["digest"]: (st, out["port"]) for st in p["steps"]
                 for out in st["outputs"]}
    ev_from = [producers.get(i["digest"]) for i in ev_step["inputs"]]
    tr_from = [producers.get(i["digest"]) for i in train["inputs"]]
    for made in (e for e in ev_from if e is not None):
        for fed in (t for t in tr_from if t is not None):
            if made[0] is not fed[0] or _part_name(made[1]) == _part_name(fed[1]):
                continue
            opened = _recorded(session, made[0], "opened_inputs")
            wanted = {_part_name(made[1]), _part_name(fed[1])}
            for entry in (opened or {}).values():
                files = entry.get("files") if isinstance(entry, dict) else None
                if files and {str(f).split("/")[0] for f in files} == wanted:
                    return True
    return False


def _overlap(p: dict[str, Any], session: Any = None) -> list[dict[str, Any]]:
    """MP702 from the examples' ids, the artifacts' content and the populations' names;
    MP417 when none of them can tell."""
    train = next((st for st in p["steps"] if st["step"] == p["training"]["step"]), None)
    ev = p["evaluation"]
    if train is None or ev["step"] is None:
        return []
    ev_step = next((st for st in p["steps"] if st["step"] == ev["step"]), None)
    if ev_step is None or ev_step is train:
        return []
    found = _population_overlap(p, train) or _rows_overlap(p, session, ev_step)
    ev_ids, tr_ids = _ids(session, ev_step), _ids(session, train)
    if ev_ids and tr_ids and not found:
        found = _id_overlap(ev_step, train, ev_ids, tr_ids)
    settled = False
    if not found:
        found, settled = _content_overlap(p, ev_step, train, _specs(session, [ev_step, train]),
                                          session)
    named = _names([x["population"] for x in train["metrics"]])
    recorded = train.get("step_record") is True and ev_step.get("step_record") is True
    if not found and not named and not (ev_ids and tr_ids) and not settled and recorded \
            and not _snapshot_parts(p, session, ev_step, train):
        # (a step without a step record is already shown as unknown, not absent)
        found.append(_finding(
            EVALUATION_OVERLAP_UNCHECKED,
            f"whether the evaluation in step {ev['step']!r} overlaps what step "
            f"{train['step']!r} trained on cannot be told: training logged no metric naming "
            f"its population, and the two steps did not both record the example ids they "
            f"consumed", "log a training metric with population=... (log_metric(..., "
            "population='train, N examples')), or record the ids both steps consume with "
            "mlpipe.runtime.record_consumed(ids)", step=ev["step"]))
    return found


def _global_metrics(p: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for st in p["steps"]:
        world = _world_size(st["topology"])
        if world <= 1:
            continue
        rows: dict[str, list[dict[str, Any]]] = {}
        for x in st["metrics"]:
            if x["scope"] == "global":
                rows.setdefault(x["name"], []).append(x)
        for name, logged in sorted(rows.items()):
            ranks = sorted({x["rank"] for x in logged if x["rank"] is not None})
            reduced = [x["reduced_over"] for x in logged if x["reduced_over"] is not None]
            who = (f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
                   if ranks else "one process")
            if not reduced:
                message = (f"metric {name!r} of step {st['step']!r} is labelled global but was "
                           f"logged by {who} of a world of {world} without aggregation: "
                           f"{'each value is' if len(logged) > 1 else 'it is'} one worker's "
                           f"partial view")
            elif min(reduced) < world:
                message = (f"metric {name!r} of step {st['step']!r} is labelled global but was "
                           f"aggregated over {min(reduced)} of {world} ranks")
            else:
                continue
            found.append(_finding(GLOBAL_METRIC_FROM_TOO_FEW_RANKS, message,
                                  "log it with mlpipe.runtime.all_reduce_metric(...) on every "
                                  "rank, or with scope='partial'", step=st["step"]))
    return found


def _reuse(p: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for st in p["steps"]:
        reused = st["reused_from"]
        if reused is None or reused["executed_step_run"] is not None:
            continue
        training = st["step"] == p["training"]["step"]
        found.append(_finding(
            REUSED_WITHOUT_EXECUTED_ORIGIN,
            f"{'training ' if training else ''}step {st['step']!r} was "
            f"reused from step run {reused['step_run']}, but no executed run of it is in this "
            f"store: nothing shows how its outputs were made",
            "re-run the step here (mlpipe submit --no-reuse), or sync the store that executed it",
            step=st["step"], severity=None if training else Severity.WARNING))
    return found


def _content(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The candidate's model and evaluation report where only a reference to their bytes is
    known (an Azure ML output whose step left no step record): nothing names the bytes."""
    artifacts = {a["digest"]: a for a in p["artifacts"]}
    producer = {o["digest"]: (st["step"], o["port"]) for st in p["steps"] for o in st["outputs"]}
    found = []
    for what, digest in (("model", p["candidate"]["model"]),
                         ("evaluation report", p["candidate"]["evaluation"])):
        art = artifacts.get(digest or "")
        if art is None or not is_reference(digest):
            continue
        step, port = producer.get(digest, (None, None))
        found.append(_finding(
            CONTENT_UNKNOWN,
            f"the candidate's {what}{f' ({step}.{port})' if step else ''} has no content "
            f"digest: only where it is was recorded ({art['location']}), so nothing in this "
            f"bundle names the bytes a reviewer would approve"
            + ("" if what == "model" else " or the metrics read from them"),
            "produce it with an mlpipe function component (its step runtime records the "
            "digests of its outputs, which `mlpipe sync` reads), then sync the run again",
            step=step))
    return found


def _unknown_facts(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Synced Azure ML steps with facts recorded as unknown (``topology.unknown``: fact ->
    why): a completed step with no step record is never a clean bundle."""
    found = []
    for st in p["steps"]:
        unknown = (st["topology"] or {}).get("unknown") if isinstance(st["topology"],
                                                                      dict) else None
        if not unknown:
            continue
        names = sorted(unknown)
        what = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        why = "; ".join(f"{fact}: {unknown[fact]}" for fact in names)
        found.append(_finding(
            STEP_FACTS_UNKNOWN,
            f"step {st['step']!r} ran on Azure ML, but its {what} "
            f"{'is' if len(names) == 1 else 'are'} unknown ({why})",
            "sync the run again once Azure ML answers; a step record that is missing needs a "
            "function component in an environment with mlpipe installed (MP859)",
            step=st["step"]))
    return found


def _hidden_inputs(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Steps whose body read files outside their declared inputs without declaring them: what
    made the candidate depends on content no input digest names."""
    found = []
    for st in p["steps"]:
        undeclared = [e for e in st.get("hidden_inputs") or [] if not e.get("declared")]
        if not undeclared:
            continue
        shown = ", ".join(f"{e['path']!r} ({e['digest'] or 'content not recorded'})"
                          for e in undeclared[:3])
        more = f" and {len(undeclared) - 3} more" if len(undeclared) > 3 else ""
        found.append(_finding(
            READ_OUTSIDE_INPUTS,
            f"step {st['step']!r} read {len(undeclared)} file(s) outside its declared inputs: "
            f"{shown}{more}", "declare what it reads as an Input of the component, or, for a "
            "source that never changes under its path, declare it with @component(reads=[...])",
            step=st["step"]))
    return found


def _provenance(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Files the pipeline loaded that the recorded commit does not hold as they ran."""
    code = p.get("code") or {}
    loose = [f for f in code.get("files") or [] if f.get("state") != "committed"]
    if not loose:
        return []
    shown = ", ".join(f"{f['path']} ({f['state']})" for f in loose[:5])
    more = f" and {len(loose) - 5} more" if len(loose) > 5 else ""
    return [_finding(CODE_NOT_COMMITTED,
                     f"{len(loose)} of the {len(code['files'])} files the pipeline loaded "
                     f"{'is' if len(loose) == 1 else 'are'} not in commit "
                     f"{(code.get('commit') or '')[:12]} as they ran: {shown}{more}; checking "
                     f"out the commit does not give the code that made this candidate",
                     "commit them (git add, git commit) and run the pipeline again; reuse "
                     "makes that cheap")]


def find(_session: Any, predicate: dict[str, Any]) -> list[dict[str, Any]]:
    """Every finding about the candidate the predicate describes, most severe first.

    Args:
        _session: the open session (the components' declarations and the example ids the
            steps consumed are read from it); None judges the predicate alone.
        predicate: the bundle predicate without its findings.

    Returns:
        ``{"code", "name", "severity", "step", "message", "hint"}`` dicts.
    """
    found = (_content(predicate) + _evaluation(predicate) + _overlap(predicate, _session)
             + _global_metrics(predicate) + _reuse(predicate) + _hidden_inputs(predicate)
             + _provenance(predicate) + _unknown_facts(predicate))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(found, key=lambda f: (order[f["severity"]], f["code"], f["step"] or ""))


def _labelled(f: Any, source: str, run: Any) -> dict[str, Any] | None:
    if not isinstance(f, dict) or f.get("severity") not in _ORDER:
        return None
    return {"code": f.get("code"), "name": f.get("name"), "severity": f["severity"],
            "step": f.get("step"), "message": f.get("message"), "hint": f.get("hint"),
            "source": source, "run": run}


def own_findings(predicate: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings about the predicate's own run: its compile-time diagnostics, its
    coordination checks' findings and its evidence findings, each labelled (``source``,
    ``run``), most severe first. Old bundles lacking a part simply have none of it."""
    run = (predicate.get("run") or {}).get("id")
    found: list[dict[str, Any] | None] = []
    checks = predicate.get("checks") or {}
    for part in ("error_results", "warnings", "info"):
        found += [_labelled(d, COMPILE_TIME, run) for d in checks.get(part) or []]
    for co in predicate.get("coordination") or []:
        if isinstance(co, dict):
            found += [_labelled({**f, "step": f.get("step") or co.get("step")}, RUN_TIME, run)
                      for f in co.get("findings") or [] if isinstance(f, dict)]
    found += [_labelled(f, EVIDENCE, run) for f in predicate.get("findings") or []]
    return sorted((f for f in found if f is not None), key=_key)


def every_finding(predicate: dict[str, Any]) -> list[dict[str, Any]]:
    """Every finding a reviewer must weigh about the candidate: its own run's
    (``own_findings``) and, after them, those of each other run that produced the same
    candidate (``productions[].findings``, judged when the bundle was built), so that a
    finding of one production is never hidden behind another's clean bundle. A production's
    finding that says exactly what one listed before it says is listed once.

    Returns:
        ``{"code", "name", "severity", "step", "message", "hint", "source", "run"}`` dicts:
        ``source`` is ``compile-time``, ``run-time`` or ``evidence``; ``run`` the run the
        finding is about.

    Example:
        >>> [(f["code"], f["source"]) for f in every_finding(bundle["predicate"])]
        [('MP416', 'compile-time')]
    """
    found = own_findings(predicate)
    seen = {_same(f) for f in found}
    for prod in predicate.get("productions") or []:
        if not isinstance(prod, dict):
            continue
        for x in prod.get("findings") or []:
            f = _labelled(x, x.get("source") or EVIDENCE, prod.get("run")) \
                if isinstance(x, dict) else None
            if f is not None and _same(f) not in seen:   # the same finding, said once
                seen.add(_same(f))
                found.append(f)
    return found


def _same(f: dict[str, Any]) -> tuple:
    return (f["source"], f["code"], f["step"], f["message"])


def severities(findings: list[dict[str, Any]]) -> dict[str, int]:
    """``{"error", "warning", "info"}`` counts of ``findings``."""
    counts = {"error": 0, "warning": 0, "info": 0}
    for f in findings:
        counts[f["severity"]] += 1
    return counts


def where_from(f: dict[str, Any], run: str | None) -> str:
    """How a screen labels a finding's origin: ``compile-time``, ``run-time`` or ``evidence``,
    with ``, run R`` when it is about another production than ``run`` (the bundle's own)."""
    return f["source"] + (f", run {f['run']}" if f.get("run") != run else "")


def _key(f: dict[str, Any]) -> tuple:
    return (_ORDER[f["severity"]], _SOURCES.get(f["source"], 3), str(f["code"]),
            str(f["step"] or ""))
