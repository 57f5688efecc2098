"""After a distributed step: did its workers really coordinate? Reads the ranks' parts of the
step record the runtime left (docs/step-record.md) and judges coverage, overlap, writers and
metric scope. Reads files only; never launches or changes anything. Shared by every backend
that runs distributed steps (the local launcher, and ``sync`` for an Azure ML job's record),
so its findings mean the same thing whichever backend ran the step.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.codes import (
    COORDINATION_UNRECORDED,
    COVERAGE_GAP,
    DECLARED_WRITER_NEVER_WROTE,
    INDEPENDENT_COPIES,
    MULTIPLE_WRITERS,
    PARTIAL_METRIC_LOGGED_AS_GLOBAL,
    SHARD_OVERLAP,
    UNDECLARED_WRITER,
)
from mlpipe.diagnostics import Diagnostic, Severity
from mlpipe.distribution import Distribution
from mlpipe.judgements import ranktrace
from mlpipe.judgements.metriccounts import padded_population, unweighted_means


@dataclass(frozen=True)
class CoordinationReport:
    """What the records of one distributed step show.

    ``findings`` are diagnostics (codes MP520-MP527, MP534, MP540-MP543: ``judgements.ranktrace``);
    ``ok`` is False when any is an error.
    ``to_dict()`` is what the evidence store keeps.
    """

    world_size: int
    recorded_ranks: tuple[int, ...]
    consumed: dict[int, int]
    population: int
    covered: int
    writers: dict[str, tuple[int, ...]]
    metrics: dict[str, dict[str, Any]]
    findings: tuple[Diagnostic, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.findings)

    def failure_text(self) -> str:
        """What a step whose ranks did not coordinate failed with, the same for every
        backend: the error findings, rendered."""
        lines = [d.render() for d in self.findings if d.severity is Severity.ERROR]
        return (f"the {self.world_size} processes finished, but the coordination check "
                f"failed:\n" + "\n".join("  " + line.replace("\n", "\n  ") for line in lines))

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "world_size": self.world_size,
                "recorded_ranks": list(self.recorded_ranks),
                "consumed_per_rank": {str(k): v for k, v in sorted(self.consumed.items())},
                "population": self.population, "covered": self.covered,
                "writers": {k: list(v) for k, v in sorted(self.writers.items())},
                "metrics": self.metrics,
                "findings": [d.to_json() for d in self.findings]}


def _records(parts: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(p["rank"]): p for p in parts
            if isinstance(p.get("rank"), int) and p.get("role", "worker") == "worker"}


def _read_parts(step_dir: Path) -> list[dict[str, Any]]:
    """The ranks' parts in a record folder (``rank-<R>.json``; unreadable ones skipped)."""
    found = []
    for path in sorted(step_dir.glob("rank-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict):
            found.append(data)
    return found


def _few(ids: set[str] | list[str], n: int = 3) -> str:
    shown = sorted(ids)[:n]
    more = len(ids) - len(shown)
    return ", ".join(repr(i) for i in shown) + (f" and {more} more" if more > 0 else "")


def _loader_copies(records: dict[int, dict[str, Any]], world_size: int,
                   where: dict[str, Any]) -> Diagnostic | None:
    """MP522 from the ranks' PyTorch DataLoaders, for code that records no ids: every rank
    iterated the whole of the same data set and no rank's loader had a sampler that deals out
    parts (a DistributedSampler, or any sampler with ``num_replicas`` > 1). A validation loader
    over the whole set beside a distributed training loader is plain DDP, not copies."""
    if world_size <= 1 or len(records) < world_size:
        return None
    fed = {r: rec.get("data_loaders") or [] for r, rec in records.items()}
    if any(not loaders for loaders in fed.values()):
        return None   # a rank iterated no DataLoader (or was not watched): nothing to say
    if any((x.get("num_replicas") or 0) > 1 for loaders in fed.values() for x in loaders):
        return None
    signatures: list[set[tuple[Any, ...]]] = []
    for loaders in fed.values():
        signatures.append({(x.get("dataset"), x.get("dataset_size"), x.get("subset_size"),
                            x.get("subset_digest")) for x in loaders
                           if x.get("whole") and x.get("dataset_size")})
    common = set.intersection(*signatures)
    if not common:
        return None
    chosen = max(common, key=lambda sig: sig[1])
    dataset, size = chosen[0], chosen[1]
    how = _how_whole(fed, chosen)
    groups = {tuple(sorted((x.get("process_group") or {}).items())) for loaders in fed.values()
              for x in loaders if x.get("process_group")}
    group = (f"in a process group of {world_size}" if groups
             else "without forming a process group")
    return Diagnostic.of(
        INDEPENDENT_COPIES,
        f"all {len(records)} ranks iterated the whole data set ({size} examples of "
        f"{dataset}) through a DataLoader {how}, {group}: "
        f"{len(records)} copies trained on the same examples, not one data-parallel run",
        hint=(f"build the sampler with num_replicas={world_size} (or leave num_replicas and "
              f"rank out: DistributedSampler reads them from the process group)"
              if how.startswith("whose") else
              "give each rank its own part: DataLoader(dataset, sampler=DistributedSampler("
              "dataset)) (or mlpipe.runtime.shard(ids))"), **where)


def _how_whole(fed: dict[int, list[dict[str, Any]]], signature: tuple[Any, ...]) -> str:
    """Why the loaders reading the whole set did: a sampler built for one replica (the
    sampler exists, but deals one rank everything), or no sampler that deals out parts."""
    single = sorted({str(x.get("sampler")) for loaders in fed.values() for x in loaders
                     if x.get("whole") and x.get("num_replicas") == 1
                     and (x.get("dataset"), x.get("dataset_size"), x.get("subset_size"),
                          x.get("subset_digest")) == signature})
    if single:
        return f"whose {' and '.join(single)} was built with num_replicas=1 (one replica: " \
               f"it deals every rank the whole set)"
    return "with no sampler that deals out parts"


def _opened_copies(records: dict[int, dict[str, Any]], world_size: int,
                   where: dict[str, Any]) -> Diagnostic | None:
    """MP522 from the files each rank opened under its inputs (the runtime's audit hook), for
    code that records no ids and feeds no DataLoader: every rank opened the very same files,
    two or more, under one input, so none of them read a part of its own."""
    if world_size <= 1 or len(records) < world_size:
        return None
    reads = [r for rec in records.values() if isinstance(r := rec.get("reads_inputs"), dict)]
    if len(reads) < len(records):
        return None  # a rank was not observed: nobody can say what it opened
    if any((x.get("num_replicas") or 0) > 1 for rec in records.values()
           for x in rec.get("data_loaders") or []):
        return None  # a sampler dealt out parts: what each dataset read at start proves nothing
    for port in sorted(set().union(*(set(r) for r in reads))):
        files = [frozenset(str(f) for f in r.get(port) or []) for r in reads]
        if len(files[0]) < 2 or any(f != files[0] for f in files):
            continue
        return Diagnostic.of(
            INDEPENDENT_COPIES,
            f"all {len(records)} ranks opened the same {len(files[0])} files under input "
            f"{port!r} (every file any rank opened there, e.g. {_few(set(files[0]), 2)}) and "
            f"recorded no division of the data: each rank read the whole input, "
            f"{len(records)} copies, not one data-parallel run",
            hint="give each rank its own files (files[rank::world_size], or "
                 "mlpipe.runtime.shard(files)); a rank that reads everything and keeps a part "
                 "says which with record_consumed(ids)", **where)
    return None


def _step_part(step_dir: str | Path | list[dict[str, Any]],
               given: dict[str, Any] | None) -> dict[str, Any] | None:
    if given is not None or isinstance(step_dir, list):
        return given
    try:
        data = json.loads((Path(step_dir) / "step.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _writers(records: dict[int, dict[str, Any]]
             ) -> tuple[dict[str, set[int]], dict[str, dict[int, list[str]]]]:
    """Who wrote each output: the ranks that called ``mark_written`` for it or whose audit
    hook saw them write under it; and, per output and rank, the files the hook saw."""
    writers: dict[str, set[int]] = {}
    wrote: dict[str, dict[int, list[str]]] = {}
    for r, rec in sorted(records.items()):
        for name in rec.get("marked_written") or []:
            writers.setdefault(name, set()).add(r)
        for name, files in sorted((rec.get("writes") or {}).items()):
            if files:
                writers.setdefault(name, set()).add(r)
                wrote.setdefault(name, {})[r] = sorted(files)
    return writers, wrote


def _seen(name: str, ranks: list[int], wrote: dict[str, dict[int, list[str]]]) -> str:
    """What the audit hooks saw ranks write under an output, for a message."""
    shown = [f"rank {r} wrote {_few(wrote[name][r], 2)}" for r in ranks
             if r in wrote.get(name, {})]
    return f" (observed: {'; '.join(shown)})" if shown else ""


def _writer_findings(writers: dict[str, set[int]], wrote: dict[str, dict[int, list[str]]],
                     records: dict[int, dict[str, Any]], step_part: dict[str, Any] | None,
                     distribution: Distribution | None, world_size: int,
                     where: dict[str, Any]) -> list[Diagnostic]:
    """MP524/MP525 from what the ranks declared (``mark_written``) or were seen writing;
    MP527 for an output its declared writer (or, sharded, a rank) left without a file."""
    findings: list[Diagnostic] = []
    outputs = (step_part or {}).get("outputs") or {}
    for name in sorted(set(writers) | set(outputs)):
        policy = distribution.writer_policy(name) if distribution else None
        policy = "rank0" if policy is None else policy
        ranks = sorted(writers.get(name, ()))
        if policy == "sharded":
            findings += _sharded_silent(name, records, step_part, wrote, world_size, where)
            continue
        expected = 0 if policy == "rank0" else policy
        if len(ranks) > 1:
            findings.append(Diagnostic.of(
                MULTIPLE_WRITERS, f"output {name!r} was written by {len(ranks)} ranks "
                         f"({', '.join(map(str, ranks))}); its writer policy is {policy!r}"
                         + _seen(name, [r for r in ranks if r != expected], wrote),
                hint="guard the save with mlpipe.runtime.is_writer(...)", port=name, **where))
        elif len(ranks) == 1 and ranks[0] != expected:
            findings.append(Diagnostic.of(
                UNDECLARED_WRITER,
                f"output {name!r} was written by rank {ranks[0]}, but its writer "
                f"is rank {expected} (policy {policy!r})" + _seen(name, ranks, wrote),
                hint="guard the save with mlpipe.runtime.is_writer(...)", port=name, **where))
        entry = outputs.get(name) or {}
        if world_size > 1 and not ranks and entry.get("exists") and entry.get("file_count") == 0:
            findings.append(Diagnostic.of(
                DECLARED_WRITER_NEVER_WROTE,
                f"output {name!r} is empty: its declared writer, rank {expected} (policy "
                f"{policy!r}), wrote nothing there, and neither did any other rank",
                hint=f"save the output on rank {expected}: guard the save with "
                     f"mlpipe.runtime.is_writer({name!r})", port=name, **where))
    return findings


def _sharded_silent(name: str, records: dict[int, dict[str, Any]],
                    step_part: dict[str, Any] | None, wrote: dict[str, dict[int, list[str]]],
                    world_size: int, where: dict[str, Any]) -> list[Diagnostic]:
    """The ranks of a sharded output that wrote no part of it, where that is known: every
    rank was watched and every file of the output is one a rank's hook saw written."""
    if world_size <= 1 or step_part is None or len(records) < world_size:
        return []
    entry = (step_part.get("outputs") or {}).get(name) or {}
    rows = (step_part.get("writes") or {}).get(name)
    if not entry.get("exists") or rows is None:
        return []
    if any(row.get("how") != "observed" for row in rows):
        return []  # a file some native code wrote: who else wrote is not known
    watched = [r for r, rec in records.items() if (rec.get("observation") or {}).get("enabled")]
    if len(watched) < world_size:
        return []
    marked = {r for r, rec in records.items() if name in (rec.get("marked_written") or [])}
    silent = sorted(r for r in watched if r not in wrote.get(name, {}) and r not in marked)
    if not silent:
        return []
    return [Diagnostic.of(
        DECLARED_WRITER_NEVER_WROTE,
        f"output {name!r} is sharded (every rank writes its own part), but "
        f"{len(silent)} of {world_size} ranks wrote nothing there "
        f"(rank{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))})",
        hint=f"save each rank's part under {name!r} on every rank "
             f"(<output>/rank-<RANK>/...), or declare the output's writer as 'rank0'",
        port=name, **where)]


def check_coordination(step_dir: str | Path | list[dict[str, Any]], *, world_size: int,
                       distribution: Distribution | None = None,
                       step: str | None = None,
                       step_part: dict[str, Any] | None = None) -> CoordinationReport:
    """Judge the coordination records one distributed step left behind.

    Args:
        step_dir: the step's ``MLPIPE_STEP_DIR``.
        world_size: how many processes were launched.
        distribution: the step's declared distribution (for its writer policies); None means
            ``"rank0"`` for every output.
        step: the step id, to locate the findings.
        step_part: the finisher's ``step.json`` (what each output holds and who wrote its
            files); read from ``step_dir`` when that is a folder and this is None.

    Returns:
        The report; it never raises for what it finds.

    Example:
        >>> report = check_coordination(run_dir, world_size=4)
        >>> report.ok, report.covered, report.population
        (True, 210, 210)
    """
    parts = step_dir if isinstance(step_dir, list) else _read_parts(Path(step_dir))
    records = _records(parts)
    where = {"step": step}
    findings = _unrecorded(records, world_size, where)
    consumed = {r: set(rec.get("consumed", [])) for r, rec in records.items()}
    population = set().union(*(set(rec.get("population", [])) for rec in records.values()))
    seen = set().union(*consumed.values()) if consumed else set()
    findings += _data_findings(records, consumed, population, seen, world_size, where)
    writers, wrote = _writers(records)
    findings += _writer_findings(writers, wrote, records, _step_part(step_dir, step_part),
                                 distribution, world_size, where)
    summary, metric_findings = _metric_findings(records, world_size, where)
    findings += metric_findings
    findings += unweighted_means(records, world_size, where)
    findings += padded_population(records, world_size, where)
    findings += ranktrace.judge(records, world_size, where, ids_recorded=bool(population or seen))
    return CoordinationReport(
        world_size=world_size, recorded_ranks=tuple(sorted(records)),
        consumed={r: len(ids) for r, ids in consumed.items()}, population=len(population),
        covered=len(population & seen) if population else len(seen),
        writers={k: tuple(sorted(v)) for k, v in writers.items()}, metrics=summary,
        findings=tuple(findings))


def _unrecorded(records: dict[int, dict[str, Any]], world_size: int, where: dict[str, Any]
                ) -> list[Diagnostic]:
    """The ranks that left no coordination record (with more than one rank launched)."""
    missing = sorted(set(range(world_size)) - set(records))
    if world_size > 1 and missing:
        return [Diagnostic.of(
            COORDINATION_UNRECORDED,
            f"{len(missing)} of {world_size} ranks left no coordination record "
            f"(ranks {', '.join(map(str, missing))}); data coverage and output "
            f"ownership are unevidenced",
            hint="divide the data with mlpipe.runtime.shard(...) (or record_consumed) and call "
                 "mark_written(output) after saving", **where)]
    return []


def _data_findings(records: dict[int, dict[str, Any]], consumed: dict[int, set[Any]],
                   population: set[Any], seen: set[Any], world_size: int,
                   where: dict[str, Any]) -> list[Diagnostic]:
    """How the ranks divided the data: independent copies, or examples consumed twice; with
    no ids recorded, copies seen by the data loaders or the files opened; examples no rank
    consumed."""
    findings: list[Diagnostic] = []
    full = [r for r, ids in consumed.items() if population and ids >= population]
    if world_size > 1 and len(records) > 1 and len(full) == len(records):
        findings.append(Diagnostic.of(
            INDEPENDENT_COPIES,
            f"all {len(records)} ranks consumed the whole data set ({len(population)} "
            f"examples): {len(records)} independent copies trained side by side, not one "
            f"data-parallel run", hint="give each rank its own part with "
            "mlpipe.runtime.shard(ids) (or a DistributedSampler)", **where))
    else:
        owners: dict[str, list[int]] = {}
        for r, ids in consumed.items():
            for i in ids:
                owners.setdefault(i, []).append(r)
        shared = {i for i, rs in owners.items() if len(rs) > 1}
        if shared:
            pairs = sorted({tuple(sorted(owners[i])) for i in shared})[:3]
            findings.append(Diagnostic.of(
                SHARD_OVERLAP, f"{len(shared)} examples were consumed by more than one rank "
                         f"({_few(shared)}; ranks {', '.join(map(str, pairs))})",
                hint="every rank must pass the same ids, in the same order, to shard()",
                **where))
    if not population and not seen:
        copies = _loader_copies(records, world_size, where) or \
            _opened_copies(records, world_size, where)
        if copies is not None:
            findings.append(copies)
    gap = population - seen
    if gap:
        findings.append(Diagnostic.of(
            COVERAGE_GAP, f"{len(gap)} of {len(population)} examples were consumed by no rank "
                      f"({_few(gap)})", hint="deal out every id (shard() does), or drop "
                      "unused ids from the data set before the step", **where))
    return findings


def _metric_findings(records: dict[int, dict[str, Any]], world_size: int,
                     where: dict[str, Any]) -> tuple[dict[str, Any], list[Diagnostic]]:
    """Each metric's scopes and the ranks that logged it as global, and a finding for each
    metric more than one rank logged as global (each rank's partial view)."""
    findings: list[Diagnostic] = []
    metrics: dict[str, dict[str, Any]] = {}
    for line in (x for r in records.values() for x in r.get("metrics") or []
                 if isinstance(x, dict) and isinstance(x.get("name"), str)
                 and isinstance(x.get("scope"), str)):   # a line cut short says nothing
        m = metrics.setdefault(line["name"], {"scopes": set(), "global_ranks": set()})
        m["scopes"].add(line["scope"])
        if line["scope"] == "global":
            m["global_ranks"].add(line.get("rank"))
    for name, m in sorted(metrics.items()):
        ranks = sorted(r for r in m["global_ranks"] if r is not None)
        if world_size > 1 and len(ranks) > 1:
            findings.append(Diagnostic.of(
                PARTIAL_METRIC_LOGGED_AS_GLOBAL,
                f"metric {name!r} was logged as global by {len(ranks)} ranks "
                f"({', '.join(map(str, ranks))}); each is one rank's partial view",
                hint="log it with mlpipe.runtime.all_reduce_metric(...), or with "
                     "scope='partial'", **where))
    summary = {k: {"scopes": sorted(v["scopes"]),
                   "global_ranks": sorted(r for r in v["global_ranks"] if r is not None)}
               for k, v in metrics.items()}
    return summary, findings
