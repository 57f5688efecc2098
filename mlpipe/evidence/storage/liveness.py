"""Whether the process that recorded a run is still alive: its pid, and when it started (so a
reused pid is told apart). Reads /proc and signals nothing but 0; imports nothing heavy (the
read-only commands ask it before deciding whether the store needs repairs)."""
from __future__ import annotations

import os

from mlpipe.procstat import stat_fields


def host() -> str:
    """This machine's name, as the store records it with each run: ``socket.gethostname()``,
    which on POSIX is uname's node name (read so, the read commands import no socket)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def process_token(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), so a reused pid is told apart."""
    fields = stat_fields(pid)
    return fields[19].decode() if fields is not None and len(fields) > 19 else None


def alive(pid: int | None, token: str | None) -> bool:
    """Whether process ``pid`` (started at ``token``, when known) still runs."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    current = process_token(pid)
    return token is None or current is None or current == token
