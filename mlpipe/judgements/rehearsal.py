"""Judging a differential rehearsal: the same step, data and seed at world size 1 and at its
launched topology, compared on what a coordinated data-parallel implementation keeps equal
(MP560-MP565, docs/checks.md; when it runs and what it sees: docs/distributed.md).

Pure: reads the two runs as plain JSON (``backends/local/rehearsal.RehearsalRun.facts``: each
run's step record and each rank's rehearsal probe) and never raises on a missing fact; a fact
one run did not observe is listed as unseen, and nothing is concluded from it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mlpipe.codes import (
    REHEARSAL_EXAMPLES_DIFFER,
    REHEARSAL_GLOBAL_BATCH_DIFFERS,
    REHEARSAL_LOSS_DIVERGES,
    REHEARSAL_METRIC_DIFFERS,
    REHEARSAL_PARAMETERS_DIFFER,
    REHEARSAL_RUN_FAILED,
)
from mlpipe.diagnostics import Code, Diagnostic

#: The relative difference two runs may show in examples, batch, loss and metric values.
TOLERANCE = 0.1
#: Most windows a loss trajectory is compared in (each the mean of its steps).
WINDOWS = 10


@dataclass
class Judgement:
    """What the rehearsal found: the diagnostics, each with the rank facts that explain it,
    every fact compared, and the facts neither run let it see."""

    step: str
    world_size: int
    findings: list[tuple[Diagnostic, dict[str, Any]]] = field(default_factory=list)
    compared: list[dict[str, Any]] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [d for d, _ in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "world_size": self.world_size,
                "diagnostics": [{**d.to_json(), "facts": facts} for d, facts in self.findings],
                "compared": self.compared, "unseen": self.unseen}

    def _add(self, code: Code, message: str, hint: str, facts: dict[str, Any]) -> None:
        self.findings.append((Diagnostic.of(code, message, hint=hint, step=self.step), facts))

    def _row(self, fact: str, one: Any, many: Any, same: bool | None, note: str = "") -> None:
        self.compared.append({"fact": fact, "world_size_1": one,
                              f"world_size_{self.world_size}": many, "same": same,
                              "note": note})


def _probes(run: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Every rank's probe facts, or None unless every rank was observed."""
    found = [p for p in run.get("probe") or [] if isinstance(p, dict) and p.get("observed")]
    return found if found and len(found) == run.get("world_size") else None


def _ranks(run: dict[str, Any]) -> list[dict[str, Any]]:
    record = run.get("record") or {}
    return [r for r in record.get("ranks") or [] if isinstance(r, dict)]


def _far(a: float, b: float, tolerance: float, floor: float = 0.0) -> bool:
    return abs(a - b) > tolerance * max(abs(a), abs(b)) + floor


