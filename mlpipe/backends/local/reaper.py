"""The reaper: a small process that outlives the executor only to stop what its steps started.

Each step runs in a process group of its own. The executor tells the reaper (over a pipe) which
groups are running; while any is, the reaper notes every process descended from them (a child
that made its own session included) ten times a second, the first time a tenth of a second after
the first group came: a scan reads all of /proc (milliseconds on a machine with a few hundred
processes), and a step that ends sooner needs none. When the pipe closes
with groups still listed, the executor has died (kill -9 included): the reaper kills those
groups and the descendants it saw, then exits. What stays in a step's group is always killed;
a process that left the group (its own session) is killed if the reaper saw it while its
parent lived: one that did so in the last tenth of a second before the executor died can
escape. It never touches the evidence store, and it never kills a
process it did not see descend from a step (a recycled pid is told apart by its start time).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

# Runs with -I -S: the standard library only, nothing of mlpipe's.
_SCRIPT = r'''
import os, select, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
groups, seen, buf = set(), {}, b""
def table():
    rows = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as fh:
                text = fh.read()
        except OSError:
            continue
        rest = text[text.rfind(b")") + 2:].split()
        rows[int(name)] = (int(rest[1]), int(rest[2]), rest[19])  # ppid, pgrp, start time
    return rows
def note():
    rows = table()
    kids = {}
    for pid, (ppid, _, _) in rows.items():
        kids.setdefault(ppid, []).append(pid)
    for pid in [p for p, (start, _) in seen.items() if p not in rows or rows[p][2] != start]:
        del seen[pid]  # ended: nothing to kill, and its pid may come back as another process
    todo = [(p, r[1]) for p, r in rows.items() if r[1] in groups]
    done = set()
    while todo:
        pid, group = todo.pop()
        if pid in done or pid not in rows:
            continue
        done.add(pid)
        seen[pid] = (rows[pid][2], group)
        todo.extend((kid, group) for kid in kids.get(pid, ()))
def alive(pid, start):
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            text = fh.read()
    except OSError:
        return False
    return text[text.rfind(b")") + 2:].split()[19] == start
def reap(chosen):
    note()
    for _ in range(3):
        for g in chosen:
            try:
                os.killpg(g, signal.SIGKILL)
            except OSError:
                pass
        for pid, (start, g) in list(seen.items()):
            if g in chosen and alive(pid, start):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        note()
    for pid, (_, g) in list(seen.items()):
        if g in chosen:
            del seen[pid]
def release(g):
    try:
        os.killpg(g, 0)
        members = True
    except OSError:
        members = False
    left = [p for p, (start, h) in seen.items() if h == g and p != g and alive(p, start)]
    if members or left:  # the usual step left nothing: no table to read
        reap({g})
    for pid in [p for p, (_, h) in seen.items() if h == g]:
        del seen[pid]
    groups.discard(g)
due = None  # when the next scan is: a tenth of a second after the first group came
while True:
    wait = max(0.0, due - time.monotonic()) if groups and due is not None else None
    ready, _, _ = select.select([0], [], [], wait)
    if ready:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-" and int(line[1:]) in groups:
                release(int(line[1:]))
    if not groups:
        due = None
    elif due is None:
        due = time.monotonic() + 0.1
    elif time.monotonic() >= due:
        note()  # ten times a second, however many lines came: a scan reads all of /proc
        due = time.monotonic() + 0.1
if groups:
    reap(set(groups))
'''


class Reaper:
    """The executor's side of the reaper process, started on the first :meth:`watch`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._watched: set[int] = set()
        self.enabled = sys.platform.startswith("linux")

    def _send(self, line: str) -> None:
        if self._proc is None:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SCRIPT], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line.encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:  # the reaper is gone; the steps keep their own death signal
            pass

    def watch(self, pgid: int) -> None:
        """Have the reaper kill group ``pgid`` (and what descends from it) if the executor
        dies before :meth:`release`."""
        if not self.enabled:
            return
        with self._lock:
            self._watched.add(pgid)
            self._send(f"+{pgid}")

    def release(self, pgid: int) -> None:
        """Group ``pgid``'s leader has ended: kill what it left running (its group now, and
        through the reaper what descended from it), and stop watching it."""
        kill_group(pgid)
        with self._lock:
            if pgid in self._watched:
                self._watched.discard(pgid)
                self._send(f"-{pgid}")

    def close(self) -> None:
        """Stop the reaper, having it kill what the groups still watched started."""
        with self._lock:
            for pgid in self._watched:
                kill_group(pgid)
                self._send(f"-{pgid}")
            self._watched.clear()
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kill_group(pgid: int) -> None:
    """SIGKILL every process still in group ``pgid`` (what a step left behind)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
