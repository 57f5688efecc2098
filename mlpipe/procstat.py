"""What Linux's ``/proc`` says of the processes on this machine: which there are, and the
fields of one's ``stat`` file. Read by the step runtime (the children it stops), the local
launcher (a process group's members) and the store (whether a run's process still lives);
imports nothing of mlpipe and signals nothing.
"""
from __future__ import annotations

import os


def pids() -> list[int]:
    """The id of every process now in ``/proc``; none where there is no ``/proc``."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit()]


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name, or None where the process is
    gone (or there is no ``/proc``): ``[0]`` its state, ``[1]`` its parent, ``[2]`` its process
    group, ``[19]`` when it started (clock ticks since boot, which tells a reused pid apart).

    Example:
        >>> stat_fields(os.getpid())[0]
        b'R'
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return None
    # the command name is in parentheses and may itself hold ")" and spaces
    return text[text.rfind(b")") + 2:].split()
