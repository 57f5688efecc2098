"""Time limits for the suite's subprocesses, scaled by how slowly this machine runs a process
now, measured, instead of fixed constants that a busy machine outgrows (issue 41).

``limit(120)`` is a limit of 120 s on a quiet machine, multiplied by ``slowdown()``: the
median, over three runs of ``python -c pass``, of its wall time over its CPU time (about 1 on
an idle machine; 10 to 40 where other jobs hold the cores). The measurement is repeated when
it is older than a minute, so a run that starts quiet and becomes busy (or the reverse) follows
the machine. ``MLPIPE_TEST_SLOWDOWN`` sets the factor instead (a CI runner that knows its
load). A limit the test itself is about (a step that must time out, a rendezvous that must
give up) is not a time limit of the machine and is not scaled.
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

#: The factor never exceeds this: a limit is a guard against a hang, and ten times the quiet
#: figure is already minutes.
MAX_SLOWDOWN = 10.0
#: How long one measurement stands (seconds).
MEASURED_FOR_S = 60.0
_measured: tuple[float, float] | None = None  # (when, factor)


def _one_ratio() -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-c", "pass"], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall / max(cpu, 0.005)


def slowdown() -> float:
    """How many times slower than on an idle machine a process runs here now (1 to
    ``MAX_SLOWDOWN``)."""
    global _measured
    given = os.environ.get("MLPIPE_TEST_SLOWDOWN")
    if given:
        return min(MAX_SLOWDOWN, max(1.0, float(given)))
    now = time.monotonic()
    if _measured is None or now - _measured[0] > MEASURED_FOR_S:
        factor = statistics.median(_one_ratio() for _ in range(3))
        _measured = (now, min(MAX_SLOWDOWN, max(1.0, factor)))
    return _measured[1]


def limit(seconds: float) -> float:
    """``seconds`` (enough, with margin, on a quiet machine) scaled by ``slowdown()``."""
    return seconds * slowdown()
