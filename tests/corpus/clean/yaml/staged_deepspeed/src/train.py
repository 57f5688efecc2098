"""DeepSpeed on Azure ML's PyTorch launch: local rank 0 stages the examples on its node's disk
once while every rank waits at the barrier; rank 0 saves the weights, every rank waits again."""
import argparse
import os
import shutil
from pathlib import Path

import deepspeed
import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--examples")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--model")
parser.add_argument("--deepspeed")
args = parser.parse_args()

deepspeed.init_distributed(dist_backend="nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
staged = Path("/tmp/staged-examples")
if local_rank == 0:
    shutil.copytree(args.examples, staged, dirs_exist_ok=True)
dist.barrier()
files = sorted(staged.rglob("*.png"))
mine = files[dist.get_rank()::dist.get_world_size()]
engine, _, _, _ = deepspeed.initialize(model=torch.nn.Linear(4, 2),
                                       model_parameters=torch.nn.Linear(4, 2).parameters(),
                                       config=args.deepspeed)
for _ in range(args.epochs):
    loss = engine(torch.rand(len(mine) or 1, 4).to(engine.device)).sum()
    engine.backward(loss)
    engine.step()
if dist.get_rank() == 0:
    Path(args.model).mkdir(parents=True, exist_ok=True)
    torch.save({k: v.float().cpu() for k, v in engine.module.state_dict().items()},
               Path(args.model) / "model.pt")
dist.barrier()
