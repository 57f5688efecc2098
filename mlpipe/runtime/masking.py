"""A step's output with its secrets masked as it is written: file descriptors 1 and 2 of the
step process are pipes whose readers mask every secret value (``mlpipe.secret.Redactor``)
before writing to where the output went (the step's log). So whatever writes there (print,
a logging handler made before, C code, a child process) is masked while the step runs, not
only when it ends."""
from __future__ import annotations

import os
import sys
import threading

from mlpipe.secret import Redactor


class OutputMask:
    """Started before the body runs, stopped after it (and after its children are gone)."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.saved: dict[int, int] = {}
        self.readers: list[threading.Thread] = []

    def start(self) -> None:
        """Put the pipes in place. Output and error that go to the same file (a step's log)
        share one pipe, so that their lines stay in the order they were written."""
        _flush()
        groups: dict[tuple[int, int], list[int]] = {}
        for fd in (1, 2):
            try:
                st = os.fstat(fd)
            except OSError:  # no such descriptor: nothing to mask there
                continue
            same = (st.st_dev, st.st_ino) if st.st_ino else (fd, fd)
            groups.setdefault(same, []).append(fd)
        for fds in groups.values():
            for fd in fds:
                self.saved[fd] = os.dup(fd)
            read_end, write_end = os.pipe()
            for fd in fds:
                os.dup2(write_end, fd)
            os.close(write_end)
            reader = threading.Thread(target=self._copy, args=(read_end, self.saved[fds[0]]),
                                      daemon=True, name=f"mlpipe-mask-{fds[0]}")
            reader.start()
            self.readers.append(reader)

    def stop(self) -> None:
        _flush()
        for fd, saved in self.saved.items():
            os.dup2(saved, fd)  # closes this process's write end of the pipe
        for reader in self.readers:
            reader.join(timeout=5)  # a process that still holds the pipe keeps it open
        for saved in self.saved.values():
            os.close(saved)
        self.saved, self.readers = {}, []

    def _copy(self, read_end: int, target: int) -> None:
        mask = self.redact.stream()
        try:
            while chunk := os.read(read_end, 65536):
                _write(target, mask.feed(chunk))
            _write(target, mask.close())
        except OSError:
            pass
        finally:
            os.close(read_end)


def _write(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
