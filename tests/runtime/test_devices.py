"""The backend and device a rank gets: the declared ones, as far as the machine has them; a
rank never asks for a GPU that does not exist (a two-rank gloo step on a one-GPU machine)."""
import pytest

from mlpipe.runtime import devices, record


@pytest.fixture
def machine(monkeypatch, tmp_path):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", devices.BACKEND_VAR,
                 "OMPI_COMM_WORLD_LOCAL_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLPIPE_STEP_DIR", str(tmp_path))
    record.reset()

    def set_up(gpus, declared=None, local_rank=0, per_node=1, world=1):
        monkeypatch.setattr(devices, "_cuda_devices", lambda: gpus)
        if declared:
            monkeypatch.setenv(devices.BACKEND_VAR, declared)
        monkeypatch.setenv("LOCAL_RANK", str(local_rank))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(per_node))
        monkeypatch.setenv("RANK", str(local_rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        return devices.decide()
    yield set_up
    record.reset()


@pytest.mark.parametrize("gpus, declared, local, per_node, world, backend, device", [
    (4, "nccl", 3, 4, 8, "nccl", "cuda:3"),   # a GPU per local rank: the declared NCCL
    (0, "nccl", 1, 2, 2, "gloo", "cpu"),      # a GPU design run on CPUs here
    (1, "nccl", 1, 2, 2, "gloo", "cpu"),      # one GPU, two ranks: never cuda:1
    (1, "gloo", 1, 2, 2, "gloo", "cpu"),      # gloo declared: the CPU, whatever GPUs exist
    (1, None, 0, 1, 1, "nccl", "cuda:0"),     # nothing declared, one process, one GPU
    (0, None, 0, 1, 1, "gloo", "cpu"),
])
def test_declared_backend_and_existing_device(machine, gpus, declared, local, per_node, world,
                                              backend, device):
    found = machine(gpus, declared, local, per_node, world)
    assert (found["backend"], found["device"]) == (backend, device)


def test_a_fallback_says_why_and_is_recorded(machine, tmp_path):
    machine(0, "nccl", 1, 2, 2)
    assert devices.backend() == "gloo"
    record.reset()
    import json
    launch = json.loads((tmp_path / "rank-1.json").read_text())["launch"]
    assert launch["declared"] == "nccl" and launch["backend"] == "gloo"
    assert launch["why"] == ("NCCL was declared, but this machine has 0 CUDA device(s) for 2 "
                             "process(es) per node: gloo on the CPU instead")
