"""The step processes now running: started (forked from the fork server or a fresh
interpreter), watched by the reaper, and stopped together when a run is interrupted."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from mlpipe.backends.local.reaper import Reaper


class Processes:
    """The step processes now running, so an interrupted executor can stop them all.

    With a ``forkserver`` attached, a plain Python step is forked from it instead of starting
    a fresh interpreter (see :mod:`mlpipe.backends.local.forkserver`). Each step leads a
    process group of its own, watched by the reaper (:mod:`mlpipe.backends.local.reaper`):
    what a step leaves running when it ends is killed, and so is what any step started when
    the executor itself dies.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[Any] = set()
        self.stopping = False
        self.forkserver: Any = None
        self.reaper = Reaper()

    def run(self, argv: list[str], *, env: dict[str, str], cwd: str, log: Path,
            request: dict[str, Any] | None = None, request_file: Path | None = None) -> int:
        """Run one step process to its end with its output in ``log``; its exit status.

        Args:
            request: the step's request when the fork server may serve it; it is written to
                ``request_file`` (which ``argv`` names) only if a fresh interpreter must.
        """
        with open(log, "w") as out:
            proc = None
            if request is not None and self.forkserver is not None:
                proc = self.forkserver.spawn(request, env=env, cwd=cwd, log=str(log))
            if proc is None:
                if request is not None and request_file is not None:
                    request_file.write_text(json.dumps(request))
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                        cwd=cwd, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        self.add(proc)
        try:
            return proc.wait()
        finally:
            self.discard(proc)

    def add(self, proc: Any) -> None:
        if proc.pid is not None:
            self.reaper.watch(proc.pid)
        with self._lock:
            self._procs.add(proc)
            stopping = self.stopping
        if stopping and proc.pid is not None:  # started while the run was being stopped
            _signal_group(proc.pid, signal.SIGTERM)

    def discard(self, proc: Any) -> None:
        with self._lock:
            self._procs.discard(proc)
        if proc.pid is not None:
            self.reaper.release(proc.pid)

    def stop_all(self) -> None:
        with self._lock:
            self.stopping = True
            procs = list(self._procs)
        for proc in procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        """Stop the fork server, if one was started (it stops any step it still runs)."""
        server, self.forkserver = self.forkserver, None
        if server is not None:
            server.close()
        self.reaper.close()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:  # a forked step that has not made its own session yet
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
