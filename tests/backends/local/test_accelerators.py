"""The local machine against the launched topology: a CUDA launch with more ranks than
visible GPUs is refused before any rank starts (or fitted, when asked), each emulated node
gets GPUs of its own, and a failed launch's log has no empty rank headers."""
import json
import os
import sys
from pathlib import Path

import pytest

from mlpipe import Compute, PyTorch, TensorFlow
from mlpipe.backends.local.launcher import launch
from mlpipe.backends.local.launcher.accelerators import fitted, node_devices, refusal, uses_cuda, visible_gpus
from mlpipe.backends.local.steplogs import combined_rank_logs
from mlpipe.distribution import Mpi
from mlpipe.errors import LaunchRefused

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "tests" / "fixtures" / "distributed"
GPU4 = Compute("gpu-cluster", sku="Standard_NC24rs_v3")
CPU = Compute("cpu-cluster", sku="Standard_D4s_v3")


@pytest.mark.parametrize("env, count, ids", [
    ({"MLPIPE_LOCAL_GPUS": "2"}, 2, ("0", "1")),
    ({"MLPIPE_LOCAL_GPUS": "0", "CUDA_VISIBLE_DEVICES": "0,1"}, 0, ()),
    ({"CUDA_VISIBLE_DEVICES": "3,1"}, 2, ("3", "1")),
    ({"CUDA_VISIBLE_DEVICES": "-1"}, 0, ()),
    ({"CUDA_VISIBLE_DEVICES": ""}, 0, ()),
    ({"CUDA_VISIBLE_DEVICES": "0,x,1"}, 1, ("0",)),
    ({"CUDA_VISIBLE_DEVICES": "GPU-8f0b5c1e-aaaa"}, 1, ("GPU-8f0b5c1e-aaaa",)),
])
def test_visible_gpus_reads_the_environment_as_cuda_does(env, count, ids, monkeypatch):
    # this machine has no NVIDIA driver: the listed ids are all there is to go by
    monkeypatch.setattr("mlpipe.backends.local.launcher.accelerators._physical", lambda: None)
    gpus = visible_gpus(env)
    assert (gpus.count, gpus.ids) == (count, ids)


def test_the_driver_caps_what_cuda_visible_devices_lists(monkeypatch):
    monkeypatch.setattr("mlpipe.backends.local.launcher.accelerators._physical",
                        lambda: (1, "/proc/driver/nvidia/gpus"))
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}).count == 1
    assert visible_gpus({}).source == "/proc/driver/nvidia/gpus"


@pytest.mark.parametrize("dist, compute, cuda", [
    (PyTorch(processes_per_node=4, backend="nccl"), CPU, True),
    (PyTorch(processes_per_node=4), GPU4, True),
    (PyTorch(processes_per_node=4, backend="gloo"), GPU4, False),
    (PyTorch(processes_per_node=2), CPU, False),
    (Mpi(processes_per_node=4), GPU4, True),
    (TensorFlow(workers=2), GPU4, False),
    (None, GPU4, False),
])
def test_which_launches_take_a_gpu_per_rank(dist, compute, cuda):
    assert uses_cuda(dist, compute) is cuda


@pytest.mark.parametrize("declared, gpus, fit", [
    ((2, 4), 1, (1, 1)), ((2, 4), 4, (1, 4)), ((2, 4), 6, (1, 4)), ((2, 4), 8, (2, 4)),
    ((1, 2), 1, (1, 1)), ((4, 1), 2, (2, 1)),
])
def test_fitted_keeps_processes_per_node_first(declared, gpus, fit):
    assert fitted(*declared, gpus) == fit


def _gpus(n):
    return visible_gpus({"MLPIPE_LOCAL_GPUS": str(n)})


def test_the_refusal_names_the_rank_that_would_fail():
    assert refusal("train_cnn", 1, 2, _gpus(1)) == (
        "step 'train_cnn' cannot be launched here: it starts 2 CUDA rank(s) (1 node(s) x 2 per "
        "node) but this machine shows 1 GPU(s) (MLPIPE_LOCAL_GPUS=1): rank 1 would ask for "
        "cuda:1, which does not exist here (invalid device ordinal)")
    assert "the 2 emulated nodes would share 2 GPU(s), and NCCL refuses two ranks on one GPU" \
        in refusal("t", 2, 2, _gpus(2))
    assert refusal("t", 2, 2, _gpus(4)) is None
    assert refusal("t", 2, 4, _gpus(0)) is None  # no GPU: the ranks run on CPUs


