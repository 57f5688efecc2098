"""The boundaries of a step body, as the step runtime checks them wherever the step runs:
input contracts before the body; after it (on the finisher, rank 0, once every rank has
finished) output completeness, output contracts, the content digests of every output, who
wrote each of its files and the content of what the body read outside its inputs, written to
the record's ``step.json``.

Sees contracts and the record; never imports a backend, the store, torch or mlflow.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.digests import file_digests, output_digests
from mlpipe.runtime import record

#: How long the finisher waits for the other ranks to finish (seconds; MLPIPE_RECORD_WAIT_S).
WAIT_ENV = "MLPIPE_RECORD_WAIT_S"
WAIT_DEFAULT_S = 300.0
#: Files listed one by one with their digests per output; past it, the count of the others.
MAX_FILES = 10_000


@dataclass(frozen=True, slots=True)
class Port:
    """One declared port as the runtime needs it: name, Azure ML kind, contract."""

    name: str
    kind: str
    contract: Any = None

    @property
    def contract_label(self) -> str | None:
        if self.contract is None:
            return None
        from mlpipe.contracts.base import contract_label
        return contract_label(self.contract)


@dataclass(slots=True)
class Failure(Exception):
    """A boundary the step did not pass: its layer, the port and the message users see."""

    layer: str
    message: str
    port: str | None = None
    #: what differs, where the contract says (ContractError.mismatch)
    mismatch: str | None = None

    def to_json(self, rank: int | None = None) -> dict[str, Any]:
        found = {"layer": self.layer, "type": None, "message": self.message, "port": self.port,
                 "rank": rank}
        return {**found, "mismatch": self.mismatch} if self.mismatch else found


def _validate(port: Port, path: str) -> tuple[str, str | None] | None:
    """The contract's complaint about ``path`` and what differs, or None when it matches."""
    from mlpipe.contracts import validate
    from mlpipe.errors import MlpipeError

    try:
        validate(port.contract, path)
    except MlpipeError as exc:
        return exc.message, getattr(exc, "mismatch", None)
    return None


