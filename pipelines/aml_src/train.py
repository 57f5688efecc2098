"""Data-parallel training (PyTorch DDP; gloo on CPUs, NCCL on GPUs): each rank trains on its
share of the training split, rank 0 saves the model."""
import argparse
import json
import pathlib

import torch
import torch.distributed as dist
from images import cnn, tensors
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
for name in ("examples", "labels", "model"):
    parser.add_argument(f"--{name}", required=True)
parser.add_argument("--epochs", type=int, default=15)
args = parser.parse_args()
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
labels = json.loads(pathlib.Path(args.labels).read_text())
x, y = tensors(pathlib.Path(args.examples, "train"), labels)
x, y = x[rank::world], y[rank::world]  # this rank's share
torch.manual_seed(13)  # the same initial weights on every rank
net = cnn(len(labels))
ddp = DistributedDataParallel(net)
opt = torch.optim.Adam(ddp.parameters(), lr=0.01)
for _ in range(args.epochs):
    for batch in torch.randperm(len(x)).split(16):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x[batch]), y[batch]).backward()
        opt.step()
if rank == 0:
    out = pathlib.Path(args.model)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), out / "model.pt")
    (out / "labels.json").write_text(json.dumps(labels))
dist.destroy_process_group()
