"""The executor's side of the step fork server: start it, ask it for step processes, stop it.

One server per run, started lazily from the scheduler thread (its parent-death signal follows
that thread), preloaded with the run's component modules. A step it cannot serve (the server
refused to fork, or died) falls back to a fresh interpreter. Knows nothing of the store.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from mlpipe.spec import ComponentSpec

ENV_SWITCH = "MLPIPE_FORKSERVER"  # "0" runs every step in a fresh interpreter


def enabled() -> bool:
    """Whether steps may be forked here: Linux (parent-death signals) and not switched off."""
    return sys.platform.startswith("linux") and os.environ.get(ENV_SWITCH, "1") != "0"


def forkable(component: ComponentSpec) -> bool:
    """Whether a step of ``component`` can come from the fork server.

    Not for a script component (it runs a command), nor for one that sets environment
    variables: its module may read them at import, which the server did before they were set.
    Distributed steps never ask (the launcher starts their ranks).
    """
    if component.function is None or component.command is not None:
        return False
    if component.environment_variables:
        return False
    return component.environment is None or not component.environment.variables


def module_of(component: ComponentSpec) -> str | None:
    module = (component.function or "").partition(":")[0]
    return module if module and module != "__main__" else None


class ForkedStep:
    """A step process forked by the server; waits like ``subprocess.Popen``."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.returncode: int | None = None
        self.refused: str | None = None
        self._started = threading.Event()
        self._done = threading.Event()

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("forked step", timeout or 0)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """A running ``python -m mlpipe.runtime.forkserver`` for one run.

    Args:
        modules: the component modules to import before forking.
        sys_path: entries the steps need on ``sys.path``.
        cwd: the steps' working directory.
        log: where the server's own output goes (what importing the modules printed).

    Example:
        >>> server = ForkServer(["steps"], sys_path=[], cwd=".", log=Path("server.log"))
        >>> step = server.spawn({"function": "steps:double", "sys_path": [], "inputs": {},
        ...                      "outputs": {"out": "o.txt"}, "params": {}},
        ...                     env=dict(os.environ), cwd=".", log="s.log")
        >>> step.wait() if step else None
        0
    """

    def __init__(self, modules: list[str], *, sys_path: list[str], cwd: str, log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "mlpipe.runtime.forkserver", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=cwd,
                start_new_session=True)
        self._log = log
        self._used = False
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._steps: dict[int, ForkedStep] = {}
        self._ready = threading.Event()
        self.why_not: str | None = None  # why the server cannot be used, once known
        self._send({"op": "preload", "modules": modules, "sys_path": sys_path, "cwd": cwd})
        threading.Thread(target=self._read, name="mlpipe-forkserver", daemon=True).start()

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(message) + "\n").encode())
        self._proc.stdin.flush()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            message = json.loads(line)
            op = message["op"]
            if op == "ready":
                self.why_not = None if message["ok"] else message["why"]
                self._ready.set()
                continue
            with self._lock:
                step = self._steps.get(message["id"])
            if step is None:
                continue
            if op == "started":
                step.pid = message["pid"]
                step._started.set()
            elif op == "failed":
                step.refused = message["why"]
                step._started.set()
            elif op == "exited":
                self._forget(message["id"], message["returncode"])
        self._proc.wait()
        if not self._ready.is_set():
            self.why_not = f"the fork server exited with status {self._proc.returncode}"
            self._ready.set()
        self.why_not = self.why_not or "the fork server has stopped"
        with self._lock:
            pending = list(self._steps)
        for ident in pending:  # the server is gone: its steps died with it (SIGKILL)
            self._forget(ident, -9, refused="the fork server stopped before the step started")

    def _forget(self, ident: int, returncode: int, refused: str | None = None) -> None:
        with self._lock:
            step = self._steps.pop(ident, None)
        if step is None:
            return
        if step.pid is None:
            step.refused = refused
        step.returncode = returncode
        step._started.set()
        step._done.set()

    def spawn(self, request: dict[str, Any], *, env: dict[str, str], cwd: str, log: str
              ) -> ForkedStep | None:
        """Fork a step that does what ``python -m mlpipe.runtime.step REQUEST.json`` does
        (``request`` is passed in the message, never written to a file).

        Returns:
            The running step, or None when the server cannot serve it (run it fresh instead).
        """
        self._ready.wait()
        if self.why_not is not None:
            return None
        step = ForkedStep()
        self._used = True
        with self._lock:
            ident = next(self._ids)
            self._steps[ident] = step
            try:
                self._send({"op": "run", "id": ident, "request": request, "env": env,
                            "cwd": cwd, "log": log})
            except (BrokenPipeError, ValueError, OSError):
                self._steps.pop(ident, None)
                return None
        step._started.wait()
        if step.pid is None:
            with self._lock:
                self._steps.pop(ident, None)
            return None
        return step

    def close(self) -> None:
        """Stop the server; it stops any step still running (TERM, then KILL). A server that
        never forked (every step was reused) is killed at once, mid-import or not."""
        if not self._used:
            self._proc.kill()
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        try:  # keep the logs folder free of empty server logs (and of a run that made none)
            if self._log.stat().st_size == 0:
                self._log.unlink()
                self._log.parent.rmdir()
        except OSError:
            pass
