"""What a step process started ends with it: the step adopts its orphaned descendants (Linux's
child subreaper) and kills every process still below it when its body has returned.

Used by the step runtime only; the executor's reaper covers a step that is killed outright.
"""
from __future__ import annotations

import os
import signal
import sys

from mlpipe import procstat

_PR_SET_CHILD_SUBREAPER = 36


def adopt() -> None:
    """Make this process the parent of any process orphaned below it (a double fork's
    grandchild), so that :func:`stop` finds it; a no-op off Linux."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        pass


def stop() -> int:
    """SIGKILL every living process below this one and reap it; how many were killed."""
    if not sys.platform.startswith("linux") or not _has_children():
        return 0
    me, killed = os.getpid(), 0
    for _ in range(50):  # a killed child's own children come to us next round
        kids = _living_children(me)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        _reap()
        if not kids:
            break
    return killed


def _living_children(me: int) -> list[int]:
    """The children of this process that are not zombies: from the kernel's list of each
    thread's children (``/proc/self/task/*/children``, a few reads), else from the whole
    process table (a read per process on the machine: milliseconds on a busy one)."""
    try:
        tasks = os.listdir("/proc/self/task")
        pids: set[int] = set()
        for task in tasks:
            with open(f"/proc/self/task/{task}/children", "rb") as fh:
                pids.update(int(pid) for pid in fh.read().split())
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN
        return [pid for pid, ppid, state in _table() if ppid == me and state != "Z"]
    return [pid for pid in sorted(pids) if _state(pid) not in ("Z", None)]


def _state(pid: int) -> str | None:
    fields = procstat.stat_fields(pid)
    return None if fields is None else fields[0].decode()  # None: gone already


def _has_children() -> bool:
    """Whether any process is this one's child (one system call; most steps start none)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _table() -> list[tuple[int, int, str]]:
    rows = []
    for pid in procstat.pids():
        fields = procstat.stat_fields(pid)
        if fields is not None:
            rows.append((pid, int(fields[1]), fields[0].decode()))
    return rows


def _reap() -> None:
    import time

    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if not any(ppid == os.getpid() for _, ppid, _ in _table()):
                return
            time.sleep(0.01)
