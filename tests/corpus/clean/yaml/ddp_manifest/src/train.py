"""DDP: Azure ML starts the ranks and sets MASTER_ADDR, RANK, WORLD_SIZE; rank 0 saves."""
import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--examples")
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--model")
args = parser.parse_args()

dist.init_process_group(backend="nccl", init_method="env://")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
files = sorted(Path(args.examples).rglob("*.png"))
mine = files[dist.get_rank()::dist.get_world_size()]
net = DistributedDataParallel(torch.nn.Linear(4, 2).cuda(), device_ids=[local_rank])
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(args.epochs):
    opt.zero_grad()
    loss = net(torch.rand(len(mine) or 1, 4).cuda()).sum()
    loss.backward()
    opt.step()
if dist.get_rank() == 0:
    Path(args.model).mkdir(parents=True, exist_ok=True)
    torch.save({k: v.cpu() for k, v in net.module.state_dict().items()},
               Path(args.model) / "model.pt")
dist.barrier()
dist.destroy_process_group()
