"""The progress display of a local run: one line per step event, on a stream.

Only renders what the scheduler tells it; decides nothing.
"""
from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """Prints ``[done/total] step status seconds detail`` lines as steps finish.

    Args:
        total: number of steps in the run.
        stream: where to print (stderr by default); None prints nothing.
    """

    def __init__(self, total: int, stream: TextIO | None = sys.stderr) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.width = 12

    def _print(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)

    def header(self, run_id: str, pipeline: str, workers: int) -> None:
        self._print(f"run {run_id}: pipeline {pipeline!r}, {self.total} step"
                    f"{'s' if self.total != 1 else ''}, up to {workers} at a time")

    def started(self, step: str) -> None:
        self._print(f"[{self.done}/{self.total}] {step:<{self.width}} running")

    def finished(self, step: str, status: str, seconds: float | None = None,
                 detail: str | None = None) -> None:
        self.done += 1
        took = f" {seconds:6.2f}s" if seconds is not None else ""
        more = f"  {detail}" if detail else ""
        self._print(f"[{self.done}/{self.total}] {step:<{self.width}} {status}{took}{more}")

    def note(self, text: str) -> None:
        self._print(f"  note: {text}")
