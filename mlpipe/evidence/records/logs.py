"""A step's logs, as the store points at them: which file(s) ``mlpipe logs RUN STEP [--rank N]``
prints, and following them while the step runs. Reads the store and log files; writes nothing.

The local executor writes a step's output to ``<logs>/RUN/STEP.log``; a distributed step's
processes each write ``<logs>/RUN/STEP.ranks/rank-<R>.log`` while they run, and the step's log
is their combined text, written when the step ends (docs/local.md).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mlpipe.errors import UsageError
from mlpipe.evidence.records.read_records import RUNNING, SKIPPED, Run, StepRun
from mlpipe.evidence.records.reader import Reader
from mlpipe.evidence.storage.liveness import alive, host

POLL_S = 0.2


@dataclass(frozen=True)
class StepLogs:
    """The log files of one step run: ``files`` maps a label (``""`` for the step's own log,
    ``"rank 1"`` for a rank's) to its path; ``note`` says where they came from when the step
    was reused."""

    step_run: StepRun
    files: dict[str, Path] = field(default_factory=dict)
    note: str | None = None


def rank_folder(log: Path) -> Path:
    """The folder of a distributed step's per-rank logs, beside the step's log."""
    return log.with_suffix(".ranks")


def _rank_files(log: Path) -> dict[int, Path]:
    folder = rank_folder(log)
    if not folder.is_dir():
        return {}
    return {int(p.stem.removeprefix("rank-")): p for p in folder.glob("rank-*.log")
            if p.stem.removeprefix("rank-").isdigit()}


def step_logs(s: Reader, run: Run, step: str, rank: int | None = None) -> StepLogs:
    """The log file(s) of ``step`` in ``run``: the step's own, or rank ``rank``'s.

    A reused step shows the log of the step run it reused. While a distributed step runs, its
    own log is not written yet: every rank's log is given instead.

    Raises:
        UsageError: no such step, a step that never ran, a rank the step did not have, or a
            log file that is gone.

    Example:
        >>> step_logs(reader, run, "train", rank=1).files
        {'rank 1': PosixPath('evidence/logs/r-1a2b/train.ranks/rank-1.log')}
    """
    steps = s.run_steps(run.id)
    sr = next((x for x in steps if x.step == step), None)
    if sr is None:
        raise UsageError(f"run {run.id} has no step {step!r} (steps: "
                         f"{', '.join(x.step for x in steps) or 'none'})",
                         hint="give one of those step names")
    note, shown = None, sr
    while shown.reused_from_id and not shown.log_path:
        origin = shown.reused_from
        if origin is None:
            break
        note = (f"step {step!r} was reused from step run {origin.id} (run {origin.run_id}); "
                f"this is that run's log")
        shown = origin
    if not shown.log_path and run.target == "azure":
        url = (((run.options or {}).get("steps") or {}).get(step) or {}).get("studio_url")
        raise UsageError(f"step {step!r} of run {run.id} ran on Azure ML: its logs are kept "
                         f"there" + (f", {url}" if url else ""),
                         hint="open the job's page in Azure ML studio (Outputs + logs), or "
                              "`az ml job download --all`")
    if not shown.log_path:
        why = ("it was skipped: " + (sr.message or "an upstream step failed")
               if sr.status == SKIPPED else f"it is {sr.status} and no log was recorded")
        raise UsageError(f"step {step!r} of run {run.id} has no log: {why}",
                         hint=f"see `mlpipe show {run.id}` for the step that failed")
    log = Path(shown.log_path)
    ranks = _rank_files(log)
    if rank is not None:
        if not ranks and not rank_folder(log).is_dir():
            raise UsageError(f"step {step!r} of run {run.id} ran as one process; it has no "
                             f"rank logs", hint=f"drop --rank: `mlpipe logs {run.id} {step}`")
        if rank not in ranks:
            raise UsageError(f"step {step!r} of run {run.id} has no log of rank {rank} (ranks: "
                             f"{', '.join(map(str, sorted(ranks))) or 'none yet'})",
                             hint="give one of those ranks to --rank")
        return StepLogs(shown, {f"rank {rank}": ranks[rank]},
                        _silent(note, shown, ranks[rank], f"rank {rank} of step {step!r}"))
    if shown.status == RUNNING and ranks and not log.exists():
        return StepLogs(shown, {f"rank {r}": ranks[r] for r in sorted(ranks)}, note)
    if not log.exists():
        if shown.status == RUNNING:  # about to start: the file is made as the process starts
            return StepLogs(shown, {"": log}, note)
        raise UsageError(f"the log of step {step!r} of run {run.id} is gone: {log}",
                         hint="logs are kept under the store's logs folder; it was removed")
    return StepLogs(shown, {"": log}, _silent(note, shown, log, f"step {step!r}"))


def _silent(note: str | None, shown: StepRun, path: Path, who: str) -> str | None:
    """``note``, and that ``who`` printed nothing where its finished log is empty (so an
    empty output is said, not left to look like a failure to read)."""
    try:
        empty = shown.status != RUNNING and path.stat().st_size == 0
    except OSError:
        return note
    if not empty:
        return note
    said = f"{who} printed nothing: its log {path} is empty"
    return f"{note}; {said}" if note else said


def _running(s: Reader, step_run_id: str) -> bool:
    sr = s.step_run(step_run_id)
    if sr is None or sr.status != RUNNING:
        return False
    run = s.get_run(sr.run_id)
    if run is None:
        return False
    # an executor that was killed leaves its step "running": stop following it
    return run.host != host() or run.pid is None or alive(run.pid, run.pid_started)


def follow(s: Reader, logs: StepLogs, *, poll: float = POLL_S,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
    """The text of ``logs`` as it is written, until its step run is no longer running (then
    what is left). Several files (a running distributed step's ranks) come line by line, each
    line prefixed with its rank: ``[rank 1] ...``.

    Example:
        >>> for text in follow(reader, step_logs(reader, run, "train")):
        ...     sys.stdout.write(text)
    """
    offsets = dict.fromkeys(logs.files, 0)
    pending = dict.fromkeys(logs.files, "")
    several = len(logs.files) > 1

    def read() -> Iterator[str]:
        for label, path in logs.files.items():
            try:
                with open(path, "rb") as fh:
                    fh.seek(offsets[label])
                    data = fh.read()
            except OSError:
                continue
            if not data:
                continue
            offsets[label] += len(data)
            text = pending[label] + data.decode("utf-8", "replace")
            if several:
                *lines, pending[label] = text.split("\n")
                yield "".join(f"[{label}] {line}\n" for line in lines)
            else:
                yield text

    while True:
        still = _running(s, logs.step_run.id)
        yield from read()
        if not still:
            yield from read()
            for label, rest in pending.items():
                if rest:
                    yield f"[{label}] {rest}\n"
            return
        sleep(poll)


def read_all(logs: StepLogs) -> str:
    """The whole text of ``logs`` now (ranks' lines prefixed, as ``follow`` gives them)."""
    if len(logs.files) == 1:
        path = next(iter(logs.files.values()))
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""
    parts = []
    for label, path in logs.files.items():
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        parts += [f"[{label}] {line}\n" for line in text.splitlines()]
    return "".join(parts)


__all__ = ["StepLogs", "follow", "rank_folder", "read_all", "step_logs"]