def _fmt(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _failed(j: Judgement, one: dict[str, Any], many: dict[str, Any]) -> bool:
    for run, other in ((one, many), (many, one)):
        step = (run.get("record") or {}).get("step") or {}
        why = run.get("failure") or ((step.get("failure") or {}).get("message")
                                     if step.get("status") == "failed" else None)
        if why is None:
            continue
        ran = "fails at both sizes" if (other.get("failure") or (
            ((other.get("record") or {}).get("step") or {}).get("status") == "failed")) \
            else f"runs at world size {other['world_size']}"
        first = str(why).strip().splitlines()[0] if str(why).strip() else "no message"
        j._add(REHEARSAL_RUN_FAILED,
               f"the step failed at world size {run['world_size']} ({ran}): {first}",
               f"read the ranks' logs under {run.get('folder') or 'the rehearsal folder'}/logs",
               {"world_size": run["world_size"], "failure": why,
                "coordination": run.get("coordination") or []})
    return bool(j.findings)


def _rank_story(many: dict[str, Any]) -> dict[str, Any]:
    """The step record's coordination facts of each rank: what explains a difference."""
    story: dict[str, Any] = {}
    for part in _ranks(many):
        loaders = part.get("data_loaders")
        story[str(part.get("rank"))] = {
            "consumed": len(part["consumed"]) if isinstance(part.get("consumed"), list) else None,
            "population": (len(part["population"])
                           if isinstance(part.get("population"), list) else None),
            "loaders": None if loaders is None else [
                {k: ld.get(k) for k in ("sampler", "num_replicas", "dataset_size", "total_size",
                                        "whole", "passes")} for ld in loaders],
            "reductions": [{k: r.get(k) for k in ("name", "op", "local", "value", "examples")}
                           for r in part.get("reductions") or []],
            # the richer per-rank trace, when the runtime recorded one; absent is unknown
            "trace": part.get("trace"),
        }
    return story


def _because(story: dict[str, Any]) -> str:
    """What the ranks' records say about how the data was divided, as a clause (or "")."""
    ranks = list(story.values())
    whole = [r for r in ranks if any(ld.get("whole") for ld in r.get("loaders") or [])]
    if ranks and len(whole) == len(ranks):
        samplers = sorted({str(ld.get("sampler")) for r in whole for ld in r["loaders"]
                           if ld.get("whole")})
        return f"; every rank's DataLoader reads the whole data set ({', '.join(samplers)})"
    took = [(r.get("consumed"), r.get("population")) for r in ranks]
    if took and all(c and p for c, p in took) and all(c == p for c, p in took):
        return f"; every rank consumed all {took[0][1]} ids of the data set"
    return ""


def _examples(j: Judgement, one: dict[str, Any], many: dict[str, Any], tol: float) -> None:
    p1, pn = _probes(one), _probes(many)
    e1 = sum(p.get("examples") or 0 for p in p1) if p1 else 0
    en = [p.get("examples") or 0 for p in pn] if pn else []
    source = "training forwards"
    if not (e1 and en and all(en)):
        c1 = [len(r.get("consumed") or []) for r in _ranks(one)]
        cn = [len(r.get("consumed") or []) for r in _ranks(many)]
        if sum(c1) and cn and all(cn) and len(cn) == many["world_size"]:
            e1, en, source = sum(c1), cn, "ids consumed (shard, record_consumed)"
        else:
            j.unseen.append("examples seen: no training forward observed and no ids consumed")
            return
    total = sum(en)
    same = not _far(total, e1, tol)
    j._row("examples seen over the run", e1, total, same, source)
    if same:
        return
    k = j.world_size
    per = ", ".join(f"rank {i}: {n}" for i, n in enumerate(en))
    cause = ("each rank trained on the whole data set" if total >= k * e1 * (1 - tol)
             else "the ranks' parts do not add up to the data set")
    j._add(REHEARSAL_EXAMPLES_DIFFER,
           f"at world size {k} the ranks trained on {total} examples together ({per}) but one "
           f"process trains on {e1} ({source}): {cause}{_because(_rank_story(many))}",
           "give each rank its own part of the data (DistributedSampler, or "
           "mlpipe.runtime.shard) so that the parts together are the data set once",
           {"source": source, "world_size_1": e1, "per_rank": en,
            "coordination": many.get("coordination") or [], "ranks": _rank_story(many)})


def _batch(j: Judgement, one: dict[str, Any], many: dict[str, Any], tol: float) -> None:
    p1, pn = _probes(one), _probes(many)
    if not p1 or not pn or p1[0].get("batch") is None or any(p.get("batch") is None
                                                              for p in pn):
        j.unseen.append("global batch: no optimiser step after a training forward observed")
        return
    b1, per = int(p1[0]["batch"]), [int(p["batch"]) for p in pn]
    bn = sum(per)
    lr1, lrn = (p1[0].get("lr") or [None])[0], (pn[0].get("lr") or [None])[0]
    steps = {"world_size_1": p1[0].get("steps"), "per_rank": [p.get("steps") for p in pn]}
    ratio = bn / b1 if b1 else math.inf
    scaled = bool(lr1 and lrn and abs(lrn / lr1 - ratio) <= 0.01 * ratio)
    same = not _far(bn, b1, tol)
    j._row("global batch", b1, bn, same or scaled,
           "the learning rate scaled with it" if scaled and not same else "")
    j._row("learning rate", lr1, lrn, None if lr1 is None or lrn is None
           else not _far(lr1, lrn, 1e-9))
    if same or scaled:
        return
    k = j.world_size
    j._add(REHEARSAL_GLOBAL_BATCH_DIFFERS,
           f"at world size {k} each optimiser step takes {bn} examples "
           f"({' + '.join(map(str, per))} on the ranks) but {b1} at world size 1, with the "
           f"learning rate {_fmt(lrn)} against {_fmt(lr1)}: {steps['per_rank'][0]} steps "
           f"per rank against {steps['world_size_1']}",
           "divide the global batch among the ranks (batch = global_batch // world_size()), "
           "or scale the learning rate with the global batch",
           {"batch": {"world_size_1": b1, "per_rank": per}, "lr": [lr1, lrn], "steps": steps})


def _windows(series: Sequence[float], count: int) -> list[tuple[float, float]]:
    """Each window's mean and its standard error (the steps' spread in it)."""
    out = []
    for i in range(count):
        lo, hi = len(series) * i // count, max(len(series) * (i + 1) // count,
                                               len(series) * i // count + 1)
        part = series[lo:hi]
        mean = sum(part) / len(part)
        spread = (sum((x - mean) ** 2 for x in part) / max(1, len(part) - 1)) ** 0.5
        out.append((mean, spread / len(part) ** 0.5))
    return out


def _mean_by_step(probes: list[dict[str, Any]]) -> list[float]:
    runs = [p.get("losses") or [] for p in probes]
    n = min(len(r) for r in runs)
    return [sum(r[i] for r in runs) / len(runs) for i in range(n)]


def _loss(j: Judgement, one: dict[str, Any], many: dict[str, Any], tol: float) -> None:
    p1, pn = _probes(one), _probes(many)
    s1 = (p1[0].get("losses") or []) if p1 else []
    sn = _mean_by_step(pn) if pn else []
    if not s1 or not sn:
        j.unseen.append("loss trajectory: no scalar backward observed")
        return
    count = max(1, min(WINDOWS, len(s1) // 3, len(sn) // 3))
    e1, en = _windows(s1, count), _windows(sn, count)
    w1, wn = [m for m, _ in e1], [m for m, _ in en]
    # two runs on other orders of the same data differ by noise: a window differs only by more
    # than the tolerance of its loss and of the loss the run started from (a converged loss
    # near 0 is no scale), and twice the standard error of the difference of its means
    start = max(abs(w1[0]), abs(wn[0]))
    off = [i for i in range(count)
           if _far(w1[i], wn[i], tol, tol * start + 2 * math.hypot(e1[i][1], en[i][1]))]
    diverges = bool(off) and (len(off) * 3 > count or off[-1] == count - 1)
    j._row("loss trajectory (window means)", [round(x, 4) for x in w1],
           [round(x, 4) for x in wn], not diverges, f"{count} windows, tolerance {tol:g}")
    if not diverges:
        return
    i = off[0]
    j._add(REHEARSAL_LOSS_DIVERGES,
           f"over {100 * i // count}-{100 * (i + 1) // count}% of the run the training loss "
           f"is {wn[i]:.4g} at world size {j.world_size} (the ranks' mean) but {w1[i]:.4g} at "
           f"world size 1, beyond the tolerance {tol:g} in {len(off)} of {count} windows",
           "compare what each rank trains on and how the gradients are combined (the other "
           "rehearsal findings name the cause when they see it); the same data and seed should "
           "give the same loss curve at any world size",
           {"windows": {"world_size_1": w1, f"world_size_{j.world_size}": wn},
            "per_rank_final": [(p.get("losses") or [None])[-1] for p in pn or []]})


def _global_lines(run: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for part in _ranks(run):
        for line in part.get("metrics") or []:
            if isinstance(line, dict) and line.get("scope") == "global":
                found.setdefault(str(line.get("name")), []).append(line)
    return found


def _metrics(j: Judgement, one: dict[str, Any], many: dict[str, Any], tol: float) -> None:
    g1, gn = _global_lines(one), _global_lines(many)
    if not g1 and not gn:
        j.unseen.append("metrics: no global metric logged")
        return
    story = _rank_story(many)
    for name in sorted(set(g1) | set(gn)):
        a, b = g1.get(name, []), gn.get(name, [])
        if not a or not b:
            j._row(f"metric {name!r}", len(a) or None, len(b) or None, False, "logged by one run")
            j._add(REHEARSAL_METRIC_DIFFERS,
                   f"global metric {name!r} is logged at world size "
                   f"{1 if a else j.world_size} only",
                   "log each global metric once per step at every world size (rank 0 logs "
                   "what all_reduce_metric reduced)", {"name": name, "ranks": story})
            continue
        values = [(x["value"], y["value"]) for x, y in zip(a, b)]
        k = j.world_size
        # a value k times (or 1/k of) world size 1's is a sum over the ranks, or one rank's
        # share, logged as the global value; other differences follow the training's noise
        off = next((i for i, (x, y) in enumerate(values)
                    if x and _far(x, y, tol) and (not _far(y / x, k, tol)
                                                   or not _far(y / x, 1 / k, tol))), None)
        pop1, popn = a[-1].get("population"), b[-1].get("population")
        over = b[-1].get("reduced_over")
        j._row(f"metric {name!r}", a[-1]["value"], b[-1]["value"], off is None and pop1 == popn,
               f"population {pop1!r} / {popn!r}")
        if off is not None:
            x, y = values[off]
            what = "a sum over the ranks" if y / x > 1 else "one rank's share"
            j._add(REHEARSAL_METRIC_DIFFERS,
                   f"global metric {name!r} (value {off + 1} of {len(values)}) is {y:.4g} at "
                   f"world size {k} but {x:.4g} at world size 1, {y / x:.3g} times it: "
                   f"{what} logged as the global value",
                   "reduce it so that it describes the whole population at any world size "
                   "(a mean of per-rank means weighted by their examples, not a sum)",
                   {"name": name, "values": values, "reduced_over": over, "ranks": story})
        elif pop1 != popn or (over is not None and over != k):
            j._add(REHEARSAL_METRIC_DIFFERS,
                   f"global metric {name!r} describes population {popn!r} at world size "
                   f"{k} (reduced over {over if over is not None else 'no'} ranks) "
                   f"but {pop1!r} at world size 1",
                   "state the whole population the reduced value describes, the same at any "
                   "world size", {"name": name, "reduced_over": over, "ranks": story})


def _parameters(j: Judgement, many: dict[str, Any]) -> None:
    pn = _probes(many)
    params = [p.get("parameters") for p in pn or []]
    if not pn or any(not isinstance(x, dict) for x in params):
        j.unseen.append("parameters: no optimiser step observed on every rank")
        return
    digests = [x["digest"] for x in params]  # type: ignore[index]
    same = len(set(digests)) == 1
    j._row("trained parameters equal across ranks", None, same, same)
    if same:
        return
    odd = next(i for i, d in enumerate(digests) if d != digests[0])
    models = {str(p.get("rank")): p.get("models") for p in pn}
    plain = [r for r, m in models.items() if m and "DistributedDataParallel" not in m]
    why = (f"; rank{'s' if len(plain) > 1 else ''} {', '.join(plain)} trained a model no "
           f"DistributedDataParallel wraps" if plain else "")
    norms = ", ".join(f"rank {p.get('rank')}: {x['norm']:.6g}"  # type: ignore[index]
                      for p, x in zip(pn, params))
    j._add(REHEARSAL_PARAMETERS_DIFFER,
           f"at world size {j.world_size} rank {odd} ends with other trained parameters than "
           f"rank 0 (norms {norms}){why}",
           "wrap the model in DistributedDataParallel on every rank and give every rank the "
           "same initial weights (the same seed, not one per rank)",
           {"digests": digests, "models": models})


def judge(one: dict[str, Any], many: dict[str, Any], *, step: str,
          tolerance: float = TOLERANCE) -> Judgement:
    """Compare a step's run at world size 1 (``one``) with its run at its topology (``many``).

    Args:
        one: ``RehearsalRun.facts()`` of the world-size-1 run.
        many: the same of the distributed run.
        step: the step's name, for the diagnostics.
        tolerance: the relative difference allowed in examples, batch, loss and metrics.

    Returns:
        The judgement: diagnostics MP560-MP565 with their rank facts, every fact compared,
        and what could not be seen.

    Example:
        >>> judge(one.facts(), many.facts(), step="train").diagnostics
        []
    """
    j = Judgement(step, int(many.get("world_size") or 0))
    if _failed(j, one, many):
        return j
    comparisons = (("examples seen", lambda: _examples(j, one, many, tolerance)),
                   ("global batch", lambda: _batch(j, one, many, tolerance)),
                   ("loss trajectory", lambda: _loss(j, one, many, tolerance)),
                   ("metrics", lambda: _metrics(j, one, many, tolerance)),
                   ("parameters", lambda: _parameters(j, many)))
    for what, compare in comparisons:
        try:
            compare()
        except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
            # a rank's facts in another shape than the probe writes: unseen, never a crash
            j.unseen.append(f"{what}: the ranks' facts could not be read "
                            f"({type(exc).__name__}: {exc})")
    return j
