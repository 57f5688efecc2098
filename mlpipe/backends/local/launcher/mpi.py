"""An MPI launch: one ``mpirun -np N`` (OpenMPI) that starts and ranks the processes itself,
its tagged output split into one log per rank, and its failure named by rank.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

from mlpipe.backends.local.launcher.group import GRACE_S, Worker, signal_group, tail
from mlpipe.backends.local.launcher.layout import Plan
from mlpipe.errors import LaunchFailed, UsageError

_MPI_TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:")


def run_mpi(argv: list[str], layout: Plan, base: dict[str, str], cwd: str | Path | None,
            logs: Path, timeout: float | None):
    """Run the launch through mpirun; return (workers, per-rank variables).

    Raises:
        UsageError: no mpirun on PATH.
        LaunchFailed: a rank failed, or the step timed out.
    """
    mpirun = shutil.which("mpirun", path=base.get("PATH"))
    if mpirun is None:
        raise UsageError(
            "an Mpi distribution is launched with mpirun, and no mpirun is on PATH",
            hint="install OpenMPI (Debian: apt-get install openmpi-bin), or run the step with "
                 "PyTorch(...) locally")
    cmd = [mpirun, "-np", str(layout.world), "--oversubscribe", "--tag-output"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for key in sorted(base):
        if key.startswith("MLPIPE_") or key == "PYTHONPATH":
            cmd += ["-x", key]
    cmd += argv
    log = logs / "mpirun.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=base, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout)
        failure = None
    except subprocess.TimeoutExpired:
        code, failure = None, f"the MPI step exceeded its timeout of {timeout:g} s"
    except BaseException:
        _stop_one(proc)
        raise
    _stop_one(proc)
    text = log.read_text(errors="replace")
    # split the tagged output ("[1,RANK]<stdout>:line") into one log per rank
    per_rank: dict[int, list[str]] = {r: [] for r in range(layout.world)}
    for line in text.splitlines():
        m = _MPI_TAG.match(line)
        if m and int(m.group(1)) in per_rank:
            per_rank[int(m.group(1))].append(_MPI_TAG.sub("", line))
    for rank, lines in per_rank.items():
        (logs / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    rank: int | None = None
    if failure is None and code != 0:
        m = re.search(r"Process name: \[\[\d+,\d+\],(\d+)\]", text)
        m2 = re.search(r"Exit code:\s*(-?\d+)", text)
        rank = int(m.group(1)) if m else None
        failure = (f"rank {rank if rank is not None else '?'} of {layout.world} exited with code "
                   f"{m2.group(1) if m2 else code}; mpirun stopped the job")
    if failure is not None:
        rank = rank if code is not None and failure.startswith("rank") else None
        path = logs / (f"rank-{rank}.log" if rank is not None else "mpirun.log")
        raise LaunchFailed(failure, rank=rank, returncode=code, log_path=str(path),
                           log_tail=tail(path), hint="see the rank's log",
                           kind="timeout" if code is None else "exited")
    workers = tuple(Worker(r, lr, nr, "worker", proc.pid, logs / f"rank-{r}.log", code)
                    for r, lr, nr, _, _ in layout.roles)
    return workers, {}


def _stop_one(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
