"""The step fork server: imports mlpipe and the run's component modules once, then forks one
process per step (``python -m mlpipe.runtime.forkserver EXECUTOR_PID``; Linux only).

A forked step gets what a fresh ``python -m mlpipe.runtime.step`` would: its own session, its
log on stdout and stderr, its environment, working directory and ``sys.argv``, the module
state its imports left, and death with its parent (this server dies with the executor). The
server speaks JSON lines with ``mlpipe.backends.local.forkserver`` on its stdin and stdout.
Must not import the graph, checks, backends or the evidence store, and never runs a step body
itself.
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import selectors
import signal
import sys
import threading
import time
import traceback
from typing import Any

from mlpipe import localimport
from mlpipe.runtime import step

STOP_GRACE_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> bool:
    """Ask Linux to SIGKILL this process when ``parent`` dies; False if it already has."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return False
    return os.getppid() == parent


class _Server:
    def __init__(self, requests: int, replies: int) -> None:
        self.requests = requests
        self.replies = replies
        self.buffer = b""
        self.children: dict[int, int] = {}  # pid -> request id
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.selector: selectors.BaseSelector | None = None
        self.random_state: Any = None
        self.backlog: list[dict[str, Any]] = []

    # --- the protocol -----------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.replies, data):]

    def messages(self, data: bytes) -> list[dict[str, Any]]:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def first_message(self) -> dict[str, Any] | None:
        while True:
            data = os.read(self.requests, 1 << 16)
            if not data:
                return None
            found = self.messages(data)
            if found:
                self.backlog = found[1:]
                return found[0]

    # --- serving ----------------------------------------------------------------------------

    def serve(self) -> int:
        preload = self.first_message()
        if preload is None:
            return 0
        why, self.random_state = _preload(preload)
        self.send({"op": "ready", "ok": why is None, "why": why})
        if why is not None:
            return 0
        gc.freeze()  # keep the preloaded objects' pages shared with the forked steps
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.requests, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        for message in self.backlog:
            self.fork(message)
        while True:
            for key, _events in self.selector.select():
                if key.fd == self.wake_r:
                    _drain(self.wake_r)
                    continue
                data = os.read(self.requests, 1 << 16)
                if not data:  # the executor closed the pipe (or died): stop every step
                    self.stop_children()
                    return 0
                for message in self.messages(data):
                    self.fork(message)
            self.reap()

    def fork(self, message: dict[str, Any]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            self.send({"op": "failed", "id": message["id"], "why": str(exc)})
            return
        if pid == 0:
            code = 1
            try:
                code = self.child(message)
            except BaseException:  # a failure before the step could even start
                traceback.print_exc()
            finally:
                os._exit(code)
        self.children[pid] = message["id"]
        self.send({"op": "started", "id": message["id"], "pid": pid})

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            ident = self.children.pop(pid, None)
            if ident is not None:
                self.send({"op": "exited", "id": ident,
                           "returncode": os.waitstatus_to_exitcode(status)})

    def stop_children(self) -> None:
        """TERM every running step's process group, KILL what is left after a grace period."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in list(self.children):
                _signal_group(pid, sig)
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            while self.children and time.monotonic() < deadline:
                self.reap()
                time.sleep(0.02)
            if not self.children:
                return

    # --- in the forked step -----------------------------------------------------------------

    def child(self, message: dict[str, Any]) -> int:
        server_pid = os.getppid()
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if self.selector is not None:
            self.selector.close()
        for fd in (self.requests, self.replies, self.wake_r, self.wake_w):
            os.close(fd)
        log = os.open(message["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.chdir(message["cwd"])
        env = dict(message["env"])
        env["MLPIPE_PARENT_PID"] = str(server_pid)  # step.main dies with this process's parent
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [step.__file__]
        if self.random_state is not None:
            # a module seeded ``random`` at import: start where a fresh import would (else
            # CPython's own at-fork hook has given this process a fresh seed)
            import random
            random.setstate(self.random_state)
        step.die_with_parent()
        step.end_process(step.execute(message["request"]))
        return 1  # not reached: end_process exits


def _preload(message: dict[str, Any]) -> tuple[str | None, Any]:
    """Import the modules the run's steps will need.

    Returns:
        Why forking from here is unsafe (or None), and the ``random`` module's state when the
        imports seeded (or used) it, else None.
    """
    import random

    os.chdir(message["cwd"])
    for entry in reversed(message.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    step.preload()
    localimport.install()   # the steps' own modules run as their source says (the digest's)
    before = random.getstate()
    for name in message.get("modules", []):
        try:
            importlib.import_module(name)
        except BaseException:  # the step that needs it fails the same way on its own import
            traceback.print_exc()
    after = random.getstate()
    why = None
    if threading.active_count() > 1:
        why = (f"importing {', '.join(message.get('modules', []))} started "
               f"{threading.active_count() - 1} thread(s); forking steps from it is unsafe")
    return why, None if after == before else after


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:  # the step had not made its own session yet
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m mlpipe.runtime.forkserver EXECUTOR_PID", file=sys.stderr)
        return 2
    if not _die_with(int(args[0])):
        return 137
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # what imports print goes to the server's log, never into the protocol
    return _Server(requests, replies).serve()


if __name__ == "__main__":
    sys.exit(main())
