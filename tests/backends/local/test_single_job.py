"""A single distributed command job (``type: command``, PyTorch, 2 instances of 2 processes),
as teams write it for ``az ml job create``: checked with every launch check, compiled back to
the same job, and run here under the local launcher as 4 ranks of a real gloo process group,
from another working directory."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

JOB = Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "job" / "train_ddp.yml"


def mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "mlpipe.toml").write_text("")
    return tmp_path


def variant(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the job's folder with one change to the job."""
    folder = tmp_path / "job"
    shutil.copytree(JOB.parent, folder)
    text = JOB.read_text()
    assert old in text
    path = folder / JOB.name
    path.write_text(text.replace(old, new))
    return path


def codes(done: subprocess.CompletedProcess) -> list[str]:
    return re.findall(r"^(?:error|warning)\[(MP\d{3})\]", done.stdout + done.stderr, re.M)


@pytest.mark.slow
def test_a_distributed_command_job_checks_compiles_and_runs_as_two_nodes_of_two(project):
    pytest.importorskip("torch")
    checked = mlpipe(project, "check", str(JOB))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert codes(checked) == []

    compiled = mlpipe(project, "compile", str(JOB), "--out", "build")
    assert compiled.returncode == 0, compiled.stderr
    from azure.ai.ml import load_job

    from backends.azure.fidelity import field_differences

    written = next((project / "build").glob("*.yml"))
    assert field_differences(load_job(JOB), load_job(written)) == []

    done = mlpipe(project, "submit", str(JOB), "--param", "epochs=5")
    assert done.returncode == 0, done.stderr
    assert "'train_ddp' is launched as 4 process(es) the way Azure ML would" in done.stderr
    run_id = re.search(r"run (r-[0-9a-f]{10}) succeeded", done.stdout).group(1)
    store = Store.open(f"sqlite:///{project / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            (step,) = s.get(m.Run, run_id).steps
            topology = step.topology
            model = project / "evidence" / "artifacts" / next(
                a.artifact.key for a in step.artifacts if a.direction == "output")
    finally:
        store.close()
    ran = topology["ran"]
    assert (ran["world_size"], ran["instances"], ran["processes_per_node"]) == (4, 2, 2)
    assert topology["declared"]["world_size"] == 4
    assert sorted((r["node_rank"], r["local_rank"], r["returncode"]) for r in ran["ranks"]) == [
        (0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]
    # rank 0 wrote the model after an all_reduce over the 4 ranks' shards of the 4 files
    assert json.loads(Path(model, "model.json").read_text()) == {
        "world_size": 4, "examples": 4, "epochs": 5, "rate": 0.01, "mode": "fast"}
    log = (project / "evidence" / "logs" / run_id / "train_ddp.log").read_text()
    assert len(re.findall(r"rank \d of 4 read \['part-\d\.txt'\] \(torch\.distributed\); "
                          r"mode fast", log)) == 4


@pytest.mark.slow
@pytest.mark.parametrize("old, new, code", [
    # two instances and no distribution: Azure ML starts the script twice, unaware
    ("distribution: {type: pytorch, process_count_per_instance: 2}\n", "", "MP512"),
    # a launcher in the command under a PyTorch distribution launches each rank's own launcher
    ("python train.py", "torchrun --nproc_per_node 2 train.py", "MP509"),
    # 2 processes per node on a 4-GPU size: half the GPUs idle, or ranks fighting over one
    ("compute: azureml:cpu-cluster\nresources: {instance_count: 2}",
     "compute: azureml:gpu-cluster\nresources: {instance_count: 2, instance_type: "
     "Standard_NC24rs_v3}", "MP502"),
])
def test_every_launch_check_holds_for_a_single_job_in_check_compile_and_submit(
        old, new, code, project):
    path = variant(project, old, new)
    checked = mlpipe(project, "check", str(path))
    assert checked.returncode == 1 and code in codes(checked), checked.stdout
    compiled = mlpipe(project, "compile", str(path), "--out", "build")
    assert compiled.returncode == 1 and code in codes(compiled), compiled.stderr
    assert not (project / "build").exists()
    done = mlpipe(project, "submit", str(path))
    assert done.returncode == 1 and code in codes(done), done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / "evidence" / "store.sqlite").exists()
