"""A step's logs: the tail a failure shows, and a distributed step's per-rank logs (where
they are, and combined into the step's log)."""
from __future__ import annotations

import os
from pathlib import Path

LOG_TAIL_LINES = 20


def rank_logs(log: Path) -> Path:
    """The folder of a distributed step's per-rank logs (``rank-<R>.log``) beside its log."""
    return log.with_suffix(".ranks")


def combined_rank_logs(folder: Path, last: int | None = None) -> str:
    """The ranks' logs as one text: each rank that printed something under a
    ``--- rank-N.log ---`` header, in rank order with rank ``last`` (the one that failed) at
    the end, where a log's tail shows it; the ranks that printed nothing on one line."""
    logs: dict[int, str] = {}
    for path in folder.glob("rank-*.log"):
        number = path.stem.removeprefix("rank-")
        if number.isdigit():
            logs[int(number)] = path.read_text(errors="replace")
    order = sorted(logs, key=lambda r: (r == last, r))
    silent = [r for r in order if not logs[r].strip()]
    parts = []
    if silent:
        parts.append(f"(rank{'s' if len(silent) > 1 else ''} "
                     f"{', '.join(map(str, sorted(silent)))} printed nothing)\n")
    for r in order:
        if logs[r].strip():
            body = logs[r] if logs[r].endswith("\n") else logs[r] + "\n"
            parts.append(f"--- rank-{r}.log ---\n{body}")
    return "".join(parts)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
