"""What checks/flows.py reads from a body beyond names: the collectives only some ranks reach
(MP535), between the fixtures' bad and good twins."""
import pytest

from mlpipe import Input, Output, PyTorch, component
from mlpipe.checks.flows import rank_guarded_collectives

DDP = PyTorch(processes_per_node=2, backend="gloo", writers="rank0")


@component(distribution=DDP)
def metric_on_rank0(model: Output["uri_folder"]):
    from mlpipe.runtime import all_reduce_metric, rank
    if rank() == 0:
        all_reduce_metric("accuracy", 0.5)


@component(distribution=DDP)
def broadcast_both_ways(model: Output["uri_folder"]):
    import torch
    from torch import distributed as dist
    rank = dist.get_rank()
    if rank == 0:
        dist.broadcast(torch.ones(1), src=0)
    else:
        dist.broadcast(torch.zeros(1), src=0)


@component(distribution=DDP)
def gather_by_env(model: Output["uri_folder"]):
    import os

    import torch.distributed
    local = int(os.environ["LOCAL_RANK"])
    if local != 0:
        return
    if os.environ["RANK"] == "0":
        torch.distributed.all_gather_object([None, None], {"a": 1})


@component(distribution=DDP)
def horovod_on_rank0(model: Output["uri_folder"]):
    import horovod.torch as hvd
    hvd.init()
    if hvd.rank() == 0:
        hvd.broadcast_parameters({}, root_rank=0)


@component(distribution=DDP)
def save_under_writer(model: Output["uri_folder"], data: Input["uri_folder"]):
    import torch.distributed as dist

    from mlpipe.runtime import is_writer
    dist.barrier()
    if is_writer("model"):
        open(f"{model}/w.txt", "w").write("1")
    dist.all_reduce(None)


@component(distribution=DDP)
def not_a_rank(model: Output["uri_folder"], epochs: int = 2):
    import torch.distributed as dist
    if epochs > 1:
        dist.barrier()


@pytest.mark.parametrize(("component", "expected"), [
    (metric_on_rank0, [("mlpipe.runtime.all_reduce_metric", "rank() == 0")]),
    (broadcast_both_ways, []),
    (gather_by_env, [("torch.distributed.all_gather_object", "os.environ['RANK'] == '0'")]),
    (horovod_on_rank0, [("horovod.torch.broadcast_parameters", "hvd.rank() == 0")]),
    (save_under_writer, []),
    (not_a_rank, []),
])
def test_a_collective_only_some_ranks_reach_is_found(component, expected):
    found = [(name, guard) for name, _, guard in rank_guarded_collectives(component.spec)]
    assert found == expected


@component(distribution=DDP)
def hub_every_rank(model: Output["uri_folder"]):
    from huggingface_hub import snapshot_download
    snapshot_download("bert-base-uncased", local_dir="/tmp/bert")


@component(distribution=DDP)
def url_on_rank0(model: Output["uri_folder"]):
    import urllib.request

    import torch.distributed as dist
    if dist.get_rank() == 0:
        urllib.request.urlretrieve("https://example.org/d.tgz", "/tmp/d.tgz")
    dist.barrier()


@component(distribution=DDP)
def dataset_without_download(model: Output["uri_folder"]):
    import torchvision
    torchvision.datasets.MNIST("/mnt/inputs/mnist", download=False)


@pytest.mark.parametrize(("component", "expected"), [
    (hub_every_rank, ["huggingface_hub.snapshot_download"]),
    (url_on_rank0, []),
    (dataset_without_download, []),
])
def test_a_download_every_rank_makes_is_found(component, expected):
    from mlpipe.checks.flows import every_rank_downloads
    assert [what for what, _ in every_rank_downloads(component.spec)] == expected