def check_inputs(ports: list[Port], paths: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Validate every bound input that has a contract, before the body runs.

    Returns:
        port -> ``{"path", "contract", "valid", "message"}`` (``valid`` None: no contract),
        and ``splits`` (``runtime.splitrows``) for a valid table that declares its split.

    Raises:
        Failure: the first input that does not match its contract (layer ``input-contract``),
            with the message a local run shows.
    """
    results: dict[str, dict[str, Any]] = {}
    first: Failure | None = None
    for port in ports:
        path = paths.get(port.name)
        if path is None:
            continue
        entry = {"path": path, "contract": port.contract_label, "valid": None, "message": None}
        if port.contract is not None:
            found = _validate(port, path)
            problem = found[0] if found else None
            entry["valid"] = problem is None
            entry["message"] = problem
            if problem is None:
                from mlpipe.runtime.splitrows import split_rows
                splits = split_rows(port.contract, path)
                if splits is not None:
                    entry["splits"] = splits
            if found is not None and first is None:
                first = Failure("input-contract", f"input {port.name!r} does not match its "
                                                  f"contract: {problem}", port.name, found[1])
        results[port.name] = entry
    if first is not None:
        raise InputsRefused(first, results)
    return results


class InputsRefused(Exception):
    """An input does not match its contract: the first failure, and every input's result
    (which the step record keeps)."""

    def __init__(self, failure: Failure, results: dict[str, dict[str, Any]]) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.results = results


# --- digests ------------------------------------------------------------------------------

def content(path: str) -> dict[str, Any]:
    """The content digests of one output (``mlpipe.digests.output_digests``): ``digest``
    (``blake3:``, the same value the local artifact store files it under), ``sha256``, size,
    file count and the first ``MAX_FILES`` files with theirs.

    Example:
        >>> content("out/model")["digest"][:7]
        'blake3:'
    """
    return output_digests(path, MAX_FILES)


def _declared_prefixes(reads: tuple[str, ...] | list[str]) -> list[str]:
    """A component's ``reads=`` as absolute paths (``~``, ``$VARS``, relative to the working
    folder), each also as a folder prefix."""
    found = []
    for raw in reads:
        path = os.path.abspath(os.path.expanduser(os.path.expandvars(raw)))
        found.append(path)
    return found


def _is_declared(path: str, declared: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in declared)


def hidden_inputs(parts: list[dict[str, Any]], reads: tuple[str, ...] | list[str] = ()
                  ) -> list[dict[str, Any]] | None:
    """What the ranks read outside their declared inputs, with the content it had when the
    step finished: ``[{path, ranks, declared, exists, size, digest}]`` (``digest`` is
    ``blake3:<hex>``, as the artifact store names a file; null when it is gone or unreadable).
    ``declared``: under a path the component declares with ``reads=``. None when no rank was
    observed (``MLPIPE_OBSERVE=0``): unknown, not empty.

    Example:
        >>> hidden_inputs([{"rank": 1, "reads_outside_inputs": ["/data/lookup.csv"]}],
        ...               reads=["/data"])[0]["declared"]
        True
    """
    seen: dict[str, set[int]] = {}
    observed = False
    for part in parts:
        found = part.get("reads_outside_inputs")
        if found is None:
            continue
        observed = True
        for path in found:
            seen.setdefault(path, set()).add(int(part.get("rank") or 0))
    if not observed:
        return None
    declared = _declared_prefixes(reads)
    out = []
    for index, (path, ranks) in enumerate(sorted(seen.items())):
        entry: dict[str, Any] = {"path": path, "ranks": sorted(ranks),
                                 "declared": _is_declared(path, declared), "exists": False,
                                 "size": None, "digest": None}
        if index < MAX_FILES:
            try:
                size = os.stat(path).st_size
                b3 = file_digests(path)["blake3"]
                entry.update(exists=True, size=size, digest=f"blake3:{b3}")
            except OSError:
                pass
        out.append(entry)
    return out


# --- the finisher -------------------------------------------------------------------------

def wait_for_ranks(where: str, world_size: int, me: int) -> tuple[list[dict[str, Any]], list[int]]:
    """The ranks' parts once every rank has finished (or the wait ran out): (parts, missing)."""
    try:
        limit = float(os.environ.get(WAIT_ENV, WAIT_DEFAULT_S))
    except ValueError:
        limit = WAIT_DEFAULT_S
    deadline = time.monotonic() + limit
    while True:
        parts = [p for p in record.rank_parts(where) if p.get("role", "worker") == "worker"]
        done = {p["rank"] for p in parts if p.get("status") != "running"} | {me}
        missing = sorted(set(range(world_size)) - done)
        if not missing or time.monotonic() >= deadline:
            return parts, missing
        time.sleep(0.05)


def _writers(outputs: dict[str, dict[str, Any]], parts: list[dict[str, Any]],
             world_size: int) -> dict[str, list[dict[str, Any]]]:
    """Who wrote each file of each output: the ranks whose hook saw it; for files written by
    native code, the only process (a single-process step), else the ranks that called
    ``mark_written`` for the output, else unknown (``ranks`` null)."""
    result: dict[str, list[dict[str, Any]]] = {}
    for port, entry in outputs.items():
        files = [f["name"] for f in entry.get("files") or []]
        seen: dict[str, set[int]] = {}
        for part in parts:
            for rel in (part.get("writes") or {}).get(port, []):
                seen.setdefault(rel, set()).add(part["rank"])
        marked = sorted(p["rank"] for p in parts if port in (p.get("marked_written") or []))
        rows = []
        for name in files:
            if name in seen:
                rows.append({"name": name, "ranks": sorted(seen[name]), "how": "observed"})
            elif world_size == 1:
                rows.append({"name": name, "ranks": [0], "how": "only-process"})
            elif marked:
                rows.append({"name": name, "ranks": marked, "how": "mark_written"})
            else:
                rows.append({"name": name, "ranks": None, "how": "unknown"})
        result[port] = rows
    return result


