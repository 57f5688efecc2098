"""A failed step, diagnosed at the layer that failed: from what its runtime recorded and what
its launcher saw, the guide's layer (contract and output completeness; launch topology and
framework initialization; model output ownership; application logging and worker aggregation;
declared dependencies and reuse), a code MP900-MP930, the concrete message, a fix and the logs.

Pure: it reads the facts a backend hands it and never opens a file or a store. Shared by every
backend that runs steps, so a diagnosis means the same thing wherever the step failed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlpipe.codes import (
    CONTRACT_MISMATCH_FROM_WIRING,
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
from mlpipe.graph import FromInput, FromStep, Graph

_MODEL_KINDS = ("mlflow_model", "custom_model")

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
        mismatch: what differed in that output (``ContractError.mismatch``).
        not_started: the step could not be started (its command or code is unusable).
        metric_reports: the output ports whose contract is a metrics report.
        logs: ``{"step": path, "ranks": {"0": path, ...}}``.
        hint: the launcher's own hint, where it gave one (a refusal's fix).
        wiring: where each input of the step is bound from (``wiring(graph, step)``).
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
    mismatch: str | None = None
    not_started: bool = False
    metric_reports: frozenset[str] = frozenset()
    logs: Mapping[str, Any] | None = None
    hint: str | None = None
    wiring: Sequence[Wire] = ()


@dataclass(frozen=True)
class Wire:
    """One input edge of a step, as its graph wires it.

    Args:
        port: the step's input port.
        source: what it is bound to: ``prepare.table`` (a step's output) or ``inputs.raw``.
        trained_on: ``train.table`` for each step that trains a model this step reads, on
            the very artifact bound here.
    """

    port: str
    source: str
    trained_on: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"port": self.port, "source": self.source, "trained_on": list(self.trained_on)}

    @classmethod
    def read(cls, value: Any) -> Wire | None:
        """A wire as ``to_dict`` wrote it (a run's stored plan); None if it is not one."""
        if not isinstance(value, Mapping) or not isinstance(value.get("port"), str) \
                or not isinstance(value.get("source"), str):
            return None
        trained = value.get("trained_on")
        return cls(value["port"], value["source"], tuple(
            t for t in trained if isinstance(t, str)) if isinstance(trained, list) else ())


def wiring(graph: Graph, step: str) -> tuple[Wire, ...]:
    """The input edges of ``step`` (data inputs only, not the models it reads), each with the
    training steps of those models that read the same artifact.

    Example:
        >>> [w.source for w in wiring(graph, "evaluate")]   # doctest: +SKIP
        ['prepare.train_table']
    """
    node = graph.steps.get(step)
    if node is None:
        return ()
    trainers: list[tuple[str, str, object]] = []
    for port in node.component.inputs:
        bound = node.bindings.get(port.name)
        if port.kind.value not in _MODEL_KINDS or not isinstance(bound, FromStep) \
                or bound.node not in graph.steps:
            continue
        trainer = graph.steps[bound.node]
        trainers += [(trainer.id, tport.name, trainer.bindings.get(tport.name))
                     for tport in trainer.component.inputs if tport.kind.value not in _MODEL_KINDS]
    wires = []
    for port in node.component.inputs:
        bound = node.bindings.get(port.name)
        if port.kind.value in _MODEL_KINDS or not isinstance(bound, (FromStep, FromInput)):
            continue
        wires.append(Wire(port.name, str(bound),
                          tuple(f"{t}.{tp}" for t, tp, tb in trainers if tb == bound)))
    return tuple(wires)


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
        return _from_record(f, {"layer": "output-contract", "port": f.rejected_output[0],
                                "mismatch": f.mismatch, "rank": None}, made)
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
    if layer in ("input-contract", "output-contract"):
        wired = _wired_cause(f, layer, port, recorded.get("mismatch"), rank)
        if wired is not None:
            return wired
    if layer == "input-contract":
        return made(STEP_INPUT_REJECTED, "contract",
                    f"fix the data bound to input {port!r} or the step that produced it; "
                    f"`mlpipe show RUN --why STEP` says where it came from", rank=rank, port=port)
    if layer == "output-completeness":
        return made(STEP_OUTPUT_NOT_WRITTEN, "contract", _missing_hint(port), rank=rank, port=port)
    if layer == "output-contract":
        if port in _metric_reports(f) and recorded.get("mismatch") != "population":
            return made(METRIC_MISSING_FROM_REPORT, "logging", _METRIC_HINT, rank=rank, port=port)
        if port in _metric_reports(f):
            return made(STEP_OUTPUT_REJECTED, "contract", _population_hint(f, port), rank=rank,
                        port=port)
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


def _wired_cause(f: StepFailure, layer: str, port: str | None, mismatch: Any,
                 rank: int | None) -> Diagnosis | None:
    """MP930 where the step's contract caught data its wiring gave it: an input bound to the
    very artifact the model it evaluates was trained on, and the contract rejecting either
    that input or a report computed on the wrong population (not a missing metric)."""
    if layer == "output-contract" and not (port in _metric_reports(f)
                                           and mismatch == "population"):
        return None
    shared = [w for w in f.wiring if w.trained_on
              and (layer == "output-contract" or w.port == port)]
    if not shared:
        return None
    w = shared[0]
    caught = (f"its output {port!r} was computed on the wrong population"
              if layer == "output-contract" else f"its input {port!r} was rejected")
    message = (f"{_sentence(f.message)}; {caught} because input {w.port!r} is wired to "
               f"'{w.source}', the artifact {' and '.join(repr(t) for t in w.trained_on)} "
               f"trains on (edge '{w.source}' -> '{f.step}.{w.port}')")
    return Diagnosis(CONTRACT_MISMATCH_FROM_WIRING, "contract", message,
                     f"wire '{f.step}.{w.port}' to the held-out artifact (the test part of a "
                     f"recorded split), not to '{w.source}'; the metric itself was computed and "
                     f"reported", rank, port, (), dict(f.logs or {}))


def _population_hint(f: StepFailure, port: str | None) -> str:
    data = ", ".join(f"'{f.step}.{w.port}' <- '{w.source}'" for w in f.wiring)
    return (f"the report {port!r} holds the metric, computed on a population its contract does "
            f"not name: compute it on the population the contract requires"
            + (f"; the population comes from the step's inputs ({data}): check that they are "
               f"wired to that population" if data else ""))


def _missing_hint(port: str | None) -> str:
    return (f"write output {port!r} on every path through the body before it returns (an "
            f"empty folder is an output; a missing one is not)")


def _rejected_hint(port: str | None) -> str:
    return (f"make the step write what the contract of output {port!r} describes "
            f"(docs/contracts.md); the message names the first difference")


def _sentence(message: str) -> str:
    """The first line of a failure message (a log tail follows it in some)."""
    return message.strip().splitlines()[0] if message.strip() else message


__all__ = ["LAYERS", "Diagnosis", "StepFailure", "Wire", "diagnose", "recorded_failure",
           "wiring"]
