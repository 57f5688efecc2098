"""accelerate under Azure ML's PyTorch launch: Accelerator() reads RANK, WORLD_SIZE and
LOCAL_RANK as Azure ML injects them; each process trains on its own part; the main process
saves."""
import argparse
from pathlib import Path

import torch
from accelerate import Accelerator
from torchvision import transforms

parser = argparse.ArgumentParser()
parser.add_argument("--examples")
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--model")
parser.add_argument("--classes", type=lambda s: s.split(","))
parser.add_argument("--mean", type=float, nargs=3)
parser.add_argument("--std", type=float, nargs=3)
parser.add_argument("--image-size", type=int)
args = parser.parse_args()

accelerator = Accelerator()
prep = transforms.Compose([transforms.Resize(args.image_size),
                           transforms.Normalize(mean=args.mean, std=args.std)])
files = sorted(Path(args.examples).rglob("*.png"))
with accelerator.split_between_processes(files) as mine:
    count = len(mine)
net = torch.nn.Linear(4, len(args.classes))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
net, opt = accelerator.prepare(net, opt)
for _ in range(args.epochs):
    opt.zero_grad()
    loss = net(torch.rand(count or 1, 4, device=accelerator.device)).sum()
    accelerator.backward(loss)
    opt.step()
accelerator.wait_for_everyone()
if accelerator.is_main_process:
    Path(args.model).mkdir(parents=True, exist_ok=True)
    torch.save(accelerator.unwrap_model(net).state_dict(), Path(args.model) / "model.pt")
