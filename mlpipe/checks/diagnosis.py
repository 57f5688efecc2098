"""A failed step, diagnosed at the layer that failed: from what its runtime recorded and what
its launcher saw, the guide's layer (contract and output completeness; launch topology and
framework initialization; model output ownership; application logging and worker aggregation;
declared dependencies and reuse), a code MP900-MP928, the concrete message, a fix and the logs.

Pure: it reads the facts a backend hands it and never opens a file or a store. Shared by every
backend that runs steps, so a diagnosis means the same thing wherever the step failed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlpipe.codes import (
    DATA_NOT_DIVIDED,
    LAUNCH_REFUSED,
    METRIC_MISSING_FROM_REPORT,
    METRIC_NOT_AGGREGATED,
    OUTPUT_OWNERSHIP_VIOLATED,
    PROCESS_GROUP_INIT_FAILED,
    RANK_DIED,
    RENDEZVOUS_NOT_FORMED,
    RUNTIME_FAILED,
    STEP_CODE_RAISED,
    STEP_INPUT_REJECTED,
    STEP_NOT_STARTED,
    STEP_OUTPUT_NOT_WRITTEN,
    STEP_OUTPUT_REJECTED,
    UNDECLARED_INPUT_FAILED,
)
from mlpipe.diagnostics import Code

#: layer id -> what the guide calls it ("diagnose at the layer that failed"), in its order;
#: then the two layers of a failure that is no wiring's fault: the step's code, mlpipe's own.
LAYERS: dict[str, str] = {
    "contract": "contract and output completeness",
    "launch": "launch topology and framework initialization",
    "output-ownership": "model output ownership",
    "logging": "application logging and worker aggregation",
    "dependencies": "declared dependencies and reuse",
    "step-code": "the step's own code",
    "runtime": "mlpipe's step runtime",
}

#: The coordination findings (MP521-MP527) a failed distributed step is diagnosed by, in the
#: order they are reported: who owns the output first, then the data, then the metrics.
_COORDINATION = (("MP524", OUTPUT_OWNERSHIP_VIOLATED, "output-ownership"),
                 ("MP525", OUTPUT_OWNERSHIP_VIOLATED, "output-ownership"),
                 ("MP527", OUTPUT_OWNERSHIP_VIOLATED, "output-ownership"),
                 ("MP521", DATA_NOT_DIVIDED, "launch"),
                 ("MP522", DATA_NOT_DIVIDED, "launch"),
                 ("MP523", DATA_NOT_DIVIDED, "launch"),
                 ("MP526", METRIC_NOT_AGGREGATED, "logging"))

_FILE_ERRORS = frozenset({"FileNotFoundError", "PermissionError", "IsADirectoryError",
                          "NotADirectoryError", "OSError", "IOError"})

_SIGNALS = {9: "SIGKILL, often the kernel's out-of-memory killer", 15: "SIGTERM", 6: "SIGABRT",
            11: "SIGSEGV", 7: "SIGBUS"}


@dataclass(frozen=True)
class StepFailure:
    """What a backend knows about one failed step.

    Args:
        step: the step's name.
        message: the failure message the backend shows (``step 'train' failed: ...``).
        record: the step record (assembled or stored, docs/step-record.md), None if none.
        launch: how the launch ended, where a launcher ran the step: ``rendezvous`` (a rank
            never joined), ``exited`` (a rank exited non-zero), ``timeout``, ``refused``
            (nothing started), ``coordination`` (all exited 0, the records show no
            coordination), ``start`` (a rank could not be started).
        rank: the rank the launcher named.
        returncode: the exit status of the (named) process; negative: killed by that signal.
        coordination: the coordination check's findings (``Diagnostic.to_json()`` dicts).
        missing_outputs: outputs not written (found by the backend, without a record).
        rejected_output: ``(port, message)`` of an output the backend validated and rejected.
        not_started: the step could not be started (its command or code is unusable).
        metric_reports: the output ports whose contract is a metrics report.
        logs: ``{"step": path, "ranks": {"0": path, ...}}``.
        hint: the launcher's own hint, where it gave one (a refusal's fix).
    """

    step: str
    message: str
    record: Mapping[str, Any] | None = None
    launch: str | None = None
    rank: int | None = None
    returncode: int | None = None
    coordination: Sequence[Mapping[str, Any]] = ()
    missing_outputs: Sequence[str] = ()
    rejected_output: tuple[str, str] | None = None
    not_started: bool = False
    metric_reports: frozenset[str] = frozenset()
    logs: Mapping[str, Any] | None = None
    hint: str | None = None


@dataclass(frozen=True)
class Diagnosis:
    """A failed step's diagnosis; ``to_json()`` is what its step record carries."""

    code: Code
    layer: str
    message: str
    hint: str
    rank: int | None = None
    port: str | None = None
    findings: tuple[str, ...] = ()
    logs: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code.code, "name": self.code.name, "layer": self.layer,
                "layer_title": LAYERS[self.layer], "message": self.message, "hint": self.hint,
                "rank": self.rank, "port": self.port, "findings": list(self.findings),
                "logs": {"step": self.logs.get("step"),
                         "ranks": dict(self.logs.get("ranks") or {})}}