def _parts(where: str | None, me: dict[str, Any], world: int
           ) -> tuple[list[dict[str, Any]], list[int]]:
    """The workers' parts the finisher judges, and the ranks missing: none without a record
    folder; every rank's, waited for, in a step of several; in a step of one, the finisher's
    own part as it holds it (what it just saved), else as saved."""
    if where is None:
        return [], []
    if world > 1:
        return wait_for_ranks(where, world, me["rank"])
    if me.get("format") == f"{record.FORMAT}.rank" and me.get("role", "worker") == "worker":
        return [me], []
    return [p for p in record.rank_parts(where) if p.get("role", "worker") == "worker"], []


def finish(where: str | None, *, me: dict[str, Any], outputs: list[Port], paths: dict[str, str],
           header: dict[str, Any], failure: dict[str, Any] | None,
           reads: tuple[str, ...] = ()) -> dict[str, Any]:
    """Write ``step.json``: wait for the other ranks, then (unless the step already failed)
    check each output exists and matches its contract, and digest it.

    Args:
        where: the record folder; None checks the outputs without writing anything (and
            without waiting for other ranks).
        me: the finisher's identity (rank, world size), or its whole rank part: a step of one
            rank then uses it as it is instead of reading it back.
        outputs: the declared outputs.
        paths: output port -> path.
        header: component, digests, versions, inputs (already checked).
        failure: the finisher's own failure, if its body (or an input) failed.
        reads: the paths the component declares it reads outside its inputs (``reads=``).

    Returns:
        The step part written; its ``failure`` (or None) says whether the step passed.
    """
    world = int(me.get("world_size") or 1)
    parts, missing = _parts(where, me, world)
    if failure is None:
        for part in sorted(parts, key=lambda p: p["rank"]):
            if part.get("status") == "failed" and part.get("failure"):
                failure = dict(part["failure"])
                break
    out: dict[str, dict[str, Any]] = {}
    for port in outputs:
        path = paths.get(port.name)
        if path is None:
            continue
        entry: dict[str, Any] = {"path": path, "kind": port.kind,
                                 "contract": port.contract_label, "exists": os.path.exists(path),
                                 "valid": None, "message": None}
        out[port.name] = entry
    if failure is None:
        absent = [name for name, e in out.items() if not e["exists"]]
        if absent:
            plural = "s" if len(absent) > 1 else ""
            failure = Failure("output-completeness",
                              f"finished without writing its output{plural} "
                              f"{', '.join(map(repr, absent))}", absent[0]).to_json(me["rank"])
    if failure is None:
        for port in outputs:
            written = out.get(port.name)
            if written is None or port.contract is None:
                continue
            found = _validate(port, written["path"])
            problem = found[0] if found else None
            written["valid"] = problem is None
            written["message"] = problem
            if found is not None and failure is None:
                failure = Failure("output-contract", f"output {port.name!r} does not match its "
                                                     f"contract: {problem}",
                                  port.name, found[1]).to_json(me["rank"])
    for entry in out.values():
        if entry["exists"] and where is not None:
            try:
                entry.update(content(entry["path"]))
            except OSError as exc:
                entry["digest"] = None
                entry["message"] = entry["message"] or f"cannot be read: {exc}"
    step = {"format": f"{record.FORMAT}.step", "version": record.VERSION, **header,
            "world_size": world, "ranks_finished": sorted(p["rank"] for p in parts
                                                          if p.get("status") != "running"),
            "ranks_missing": missing, "finished_at": record.now(),
            "status": "failed" if failure else "succeeded", "failure": failure,
            "outputs": out, "writes": _writers(out, parts, world),
            "hidden_inputs": hidden_inputs(parts, reads) if where is not None else None}
    if where is not None:
        record.write_json(Path(where) / record.STEP_FILE, step)
    return step


__all__ = ["Failure", "Port", "check_inputs", "content", "finish",
           "hidden_inputs", "wait_for_ranks"]
