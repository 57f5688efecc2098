"""After a distributed step: what the rank-level trace shows (``trace`` in each rank's part of
the step record; docs/step-record.md). Judges what the ranks did, not how their source is
spelled: collectives called a different number of times (MP540), two ranks of a node on one GPU
(MP541), a rank hung in a collective, with every rank's place (MP542), one rank's work done by
every rank (MP543), and a DistributedSampler that dealt examples twice or to nobody (MP521,
MP523). Reads the records it is given; never raises for what it finds.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mlpipe.codes import (
    COLLECTIVE_MISMATCH,
    COVERAGE_GAP,
    EVERY_RANK_DOES_ONE_RANKS_WORK,
    RANK_HUNG_IN_COLLECTIVE,
    RANKS_SHARE_A_DEVICE,
    SHARD_OVERLAP,
)
from mlpipe.diagnostics import Diagnostic

_Key = TypeVar("_Key")


def _traces(records: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r: rec["trace"] for r, rec in records.items() if isinstance(rec.get("trace"), dict)}


def _every_ranks_traces(records: dict[int, dict[str, Any]],
                        world_size: int) -> dict[int, dict[str, Any]]:
    """Each rank's trace, when the step had several ranks and every one left its trace (else
    nothing: a judgement of what every rank did needs them all)."""
    traces = _traces(records)
    return traces if world_size >= 2 and len(traces) >= world_size else {}


def _first_entries(traces: dict[int, dict[str, Any]], section: str,
                   key_of: Callable[[dict[str, Any]], _Key | None]
                   ) -> dict[_Key, dict[int, dict[str, Any]]]:
    """``key -> {rank: entry}``: each rank's first entry of its trace's ``section`` under each
    key ``key_of`` gives it (an entry it gives None is passed over)."""
    found: dict[_Key, dict[int, dict[str, Any]]] = {}
    for r, trace in traces.items():
        for entry in trace.get(section) or []:
            key = key_of(entry)
            if key is not None:
                found.setdefault(key, {}).setdefault(r, entry)
    return found


def _short(site: Any) -> str:
    text = str(site or "?")
    path, _, line = text.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if path else text


def _located(site: Any) -> dict[str, Any]:
    path, _, line = str(site or "").rpartition(":")
    return {"file": path, "line": int(line)} if path and line.isdigit() else {}


def _ranks(ranks: list[int] | set[int]) -> str:
    ranks = sorted(ranks)
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


# --- MP540 ---------------------------------------------------------------------------------

def _stopped(rec: dict[str, Any]) -> bool:
    """Whether a rank is done calling collectives: its body ended, or it waits (hung) in one."""
    trace = rec.get("trace") or {}
    return rec.get("status") in ("succeeded", "failed") or bool(trace.get("waiting"))


def collective_mismatch(records: dict[int, dict[str, Any]], world_size: int,
                        where: dict[str, Any]) -> list[Diagnostic]:
    """MP540 for each collective the ranks called a different number of times, once every
    rank stopped (finished, or waits in a collective) and none failed outside a collective
    (a rank that crashed stops early for its own reason)."""
    traces = _traces(records)
    if world_size < 2 or len(traces) < world_size or len(records) < world_size:
        return []
    if not all(_stopped(rec) for rec in records.values()):
        return []
    if any(rec.get("status") == "failed" and not (traces[r].get("failed_in")
                                                  or traces[r].get("waiting"))
           for r, rec in records.items()):
        return []
    counts: dict[str, dict[int, int]] = {}
    sites: dict[str, dict[int, set[str]]] = {}
    for r, trace in traces.items():
        for entry in trace.get("collectives") or []:
            op = str(entry.get("op"))
            counts.setdefault(op, {}).setdefault(r, 0)
            counts[op][r] += int(entry.get("count") or 0)
            sites.setdefault(op, {}).setdefault(r, set()).add(str(entry.get("site")))
    findings = []
    for op, per_rank in sorted(counts.items()):
        full = {r: per_rank.get(r, 0) for r in sorted(traces)}
        if len(set(full.values())) == 1:
            continue
        most = max(full.values())
        extra = sorted(r for r, n in full.items() if n == most)
        called_at = sorted({s for r in extra for s in sites[op].get(r, ())})
        shown = ", ".join(f"rank {r}: {n}" for r, n in full.items())
        findings.append(Diagnostic.of(
            COLLECTIVE_MISMATCH,
            f"collective {op!r} was called a different number of times by the ranks "
            f"({shown}; called at {', '.join(_short(s) for s in called_at)}): a rank waits in "
            f"a collective its peers never enter",
            hint="call every collective on every rank, in the same order; keep only the "
                 "work that is one rank's (saving, logging) under `if rank == 0`",
            **where, **_located(called_at[0] if called_at else None)))
    return findings


# --- MP541 ---------------------------------------------------------------------------------

def _physical(device: str, visible: Any) -> str:
    """``cuda:N`` as the GPU it names on its node (``CUDA_VISIBLE_DEVICES`` renumbers)."""
    index = device.split(":", 1)[1] if ":" in device else "0"
    ids = [x.strip() for x in str(visible).split(",")] if visible else []
    if ids and index.isdigit() and int(index) < len(ids):
        return f"gpu {ids[int(index)]}"
    return f"gpu {index}"


def shared_devices(records: dict[int, dict[str, Any]], world_size: int,
                   where: dict[str, Any]) -> list[Diagnostic]:
    """MP541 for each GPU that ranks of one node requested, where more than one rank ran on
    that node (the request is recorded even where the machine has no GPU)."""
    if world_size < 2:
        return []
    users: dict[tuple[int, str], dict[int, dict[str, Any]]] = {}
    for r, trace in _traces(records).items():
        node = int(records[r].get("node_rank") or 0)
        for entry in trace.get("devices") or []:
            device = str(entry.get("device") or "")
            if not device.startswith("cuda"):
                continue
            gpu = _physical(device, trace.get("cuda_visible_devices"))
            users.setdefault((node, gpu), {}).setdefault(r, entry)
    findings = []
    for (node, gpu), ranks in sorted(users.items()):
        if len(ranks) < 2:
            continue
        first = ranks[min(ranks)]
        shown = "; ".join(f"rank {r} asked for {e.get('requested')!r} through {e.get('via')} at "
                          f"{_short(e.get('site'))}" for r, e in sorted(ranks.items()))
        findings.append(Diagnostic.of(
            RANKS_SHARE_A_DEVICE,
            f"{_ranks(set(ranks))} of node {node} requested the same GPU ({gpu}: {shown}), "
            f"so they compete for one device while the node's others stay idle",
            hint="put each rank on its own GPU: torch.cuda.set_device(int(os.environ["
                 "'LOCAL_RANK'])) and torch.device(f'cuda:{local_rank}') (or "
                 "mlpipe.runtime.device())", **where, **_located(first.get("site"))))
    return findings


# --- MP542 ---------------------------------------------------------------------------------

def _place(rec: dict[str, Any]) -> str:
    """Where a rank was when the step hung: the collective it waited in, or its innermost
    frame of the user's code."""
    trace = rec.get("trace") or {}
    hang, waiting = trace.get("hang") or {}, trace.get("waiting") or {}
    op = hang.get("op") or waiting.get("op")
    if op:
        site = hang.get("site") or waiting.get("site")
        return f"rank {rec['rank']} waits in {op} at {_short(site)}"
    stack = [f for f in hang.get("stack") or [] if "/mlpipe/" not in f and "/torch/" not in f
             and "site-packages" not in f]
    if stack:
        frame = stack[-1]
        path, _, rest = frame.partition(" in ")
        return f"rank {rec['rank']} is in no collective (at {_short(path)} in {rest})"
    return f"rank {rec['rank']} is in no collective"


