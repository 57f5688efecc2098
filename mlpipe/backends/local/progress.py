"""The progress display of a local run: one line per step event, on a stream, and for a step
that runs long its elapsed time and the last line of its log (of each rank's, for a distributed
step): a live table on a terminal (rich), a plain line every MLPIPE_PROGRESS_S seconds in CI
logs, pipes and files.

Only renders what the scheduler tells it and what the step logs hold; decides nothing.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

#: Seconds before a running step shows its progress, and between plain progress lines
#: (MLPIPE_PROGRESS_S; 0 switches them off).
INTERVAL_ENV = "MLPIPE_PROGRESS_S"
INTERVAL_DEFAULT_S = 10.0
#: Variables that mark a CI log (plain lines there even if it claims to be a terminal).
CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "TF_BUILD", "BUILDKITE", "JENKINS_URL")
_TAIL = 4096


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get(INTERVAL_ENV, INTERVAL_DEFAULT_S)))
    except ValueError:
        return INTERVAL_DEFAULT_S


def _terminal(stream: TextIO | None) -> bool:
    if stream is None or any(os.environ.get(v) for v in CI_VARIABLES) \
            or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def last_line(path: Path) -> str | None:
    """The last non-empty line of a log file (read from its end), or None."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL))
            data = fh.read()
    except OSError:
        return None
    lines = [x.strip() for x in data.decode("utf-8", "replace").splitlines() if x.strip()]
    return lines[-1][:200] if lines else None


def log_tails(log: Path) -> list[tuple[str, str | None]]:
    """``(who, last line)`` of a running step: each rank's (``rank 0``...) where it launched
    ranks, else the step's own."""
    folder = log.with_suffix(".ranks")
    ranks = sorted((int(p.stem.removeprefix("rank-")), p) for p in folder.glob("rank-*.log")
                   if p.stem.removeprefix("rank-").isdigit()) if folder.is_dir() else []
    if ranks:
        return [(f"rank {r}", last_line(p)) for r, p in ranks]
    return [("log", last_line(log))]


class Progress:
    """Prints ``[done/total] step status seconds detail`` lines as steps finish.

    Args:
        total: number of steps in the run.
        stream: where to print (stderr by default); None prints nothing.
    """

    def __init__(self, total: int, stream: TextIO | None = sys.stderr, *,
                 interval: float | None = None, live: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.width = 12
        self.interval = _interval() if interval is None else interval
        self.live_view = _terminal(stream) if live is None else live
        self.running: dict[str, tuple[float, Path | None]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._live: Any = None

    def _print(self, text: str) -> None:
        if self.stream is None:
            return
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    # --- long steps: elapsed time and the last log lines ---------------------------------

    def progress_lines(self, now: float | None = None) -> list[str]:
        """One line per step running past the interval (elapsed seconds, the last log line),
        and one per rank of a distributed step."""
        now = time.monotonic() if now is None else now
        lines = []
        with self._lock:
            running = sorted(self.running.items())
        for step, (start, log) in running:
            elapsed = now - start
            if elapsed < self.interval:
                continue
            tails = log_tails(log) if log is not None else []
            head = f"  ... {step:<{self.width}} running {elapsed:.0f}s"
            if len(tails) == 1:
                lines.append(head + (f"  {tails[0][1]}" if tails[0][1] else ""))
                continue
            lines.append(head)
            lines += [f"        {who}: {line or '(nothing printed yet)'}" for who, line in tails]
        return lines

    def _tick(self) -> None:
        while not self._stop.wait(1.0 if self._live is not None else self.interval):
            if self._live is not None:
                self._live.update(self._table(), refresh=True)
                continue
            for line in self.progress_lines():
                self._print(line)

    def _table(self) -> Any:
        from rich.text import Text

        return Text("\n".join(self.progress_lines()))

    def _start_ticker(self) -> None:
        if self._ticker is not None or self.stream is None or self.interval <= 0:
            return
        if self.live_view:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=self.stream), transient=True,
                              auto_refresh=False)
            self._live.start()
        self._ticker = threading.Thread(target=self._tick, name="mlpipe-progress", daemon=True)
        self._ticker.start()

    def close(self) -> None:
        """Stop the progress of long steps (the run is over)."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self._live is not None:
            self._live.stop()
            self._live = None

    def header(self, run_id: str, pipeline: str, workers: int) -> None:
        self._print(f"run {run_id}: pipeline {pipeline!r}, {self.total} step"
                    f"{'s' if self.total != 1 else ''}, up to {workers} at a time")

    def started(self, step: str, log: Path | None = None) -> None:
        self._print(f"[{self.done}/{self.total}] {step:<{self.width}} running")
        with self._lock:
            self.running[step] = (time.monotonic(), log)
        self._start_ticker()

    def finished(self, step: str, status: str, seconds: float | None = None,
                 detail: str | None = None) -> None:
        with self._lock:
            self.running.pop(step, None)
        self.done += 1
        took = f" {seconds:6.2f}s" if seconds is not None else ""
        more = f"  {detail}" if detail else ""
        self._print(f"[{self.done}/{self.total}] {step:<{self.width}} {status}{took}{more}")

    def note(self, text: str) -> None:
        self._print(f"  note: {text}")
