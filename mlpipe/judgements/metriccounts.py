"""After a distributed step: does each global metric count the split's examples once each?
Two ways a reduction that looks coordinated miscounts (MP534), seen in the ranks' records: a
plain mean of per-rank means over parts of unequal size, and a population that counts the
examples a ``DistributedSampler`` repeated to pad the ranks' parts to one size. Reads the
records it is given; never raises for what it finds.
"""
from __future__ import annotations

import re
from typing import Any

from mlpipe.codes import GLOBAL_METRIC_MISCOUNTED
from mlpipe.diagnostics import Diagnostic

_TRAINING = {"train", "training"}
_COUNT = re.compile(r"(\d+)\s+(?:examples?|rows?|samples?|images?|records?)\b", re.I)
#: Relative difference under which a plain and a weighted mean are the same figure (they
#: agree to the three significant digits a report shows).
_SAME = 1e-3


def _split(population: Any) -> str | None:
    if not isinstance(population, str) or not population.strip():
        return None
    return population.split(",", 1)[0].strip().lower() or None


def _count(population: Any) -> int | None:
    m = _COUNT.search(population) if isinstance(population, str) else None
    return int(m.group(1)) if m else None


def _rounds(records: dict[int, dict[str, Any]]) -> dict[tuple[str, int], dict[int, dict]]:
    """(metric, k) -> rank -> that rank's k-th reduction of the metric."""
    found: dict[tuple[str, int], dict[int, dict]] = {}
    for r, rec in records.items():
        seen: dict[str, int] = {}
        for red in rec.get("reductions") or []:
            name = red.get("name") if isinstance(red, dict) else None
            if not isinstance(name, str):
                continue   # a record written by hand or cut short: nothing to pair
            k = seen[name] = seen.get(name, -1) + 1
            found.setdefault((name, k), {})[r] = red
    return found


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def unweighted_means(records: dict[int, dict[str, Any]], world_size: int,
                     where: dict[str, Any]) -> list[Diagnostic]:
    """MP534 for each metric reduced as a plain mean of the ranks' means where every rank
    recorded its value and its part's size, the parts differ in size, and the plain mean is
    not the mean over the examples (a training split's monitoring value is not judged)."""
    findings: list[Diagnostic] = []
    named: set[str] = set()
    for (name, _), ranks in sorted(_rounds(records).items()):
        if name in named or len(ranks) < world_size or world_size < 2:
            continue
        reds = [ranks[r] for r in sorted(ranks)]
        if any(x.get("op") != "mean" or not isinstance(x.get("local"), (int, float))
               or not isinstance(x.get("examples"), int) or x["examples"] <= 0 for x in reds):
            continue
        if _split(reds[0].get("population")) in _TRAINING:
            continue
        sizes = [x["examples"] for x in reds]
        if len(set(sizes)) == 1:
            continue
        plain = sum(x["local"] for x in reds) / len(reds)
        weighted = sum(x["local"] * x["examples"] for x in reds) / sum(sizes)
        if abs(plain - weighted) <= _SAME * max(abs(weighted), 1e-12):
            continue
        named.add(name)
        findings.append(Diagnostic.of(
            GLOBAL_METRIC_MISCOUNTED,
            f"metric {name!r} was reduced as a plain mean of {len(reds)} ranks' means "
            f"({', '.join(_fmt(x['local']) for x in reds)}) over parts of unequal size "
            f"({', '.join(map(str, sizes))} examples): {_fmt(plain)}, where the mean over "
            f"all {sum(sizes)} examples is {_fmt(weighted)}",
            hint=f"reduce the sum and the count instead: all_reduce_metric({name!r}, "
                 f"local_mean * n, op='sum') divided by all_reduce_metric('n', n, op='sum'), "
                 f"or give every rank a part of one size", **where))
    return findings


def _padded(records: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The first DistributedSampler that padded its data set (its total > the data set's
    size, ``drop_last`` off), as one rank's record describes it."""
    for r in sorted(records):
        for x in records[r].get("data_loaders") or []:
            size, total = x.get("dataset_size"), x.get("total_size")
            if isinstance(size, int) and isinstance(total, int) and total > size \
                    and x.get("drop_last") is False and (x.get("num_replicas") or 0) > 1:
                return x
    return None


def padded_population(records: dict[int, dict[str, Any]], world_size: int,
                      where: dict[str, Any]) -> list[Diagnostic]:
    """MP534 for each global metric whose stated population, or whose sum over the ranks, is
    the padded total of a DistributedSampler rather than its data set's size: examples the
    sampler repeated were counted twice."""
    loader = _padded(records) if world_size > 1 else None
    if loader is None:
        return []
    size, total = loader["dataset_size"], loader["total_size"]
    findings: list[Diagnostic] = []
    said: set[str] = set()
    lines = [x for rec in records.values() for x in rec.get("metrics") or []
             if isinstance(x, dict) and x.get("scope") == "global"]
    counted = [(str(x.get("name")), f"population {x.get('population')!r}") for x in lines
               if _count(x.get("population")) == total]
    counted += [(str(x.get("name")), f"sum over the ranks {_fmt(total)}")
                for rec in records.values() for x in rec.get("reductions") or []
                if isinstance(x, dict) and x.get("op") == "sum" and x.get("value") == total]
    for name, how in counted:
        if name in said:
            continue
        said.add(name)
        findings.append(Diagnostic.of(
            GLOBAL_METRIC_MISCOUNTED,
            f"global metric {name!r} counts {total} examples ({how}), but the data set its "
            f"{loader.get('sampler')} dealt out holds {size}: the sampler padded "
            f"{loader.get('num_replicas')} ranks' parts to one size by repeating "
            f"{total - size} example{'s' if total - size != 1 else ''}, which the metric "
            f"counts twice",
            hint="count each example once: deal the ids out with mlpipe.runtime.shard (it "
                 "repeats none), or gather the per-example results and drop the repeated "
                 "ones, or evaluate on one rank", **where))
    return findings