def hung(records: dict[int, dict[str, Any]], world_size: int,
         where: dict[str, Any]) -> list[Diagnostic]:
    """MP542 when a rank's watchdog saw it wait in one collective past its limit and the wait
    never ended: every rank's place (its stack is in its record, ``trace.hang.stack``)."""
    stuck = {r: t["hang"] for r, t in _traces(records).items()
             if isinstance(t.get("hang"), dict) and t["hang"].get("why") == "waited past the limit"
             and records[r].get("status") != "succeeded"}
    if not stuck:
        return []
    first = min(stuck)
    hang = stuck[first]
    places = "; ".join(_place(records[r]) for r in sorted(records))
    return [Diagnostic.of(
        RANK_HUNG_IN_COLLECTIVE,
        f"rank {first} waited {hang.get('waited_s'):g} s in {hang.get('op')} at "
        f"{_short(hang.get('site'))} (limit {hang.get('limit_s'):g} s) and the step did not "
        f"finish: {places}",
        hint="make every rank reach the same collectives in the same order (see each rank's "
             "stack in its record, trace.hang.stack)", **where, **_located(hang.get("site")))]


# --- MP543 ---------------------------------------------------------------------------------

_PER_NODE = ("download", "extract")


def every_rank_work(records: dict[int, dict[str, Any]], world_size: int,
                    where: dict[str, Any]) -> list[Diagnostic]:
    """MP543 for each tracking or storage call with one target that every rank made (a
    download or an extraction: every rank of a node with more than one, so per-node staging by
    local rank 0 stays clean)."""
    traces = _every_ranks_traces(records, world_size)
    if not traces:
        return []
    # one target, whatever the call (shutil.unpack_archive extracts through tarfile)
    made = _first_entries(traces, "calls",
                          lambda entry: (str(entry.get("kind")), str(entry.get("target"))))
    findings = []
    for (kind, target), ranks in sorted(made.items()):
        if kind in _PER_NODE:
            nodes: dict[int, set[int]] = {}
            for r in traces:
                nodes.setdefault(int(records[r].get("node_rank") or 0), set()).add(r)
            crowded = [n for n, members in nodes.items()
                       if len(members) > 1 and members <= set(ranks)]
            if not crowded:
                continue
        elif len(ranks) < world_size:
            continue
        entry = ranks[min(ranks)]
        call = entry.get("call")
        what = f"{call}({target!r})" if target else f"{call}()"
        findings.append(Diagnostic.of(
            EVERY_RANK_DOES_ONE_RANKS_WORK,
            f"{_ranks(set(ranks))} each called {what} ({kind}, at {_short(entry.get('site'))}): "
            f"{len(ranks)} processes did what one should",
            hint="do it on one rank (`if rank == 0:`; per node: `if local_rank == 0:`) and "
                 "let the others wait at a barrier", **where, **_located(entry.get("site"))))
    return findings


