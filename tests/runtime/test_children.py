"""A step finds its living children from the kernel's per-thread lists, as the whole process
table would name them (``mlpipe.runtime.children``)."""
import os
import subprocess
import sys

import pytest

from mlpipe.runtime import children

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc")


def _from_table() -> list[int]:
    me = os.getpid()
    return sorted(pid for pid, ppid, state in children._table() if ppid == me and state != "Z")


def test_the_children_lists_name_what_the_process_table_names():
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                for _ in range(2)]
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        done_pid = done.pid
        os.waitid(os.P_PID, done_pid, os.WEXITED | os.WNOWAIT)  # a zombie until reaped
        found = children._living_children(os.getpid())
        assert {p.pid for p in sleepers} <= set(found)
        assert done_pid not in found  # a zombie is no living child
        assert found == _from_table()
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        done.wait()
    assert not {p.pid for p in sleepers} & set(children._living_children(os.getpid()))
