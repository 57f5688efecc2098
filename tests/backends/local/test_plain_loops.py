"""Ranks that read their data through plain file loops, run for real by the local launcher:
when every rank opens every file of its input (the runtime's audit hook sees each rank's
opens), the coordination check reports MP522 and the step fails; the twin that takes
files[rank::world_size] runs clean."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PIPE = '''import os

from mlpipe import Compute, Input, Output, PyTorch, component, pipeline

CPU = Compute("cpu-cluster", sku="Standard_D4s_v3")
DIST = PyTorch(processes_per_node=2, backend="gloo", writers="rank0")


@component(compute=CPU, distribution=DIST)
def fit(data: Input["uri_folder"], model: Output["uri_folder"]):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    total = 0
    for name in sorted(os.listdir(data)){part}:
        with open(os.path.join(data, name)) as fh:
            total += int(fh.read())
    if rank == 0:
        with open(os.path.join(model, "total.txt"), "w") as fh:
            fh.write(str(total))


@pipeline
def p(data):
    return fit(data=data).model
'''


@pytest.mark.parametrize("part, copies", [("", True), ("[rank::world]", False)])
def test_every_rank_opening_every_file_is_independent_copies(tmp_path: Path, part, copies):
    (tmp_path / "mlpipe.toml").write_text("")
    (tmp_path / "data").mkdir()
    for i in range(6):
        (tmp_path / "data" / f"f{i}.txt").write_text(str(i))
    (tmp_path / "pipe.py").write_text(PIPE.format(part=part))
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", "pipe.py", "--input",
                           "data=data"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    if copies:
        assert done.returncode == 1
        assert "error[MP522] independent-copies: all 2 ranks opened the same 6 files under " \
               "input 'data'" in done.stderr + done.stdout
    else:
        assert done.returncode == 0, done.stderr
        assert "MP522" not in done.stderr + done.stdout
