"""Running one launch's processes as a group: each in its own session with its own log, watched
together; the first to fail, a PyTorch rank that never joins the rendezvous, or the step
timeout ends them all. No process outlives the group.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mlpipe.backends.local.launcher.layout import HOST, Plan
from mlpipe.backends.local.reaper import Reaper
from mlpipe.errors import LaunchFailed
from mlpipe.procstat import pids, stat_fields

POLL_S = 0.05
GRACE_S = 3.0
TAIL_LINES = 20


@dataclass(frozen=True)
class Worker:
    """One launched process: its place in the topology and how it ended."""

    rank: int
    local_rank: int
    node_rank: int
    role: str
    pid: int
    log: Path
    returncode: int | None
    joined: bool | None = None


def tail(path: Path, n: int = TAIL_LINES) -> str:
    """The last ``n`` lines of a rank's log ("" when it cannot be read)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


class ProcessGroup:
    """The processes of one launch, watched together."""

    def __init__(self, argv: list[str], layout: Plan, base: dict[str, str],
                 cwd: str | Path | None, logs: Path) -> None:
        self.argv, self.layout, self.base, self.cwd, self.logs = argv, layout, base, cwd, logs
        self.procs: list[subprocess.Popen] = []
        self.exits: dict[int, float] = {}
        self.lock = threading.Lock()
        self.joined: dict[int, bool] = {}
        self.reaper = Reaper()  # kills what the ranks started, should this process die

    def _start(self) -> dict[int, dict[str, str]]:
        envs = {}
        for index, (rank, _, _, _role, extra) in enumerate(self.layout.roles):
            env = {**self.base, **extra}
            envs[rank] = extra
            with open(self.logs / f"rank-{rank}.log", "wb") as log:
                try:
                    proc = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
                except OSError as exc:
                    raise LaunchFailed(f"rank {rank} could not start {self.argv[0]!r}: {exc}",
                                       rank=rank, kind="start", hint="check the command and "
                                                                     "working directory") from exc
            self.procs.append(proc)
            self.reaper.watch(proc.pid)
            threading.Thread(target=self._wait, args=(index, proc), daemon=True).start()
        return envs

    def _wait(self, index: int, proc: subprocess.Popen) -> None:
        proc.wait()
        with self.lock:
            self.exits[index] = time.monotonic()

    def run(self, timeout: float | None, rendezvous_timeout: float | None):
        started = time.monotonic()
        try:
            envs = self._start()
            failure = self._watch(started, timeout, rendezvous_timeout)
        except BaseException:
            self._stop()
            raise
        self._stop()
        workers = tuple(
            Worker(rank, local, node, role, p.pid, self.logs / f"rank-{rank}.log",
                   p.returncode, self.joined.get(rank) if self.layout.framework == "pytorch"
                   else None)
            for (rank, local, node, role, _), p in zip(self.layout.roles, self.procs))
        if failure is not None:
            raise failure
        return workers, envs

    def _watch(self, started: float, timeout: float | None,
               rendezvous_timeout: float | None) -> LaunchFailed | None:
        roles = self.layout.roles
        workers = [i for i, r in enumerate(roles) if r[3] == "worker"]
        port = self.layout.master_port if self.layout.framework == "pytorch" else None
        rendezvous_done = port is None or self.layout.world == 1
        last_probe = 0.0
        while True:
            now = time.monotonic()
            with self.lock:
                exits = sorted(self.exits.items(), key=lambda kv: kv[1])
            for index, _ in exits:
                code = self.procs[index].returncode
                if code != 0 and not (roles[index][3] == "ps" and code is not None and
                                      all(self.procs[i].returncode == 0 for i in workers)):
                    rank = roles[index][0]
                    return self._failure(
                        f"rank {rank} of {self.layout.world} exited with code {code} after "
                        f"{now - started:.1f} s; the other processes were stopped", rank, code,
                        "the rank's log above shows why it failed", "exited")
            if all(self.procs[i].returncode == 0 for i in workers):
                return None
            if not rendezvous_done and port is not None and now - last_probe > 0.2:
                last_probe = now
                rendezvous_done = self._probe_rendezvous(port)
            elapsed = now - started
            if not rendezvous_done and rendezvous_timeout is not None and \
                    elapsed > rendezvous_timeout:
                # a rank that exited 0 without ever being seen at the store left its peers
                # waiting in init_process_group: the group can no longer form
                waiting = [roles[i][0] for i in workers if not self.joined.get(roles[i][0])]
                if waiting:
                    left = [r for r in waiting
                            if self.procs[[x[0] for x in roles].index(r)].returncode == 0]
                    gone = (f"; rank{'s' if len(left) > 1 else ''} "
                            f"{', '.join(map(str, left))} exited without joining"
                            if left else "")
                    return self._failure(
                        f"rank {waiting[0]} of {self.layout.world} did not join the rendezvous at "
                        f"{HOST}:{port} within {rendezvous_timeout:g} s (not joined: ranks "
                        f"{', '.join(map(str, waiting))}{gone}); the group was stopped",
                        waiting[0], None,
                        "the script must call torch.distributed.init_process_group("
                        "init_method='env://') early; raise rendezvous_timeout if start-up is slow",
                        "rendezvous")
            if timeout is not None and elapsed > timeout:
                running = [roles[i][0] for i in workers if self.procs[i].returncode is None]
                return self._failure(
                    f"the step exceeded its timeout of {timeout:g} s; ranks still running: "
                    f"{', '.join(map(str, running))} (rank {running[0]} shown); the group was "
                    f"stopped", running[0], None,
                    "a rank that hangs blocks its peers in the next collective; look for the "
                    "rank whose log stops earliest, or raise the timeout", "timeout")
            time.sleep(POLL_S)

    def _failure(self, reason: str, rank: int, code: int | None, hint: str,
                 kind: str) -> LaunchFailed:
        self._stop()
        log = self.logs / f"rank-{rank}.log"
        return LaunchFailed(reason, rank=rank, returncode=code, log_path=str(log),
                            log_tail=tail(log), hint=hint, kind=kind)

    def _probe_rendezvous(self, port: int) -> bool:
        """True when every running PyTorch rank holds a connection to the store at ``port``
        (the rank's process, or another process of its group).

        A probe runs every 0.2 s while the ranks start, on the cores they start on, so it
        does the least that answers: the sockets of each rank's own process first, one pass
        over ``/proc`` for the groups of the ranks not seen there, and the TCP table (the
        costliest read, milliseconds of kernel time) only once one of them holds a socket."""
        if not any(os.path.exists(table) for table in _TCP_TABLES):
            return True   # no /proc: the step timeout is the only limit
        pending = [(rank, proc) for (rank, *_), proc in zip(self.layout.roles, self.procs)
                   if not self.joined.get(rank) and proc.returncode is None]
        clients: set[str] | None = None
        unseen = []
        for rank, proc in pending:
            held = _socket_inodes(proc.pid)
            if held and clients is None:
                clients = _client_socket_inodes(port)
                if clients is None:
                    return True
            self.joined[rank] = bool(held & (clients or set()))
            if not self.joined[rank]:
                unseen.append((rank, proc))
        if unseen:
            members = _group_members({proc.pid for _, proc in unseen})
            for rank, proc in unseen:
                held = set().union(*(_socket_inodes(m) for m in members.get(proc.pid, ())))
                if held and clients is None:
                    clients = _client_socket_inodes(port)
                    if clients is None:
                        return True
                self.joined[rank] = bool(held & (clients or set()))
        # only a rank seen at the store counts: one that exited 0 unseen may never have joined
        return all(self.joined.get(r[0]) for r in self.layout.roles)

    def _stop(self) -> None:
        alive = [p for p in self.procs if p.poll() is None]
        for p in alive:
            signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for p in alive:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:
            # the leader may be gone while children it started still run in its group
            signal_group(p.pid, signal.SIGKILL)
        for p in alive:
            p.wait()
        for p in self.procs:
            self.reaper.release(p.pid)
        self.reaper.close()


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


#: The kernel's TCP tables (without them, the rendezvous is not probed).
_TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def _client_socket_inodes(port: int) -> set[str] | None:
    """Inodes of established TCP sockets whose remote end is ``port`` (None without /proc)."""
    found: set[str] = set()
    seen_table = False
    for table in _TCP_TABLES:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        seen_table = True
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "01" and int(parts[2].rsplit(":", 1)[1], 16) == port:
                found.add(parts[9])
    return found if seen_table else None


def _socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` holds (empty when it cannot be read)."""
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _group_members(pgids: set[int]) -> dict[int, list[int]]:
    """The other processes of each process group in ``pgids`` (one pass over ``/proc``)."""
    members: dict[int, list[int]] = {pgid: [] for pgid in pgids}
    for pid in pids():
        if pid in members:
            continue
        fields = stat_fields(pid)
        if fields is not None and len(fields) > 2 and fields[2].isdigit() \
                and int(fields[2]) in members:
            members[int(fields[2])].append(pid)
    return members
