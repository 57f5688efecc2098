"""FSDP on Azure ML's PyTorch launch: every rank shards the model; the full state dict is a
collective every rank takes part in (gathered to rank 0 on the CPU); rank 0 alone saves it."""
import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullStateDictConfig, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

parser = argparse.ArgumentParser()
parser.add_argument("--examples")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--model")
args = parser.parse_args()

dist.init_process_group(backend="nccl", init_method="env://")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
files = sorted(Path(args.examples).rglob("*.png"))
mine = files[dist.get_rank()::dist.get_world_size()]
model = FSDP(torch.nn.Linear(4, 2).cuda(), device_id=local_rank)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(args.epochs):
    opt.zero_grad()
    loss = model(torch.rand(len(mine) or 1, 4).cuda()).sum()
    loss.backward()
    opt.step()
gather = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, gather):
    state = model.state_dict()   # every rank: the gather is a collective
if dist.get_rank() == 0:
    Path(args.model).mkdir(parents=True, exist_ok=True)
    torch.save(state, Path(args.model) / "model.pt")
dist.barrier()
dist.destroy_process_group()