def recorded_failure(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The failure a step record names: the finisher's, else the first failed rank's (a
    record is read as found: a malformed part names nothing)."""
    if not isinstance(record, Mapping):
        return None
    step = record.get("step")
    if isinstance(step, Mapping) and isinstance(step.get("failure"), Mapping):
        return dict(step["failure"])
    return next((dict(p["failure"]) for p in _parts(record)
                 if isinstance(p.get("failure"), Mapping)), None)


def _parts(record: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    ranks = record.get("ranks") if isinstance(record, Mapping) else None
    return [p for p in ranks if isinstance(p, Mapping)] if isinstance(ranks, list) else []


def _reads(record: Mapping[str, Any] | None, rank: Any) -> list[str]:
    for part in _parts(record):
        if part.get("rank") == (rank if isinstance(rank, int) else 0) and \
                part.get("role", "worker") == "worker":
            reads = part.get("reads_outside_inputs")
            return [r for r in reads if isinstance(r, str)] if isinstance(reads, list) else []
    return []


def _metric_reports(f: StepFailure) -> frozenset[str]:
    """The outputs whose contract is a metrics report: as the backend said, or as the step
    record's finisher labelled them (``metrics-report:NAME``), so every backend agrees."""
    step = (f.record or {}).get("step") if isinstance(f.record, Mapping) else None
    outputs = step.get("outputs") if isinstance(step, Mapping) else None
    found = {port for port, entry in (outputs or {}).items()
             if isinstance(entry, Mapping) and isinstance(entry.get("contract"), str)
             and entry["contract"].startswith("metrics-report")} if isinstance(outputs, Mapping) \
        else set()
    return frozenset(f.metric_reports) | frozenset(found)


def diagnose(failure: StepFailure) -> Diagnosis:
    """The layer ``failure`` belongs to, its code, message and fix.

    The launcher's view decides first where it saw what the record cannot show (a rank that
    never joined, a refusal, ranks that did not coordinate); then the layer the runtime
    recorded; then what the backend found without a record.

    Example:
        >>> diagnose(StepFailure("train", "step 'train' failed: ...", launch="rendezvous",
        ...                      rank=1)).code.code
        'MP905'
    """
    f = failure
    logs = dict(f.logs or {})

    def made(code: Code, layer: str, hint: str, *, rank: int | None = f.rank,
             port: str | None = None, findings: Sequence[str] = ()) -> Diagnosis:
        return Diagnosis(code, layer, _sentence(f.message), hint, rank, port, tuple(findings),
                         logs)

    if f.launch == "refused":
        return made(LAUNCH_REFUSED, "launch", f.hint or "launch fewer ranks here with "
                    f"--local-scale {f.step}=fit, or run the step where it fits")
    if f.launch == "rendezvous":
        return made(RENDEZVOUS_NOT_FORMED, "launch",
                    f"read the log of rank {f.rank} for where it stopped: every rank must call "
                    f"torch.distributed.init_process_group(init_method='env://') before any "
                    f"long work; MLPIPE_RENDEZVOUS_TIMEOUT_S sets how long the launcher waits")
    if f.launch == "coordination":
        codes = [str(d.get("code")) for d in f.coordination
                 if d.get("severity", "error") == "error"]
        for source, code, layer in _COORDINATION:
            if source in codes:
                return made(code, layer, _COORDINATION_HINTS[code.code], findings=codes)
    if f.not_started or f.launch == "start":
        return made(STEP_NOT_STARTED, "launch",
                    "fix what the message names (the component's command, its code folder, or "
                    "its launch settings); nothing of the step ran")
    recorded = recorded_failure(f.record)
    if recorded is not None:
        return _from_record(f, recorded, made)
    if f.missing_outputs:
        return made(STEP_OUTPUT_NOT_WRITTEN, "contract", _missing_hint(f.missing_outputs[0]),
                    port=f.missing_outputs[0])
    if f.rejected_output is not None:
        port = f.rejected_output[0]
        if port in _metric_reports(f):
            return made(METRIC_MISSING_FROM_REPORT, "logging", _METRIC_HINT, port=port)
        return made(STEP_OUTPUT_REJECTED, "contract", _rejected_hint(port), port=port)
    if f.returncode is not None and f.returncode < 0:
        sig = -f.returncode
        return made(RANK_DIED, "launch",
                    f"the process was killed by signal {sig} ({_SIGNALS.get(sig, 'a signal')}); "
                    f"read the last lines of its log, and lower its memory use (batch size, "
                    f"processes per node) if it ran out")
    if f.launch in ("exited", "timeout") or _parts(f.record):
        return made(RANK_DIED, "launch",
                    "the process exited without its runtime recording why (os._exit, a crash "
                    "in native code, or a launch it could not start); read the last lines of "
                    "its log")
    return made(STEP_CODE_RAISED, "step-code",
                "read the step's log: its command exited non-zero after its inputs were "
                "accepted")


def _from_record(f: StepFailure, recorded: dict[str, Any], made) -> Diagnosis:
    layer = recorded.get("layer")
    port = recorded.get("port") if isinstance(recorded.get("port"), str) else None
    rank = recorded.get("rank")
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else f.rank
    if layer == "input-contract":
        return made(STEP_INPUT_REJECTED, "contract",
                    f"fix the data bound to input {port!r} or the step that produced it; "
                    f"`mlpipe show RUN --why STEP` says where it came from", rank=rank, port=port)
    if layer == "output-completeness":
        return made(STEP_OUTPUT_NOT_WRITTEN, "contract", _missing_hint(port), rank=rank, port=port)
    if layer == "output-contract":
        if port in _metric_reports(f):
            return made(METRIC_MISSING_FROM_REPORT, "logging", _METRIC_HINT, rank=rank, port=port)
        return made(STEP_OUTPUT_REJECTED, "contract", _rejected_hint(port), rank=rank, port=port)
    if layer == "launch":
        return made(PROCESS_GROUP_INIT_FAILED, "launch",
                    f"read the log of rank {rank if rank is not None else 0}: the launcher sets "
                    f"MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, so the script must not set "
                    f"them; use the gloo backend on CPU and nccl on GPU", rank=rank)
    if layer == "runtime":
        return made(RUNTIME_FAILED, "runtime",
                    "read the step's log; if the traceback is inside mlpipe, report it with "
                    "that log", rank=rank)
    reads = _reads(f.record, rank)
    if reads and recorded.get("type") in _FILE_ERRORS:
        shown = ", ".join(reads[:3]) + (f" (and {len(reads) - 3} more)" if len(reads) > 3 else "")
        return Diagnosis(UNDECLARED_INPUT_FAILED, "dependencies",
                         _sentence(f"{f.message}; the step read files it does not declare as "
                                   f"inputs: {shown}"),
                         "declare each file the step reads as an input (an Input port bound to "
                         "it), so it is snapshotted, part of the cache key and cited in the "
                         "evidence", rank, None, (), dict(f.logs or {}))
    return made(STEP_CODE_RAISED, "step-code",
                "read the traceback in the step's log: its inputs passed their contracts, so "
                "the fault is in the step's code or in data its contracts do not describe",
                rank=rank)


_METRIC_HINT = ("compute and log the metric the report's contract requires, on the population "
                "it names, and write it into the report")

_COORDINATION_HINTS = {
    "MP913": "save the output from one rank only, as the step's writers= policy declares: "
             "`if is_writer('model'): torch.save(...)`",
    "MP910": "give each rank its own part of the data with mlpipe.runtime.shard(ids) (or a "
             "DistributedSampler) and record what it consumed",
    "MP917": "reduce the metric across ranks before logging it as global "
             "(mlpipe.runtime.all_reduce_metric), or log each rank's value with scope='partial'",
}


def _missing_hint(port: str | None) -> str:
    return (f"write output {port!r} on every path through the body before it returns (an "
            f"empty folder is an output; a missing one is not)")


def _rejected_hint(port: str | None) -> str:
    return (f"make the step write what the contract of output {port!r} describes "
            f"(docs/contracts.md); the message names the first difference")


def _sentence(message: str) -> str:
    """The first line of a failure message (a log tail follows it in some)."""
    return message.strip().splitlines()[0] if message.strip() else message


__all__ = ["LAYERS", "Diagnosis", "StepFailure", "diagnose", "recorded_failure"]