# --- MP521 / MP523 from the samplers -------------------------------------------------------

def sampler_dealing(records: dict[int, dict[str, Any]], world_size: int,
                    where: dict[str, Any]) -> list[Diagnostic]:
    """MP521 when the ranks' DistributedSamplers of one data set dealt an example to more
    than one rank beyond the padding the sampler adds; MP523 when they left examples to no
    rank beyond what ``drop_last`` drops. Judged on each sampler's first pass, per call site."""
    traces = _every_ranks_traces(records, world_size)
    if not traces:
        return []
    dealt = _first_entries(traces, "samplers", lambda entry: (
        (str(entry.get("site")), int(entry.get("dataset_size") or 0))
        if isinstance(entry.get("indices"), list) else None))
    findings = []
    for (site, size), ranks in sorted(dealt.items()):
        if len(ranks) < world_size or size <= 0:
            continue
        owners: dict[int, set[int]] = {}
        for r, entry in ranks.items():
            for i in entry["indices"]:
                owners.setdefault(int(i), set()).add(r)
        replicas = sorted({int(e.get("num_replicas") or 0) for e in ranks.values()})
        said = sorted({int(e.get("rank") or 0) for e in ranks.values()})
        drop_last = any(e.get("drop_last") for e in ranks.values())
        per = -(-size // world_size)
        padding = 0 if drop_last else per * world_size - size
        twice = sorted(i for i, rs in owners.items() if len(rs) > 1)
        built = f"num_replicas={'/'.join(map(str, replicas))}, rank={'/'.join(map(str, said))}"
        if len(twice) > padding:
            findings.append(Diagnostic.of(
                SHARD_OVERLAP,
                f"the DistributedSamplers at {_short(site)} dealt {len(twice)} of {size} "
                f"examples to more than one rank (built with {built} in a world of "
                f"{world_size}; padding accounts for {padding})",
                hint="build the sampler with the process group's rank and world size (leave "
                     "num_replicas and rank out)", **where, **_located(site)))
        missing = size - len(owners)
        dropped = size % world_size if drop_last else 0
        if missing > dropped:
            findings.append(Diagnostic.of(
                COVERAGE_GAP,
                f"the DistributedSamplers at {_short(site)} dealt {missing} of {size} examples "
                f"to no rank (built with {built} in a world of {world_size})",
                hint="build the sampler with the process group's rank and world size (leave "
                     "num_replicas and rank out)", **where, **_located(site)))
    return findings


def judge(records: dict[int, dict[str, Any]], world_size: int, where: dict[str, Any], *,
          ids_recorded: bool = False) -> list[Diagnostic]:
    """Every finding the ranks' traces support (the samplers only where no example ids were
    recorded: those are judged by the coordination check itself)."""
    judges = [collective_mismatch, hung, shared_devices, every_rank_work]
    if not ids_recorded:
        judges.append(sampler_dealing)
    findings: list[Diagnostic] = []
    for judgement in judges:
        try:
            findings += judgement(records, world_size, where)
        except (TypeError, ValueError, AttributeError, KeyError):
            continue   # a record written by hand or cut short supports no finding of its kind
    return findings


def trace_findings(step_dir: str | Path, world_size: int, *,
                   step: str | None = None) -> list[Diagnostic]:
    """What the traces in record folder ``step_dir`` show, for a step that did not finish
    (the launcher adds them to its failure)."""
    records: dict[int, dict[str, Any]] = {}
    for path in sorted(Path(step_dir).glob("rank-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("rank"), int) \
                and data.get("role", "worker") == "worker":
            records[data["rank"]] = data
    return judge(records, world_size, {"step": step})


__all__ = ["collective_mismatch", "every_rank_work", "hung", "judge", "sampler_dealing",
           "shared_devices", "trace_findings"]
