"""The step of ``bench_trace.py``: DDP of a logistic regression on synthetic data, fed through
a ``DataLoader`` with a ``DistributedSampler``, each batch moved to the device, the loss
all-reduced every epoch and the model saved by rank 0: every kind of call the rank-level trace
hooks, at a training loop's rate."""
from __future__ import annotations

import os

EXAMPLES = 4096
FEATURES = 32
BATCH = 32


def train(out: str, epochs: int = 8) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    dist.init_process_group("gloo", init_method="env://")
    device = torch.device("cpu")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(EXAMPLES, FEATURES, generator=generator)
    y = (x @ torch.randn(FEATURES, 1, generator=generator) > 0).float()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, seed=0)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(1)
        for xb, yb in DataLoader(data, batch_size=BATCH, sampler=sampler):
            opt.zero_grad()
            loss = loss_fn(model(xb.to(device)), yb.to(device))
            loss.backward()
            opt.step()
            total += loss.detach()
        dist.all_reduce(total)
    dist.barrier()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), os.path.join(out, "model.pt"))
    dist.destroy_process_group()
