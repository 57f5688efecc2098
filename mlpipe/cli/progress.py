"""Showing a pipeline job's progress while ``submit --wait`` follows it: a live table on a
terminal (rich), one line per change elsewhere (CI logs, pipes, files).

Rendering only; the polling is ``backends.azure.follow``'s.
"""
from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from mlpipe.backends.azure.sync import job_time

#: Variables that mark a CI log (plain lines there even if it claims to be a terminal).
CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "TF_BUILD", "BUILDKITE", "JENKINS_URL")


def live_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (and not a CI log)."""
    if any(os.environ.get(v) for v in CI_VARIABLES) or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def took(step: Any, now: datetime | None = None) -> str:
    """How long a step has run (or ran): ``1m05s``; ``-`` before it started."""
    start, end = job_time(step.started_at), job_time(step.finished_at)
    if start is None:
        return "-"
    seconds = max(0, int(((end or now or datetime.now(UTC)) - start).total_seconds()))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _how(step: Any) -> str:
    return f"reused {step.reused_from}" if step.reused else ""


class PlainProgress:
    """One line per change of the pipeline's or a step's status, with the time (UTC)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.seen: dict[str, tuple[str | None, bool]] = {}

    def __call__(self, progress: Any) -> None:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        p = progress.pipeline
        rows = [(f"pipeline {p.name}", p.status, False, "", None)]
        rows += [(s.node or s.name, s.status, s.reused, _how(s), s) for s in progress.steps]
        for key, status, reused, how, step in rows:
            if self.seen.get(key) == (status, reused):
                continue
            self.seen[key] = (status, reused)
            extra = [how] if how else []
            if step is not None and status in ("Completed", "Failed", "Canceled"):
                extra.append(f"took {took(step)}")
            print(f"{stamp} {key:<24} {status or '?'}" + (f"  ({', '.join(extra)})"
                                                          if extra else ""),
                  file=self.stream, flush=True)

    def close(self) -> None:
        pass


class LiveProgress:
    """A table of the steps (status, reused, time) redrawn in place on a terminal."""

    def __init__(self, stream: TextIO, title: str) -> None:
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.console = Console(file=stream)
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def __call__(self, progress: Any) -> None:
        from rich.table import Table

        p = progress.pipeline
        table = Table(title=f"{self.title}  Azure ML job {p.name}: {p.status}",
                      title_justify="left")
        for column in ("STEP", "STATUS", "REUSED", "TIME"):
            table.add_column(column)
        for s in progress.steps:
            style = {"Failed": "red", "Canceled": "yellow", "Completed": "green",
                     "Running": "cyan"}.get(s.status or "", "")
            table.add_row(s.node or s.name, f"[{style}]{s.status}[/]" if style else
                          (s.status or "?"), (s.reused_from or "yes") if s.reused else "",
                          took(s))
        self.live.update(table, refresh=True)

    def close(self) -> None:
        self.live.stop()


def progress_view(stream: TextIO | None = None, title: str = ""):
    """A live table on a terminal, plain lines elsewhere."""
    stream = stream or sys.stdout
    return LiveProgress(stream, title) if live_terminal(stream) else PlainProgress(stream)