def test_emulated_nodes_get_gpus_of_their_own():
    assert node_devices(2, 2, _gpus(4)) == {0: "0,1", 1: "2,3"}
    assert node_devices(1, 2, _gpus(4)) == {}
    assert node_devices(2, 2, _gpus(3)) == {}


def test_a_launch_that_does_not_fit_starts_nothing(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MLPIPE_LOCAL_GPUS="1")
    with pytest.raises(LaunchRefused, match=r"^step 'train_cnn' cannot be launched here: it "
                                            r"starts 2 CUDA rank\(s\) .*rank 1 would ask for "
                                            r"cuda:1") as exc:
        launch([sys.executable, str(SCRIPTS / "show_env.py"), str(tmp_path)],
               distribution=PyTorch(processes_per_node=2, backend="nccl"), instances=1,
               env=env, log_dir=tmp_path / "logs", cuda=True, step="train_cnn")
    assert exc.value.hint.startswith("launch it smaller here: --local-scale train_cnn=1x1 (or "
                                     "train_cnn=fit")
    assert not (tmp_path / "logs").exists() and not list(tmp_path.glob("env-*.json"))


@pytest.mark.slow
def test_each_emulated_node_sees_its_own_gpus(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MLPIPE_LOCAL_GPUS="4")
    script = tmp_path / "devices.py"
    script.write_text("import json, os, sys\n"
                      "open(os.path.join(sys.argv[1], 'dev-' + os.environ['RANK']), 'w').write("
                      "json.dumps([os.environ['LOCAL_RANK'], "
                      "os.environ.get('CUDA_VISIBLE_DEVICES')]))\n")
    launch([sys.executable, str(script), str(tmp_path)],
           distribution=PyTorch(processes_per_node=2, backend="nccl"), instances=2, env=env,
           log_dir=tmp_path / "logs", cuda=True, require_coordination=False, timeout=60)
    seen = [json.loads((tmp_path / f"dev-{r}").read_text()) for r in range(4)]
    assert seen == [["0", "0,1"], ["1", "0,1"], ["0", "2,3"], ["1", "2,3"]]


def test_combined_rank_logs_have_no_empty_headers_and_end_with_the_failed_rank(tmp_path):
    for rank, text in {0: "", 1: "loss 0.5\n", 2: "", 3: "Traceback ...\nValueError: x",
                       10: "late\n"}.items():
        (tmp_path / f"rank-{rank}.log").write_text(text)
    assert combined_rank_logs(tmp_path, last=3) == (
        "(ranks 0, 2 printed nothing)\n"
        "--- rank-1.log ---\nloss 0.5\n"
        "--- rank-10.log ---\nlate\n"
        "--- rank-3.log ---\nTraceback ...\nValueError: x\n")
    assert combined_rank_logs(tmp_path / "none") == ""


def _gpu_project(tmp_path):
    import shutil

    from executor_project import Project
    proj = Project(tmp_path / "proj")
    shutil.copy(ROOT / "tests" / "fixtures" / "boundaries" / "gpu.py", proj.root / "gpu.py")
    return proj


@pytest.mark.slow
def test_a_run_refuses_a_launch_this_machine_cannot_make_and_fits_it_when_asked(tmp_path,
                                                                                monkeypatch):
    monkeypatch.setenv("MLPIPE_LOCAL_GPUS", "1")
    proj = _gpu_project(tmp_path)
    refused = proj.submit("gpu", inputs=["data=left.txt"])
    assert refused.returncode == 1
    assert "error: run r-" in refused.stderr
    assert ("failed: step 'train' cannot be launched here: it starts 2 CUDA rank(s) (1 node(s) "
            "x 2 per node) but this machine shows 1 GPU(s) (MLPIPE_LOCAL_GPUS=1): rank 1 would "
            "ask for cuda:1") in refused.stderr
    assert "--local-scale train=1x1" in refused.stderr
    assert "--- rank-" not in refused.stderr and "Traceback" not in refused.stderr
    fitted_run = proj.submit("gpu", "--local-scale", "train=fit", inputs=["data=left.txt"])
    assert fitted_run.returncode == 0, fitted_run.stderr
    [world] = list((proj.root / "evidence").rglob("world.txt"))
    assert world.read_text() == "1"
