"""The hang watchdog of a distributed rank: a thread that notices the rank has waited in one
collective far longer than the step's collectives have taken so far, and then records this
rank's stack and the collective it waits in, and asks every other rank of the step to record
theirs (a ``hang`` file in the record folder), so that a step the launcher ends at its timeout
leaves every rank's stack and collective in its record (``trace.hang``; check MP542).

The limit is derived from the step's measured progress: ``HANG_FACTOR`` times the longest
collective this rank has finished, and never less than ``$MLPIPE_HANG_S`` (default 60 s).
Reads ``sys._current_frames``; never signals a process. Imports only the runtime's record.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from mlpipe.runtime import ranktrace, record

#: The shortest wait in one collective called a hang (seconds).
HANG_ENV = "MLPIPE_HANG_S"
HANG_DEFAULT_S = 60.0
#: A hang is a wait this many times the longest collective the rank finished before it.
HANG_FACTOR = 20.0
#: The file a rank that saw a hang leaves in the record folder: every rank then dumps.
HANG_FILE = "hang"
POLL_S = 0.25
#: Frames kept of a stack (the innermost ones).
STACK_FRAMES = 20


def floor_s() -> float:
    try:
        value = float(os.environ.get(HANG_ENV, HANG_DEFAULT_S))
    except ValueError:
        return HANG_DEFAULT_S
    return value if value > 0 else HANG_DEFAULT_S


def stack(thread_id: int | None = None) -> list[str]:
    """The main thread's stack (or ``thread_id``'s), innermost last: ``file:line in func``."""
    ident = thread_id if thread_id is not None else threading.main_thread().ident
    frame = sys._current_frames().get(ident or 0)
    if frame is None:
        return []
    return [f"{f.filename}:{f.lineno} in {f.name}"
            for f in traceback.extract_stack(frame)
            if not f.filename.startswith("<frozen")][-STACK_FRAMES:]


class Watchdog(threading.Thread):
    """Watches one rank's trace while its body runs; ``stop()`` ends it."""

    def __init__(self, trace: ranktrace.Trace, folder: str) -> None:
        super().__init__(name="mlpipe-watchdog", daemon=True)
        self.trace = trace
        self.flag = Path(folder) / HANG_FILE
        self.done = threading.Event()
        self.floor = floor_s()

    def limit(self) -> float:
        return max(self.floor, HANG_FACTOR * self.trace.longest_wait)

    def run(self) -> None:
        while not self.done.wait(POLL_S):
            if self.trace.hang is not None:
                return
            try:
                self._look()
            except Exception:  # never let the watching break the step
                return

    def _look(self) -> None:
        waiting = self.trace.waiting
        waited = time.monotonic() - waiting["since"] if waiting else 0.0
        if waiting and waited > self.limit():
            self._dump(waiting, waited, "waited past the limit")
            try:
                self.flag.write_text(str(record.identity()["rank"]), encoding="utf-8")
            except OSError:
                pass
        elif self.flag.exists():
            self._dump(waiting, waited, "another rank hung")

    def _dump(self, waiting: dict[str, Any] | None, waited: float, why: str) -> None:
        self.trace.hang = {"op": waiting["op"] if waiting else None,
                           "site": waiting["site"] if waiting else None,
                           "waited_s": round(waited, 3), "limit_s": round(self.limit(), 3),
                           "why": why, "at": record.now(), "stack": stack()}
        part = record.current()
        if part is not None:
            part.update(trace=ranktrace.public(self.trace.snapshot()))

    def stop(self) -> None:
        self.done.set()


def start(trace: ranktrace.Trace | None) -> Watchdog | None:
    """Start watching ``trace`` in a rank of a distributed step with a record folder."""
    where = record.folder()
    if trace is None or where is None or record.identity()["world_size"] <= 1:
        return None
    dog = Watchdog(trace, where)
    dog.start()
    return dog


__all__ = ["HANG_ENV", "HANG_FILE", "Watchdog", "floor_s", "stack", "start"]
