"""The visual-defect classifier's distributed trainer: PyTorch DDP and a small CNN on the 8x8
images. The same code runs on CPUs with gloo (mlpipe's local launcher) and on GPUs with NCCL
(Azure ML): the step takes the backend and device its launch declared from the runtime
(``backend()``, ``device()``) instead of guessing. The trainer (GPU compute on Azure ML)
saves CPU tensors and says so (``MLflowModel(device="cpu")``, ``saved_device`` in MLmodel,
checked by the runtime); the evaluator (CPU compute) loads with ``map_location`` as well, so a
checkpoint that does hold CUDA tensors still loads (MP630, docs/checks.md). torch is imported
inside the step bodies only, so this module loads without it.

Run one step by hand under the local launcher:
    python -m components.defect_ddp EXAMPLES LABELS MODEL [--epochs N]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Annotated

from components.defect import Examples  # examples/<split>/<class>/: the split is the folder
from mlpipe import (
    Compute,
    Environment,
    Input,
    Output,
    Param,
    PyTorch,
    Range,
    UriFile,
    component,
)
from mlpipe.contracts import MLflowModel

#: The CNN as both steps see it: an MLflow model folder whose tensors are saved on the CPU.
CNN = MLflowModel("defect-cnn", device="cpu")
Cnn = Annotated[Path, CNN]


@component(name="train_cnn", version="3.0.0", environment=Environment("defect-gpu", version="7"),
           compute=Compute("gpu-cluster", sku="Standard_NC24rs_v3"), instances=2,
           distribution=PyTorch(processes_per_node=4, backend="nccl", writers={"model": "rank0"},
                                metrics={"train_loss": "mean", "train_accuracy": "mean"}))
def train_cnn(examples: Input[Examples], labels: Input[UriFile],
              model: Output[Cnn], epochs: Annotated[int, Range(1, 500)] = 40,
              learning_rate: Annotated[float, Range(0.0001, 1.0)] = 0.01,
              seed: Param[int] = 13):
    """Data-parallel CNN training: each rank trains on its shard, DDP averages the gradients,
    rank 0 saves the model."""
    import math

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    from components.images import SIZE, read_pgm
    from components.serving import write_pyfunc
    from components.serving.defect_cnn import net as cnn
    from mlpipe.runtime import (
        all_reduce_metric,
        backend,
        is_writer,
        mark_written,
        shard,
        world_size,
    )
    from mlpipe.runtime import device as runtime_device

    if world_size() > 1:
        dist.init_process_group(backend(), init_method="env://")
    device = runtime_device()
    encoding = json.loads(Path(labels).read_text())
    root = Path(examples) / "train"
    ids = sorted(f"{p.parent.name}/{p.name}" for p in root.glob("*/*.pgm")
                 if p.parent.name in encoding)
    mine = shard(ids, seed=seed)
    x = torch.tensor([read_pgm(root / i) for i in mine]).view(-1, 1, SIZE, SIZE).to(device)
    y = torch.tensor([encoding[i.split("/")[0]] for i in mine]).to(device)

    torch.manual_seed(seed)    # the same initial weights on every rank
    net = cnn(SIZE * SIZE, len(encoding)).to(device)
    ddp = DistributedDataParallel(net) if world_size() > 1 else net
    opt = torch.optim.Adam(ddp.parameters(), lr=learning_rate)
    # the global batch is 16 at any world size: each rank takes its share of it, so the run
    # takes the same steps on the same number of examples at 1 rank and at 8 (`mlpipe rehearse`)
    batch = max(1, 16 // world_size())
    # Every rank takes the same number of steps (DDP needs it) even when shards differ by one.
    steps = math.ceil(math.ceil(len(ids) / world_size()) / batch)
    loss = torch.tensor(0.0)
    for _ in range(epochs):
        order = torch.randperm(len(mine))
        for s in range(steps):
            idx = order[[(s * batch + k) % len(mine) for k in range(batch)]]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(x[idx]), y[idx])
            loss.backward()
            opt.step()
    with torch.no_grad():
        accuracy = (net(x).argmax(1) == y).float().mean().item()
    all_reduce_metric("train_loss", loss.item(), op="mean", population=f"train, {len(ids)}")
    all_reduce_metric("train_accuracy", accuracy, op="mean", population=f"train, {len(ids)}")
    if is_writer("model"):
        out = Path(model)
        out.mkdir(parents=True, exist_ok=True)
        # CPU tensors: the evaluation runs on CPU compute
        torch.save({k: v.cpu() for k, v in net.state_dict().items()}, out / "model.pt")
        (out / "labels.json").write_text(json.dumps(encoding))
        # an MLflow model: mlflow.pyfunc.load_model loads it through code/defect_cnn.py
        write_pyfunc(out, "defect_cnn", CNN.mlmodel_fields(), model_format="defect-cnn")
        mark_written("model")
    if world_size() > 1:
        dist.barrier()
        dist.destroy_process_group()


@component(name="evaluate_cnn", version="1.0.0", environment=Environment("defect-gpu", version="7"),
           compute=Compute("cpu-cluster", sku="Standard_D4s_v3"))
def evaluate_cnn(model: Input[Cnn], examples: Input[Examples],
                 labels: Input[UriFile], report: Output[UriFile]):
    """Accuracy of the CNN on the whole test split, per class and overall (one process)."""
    import torch
    from torch import nn

    from components.images import SIZE, read_pgm
    from mlpipe.runtime import device, log_metric

    encoding = json.loads(Path(labels).read_text())
    saved = json.loads((Path(model) / "labels.json").read_text())
    if saved != encoding:
        raise ValueError(f"model was trained with labels {saved}, evaluation uses {encoding}")
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(16 * (SIZE // 2) ** 2, len(encoding)))
    # the model may have been trained on GPU compute; this step's compute may have none
    here = device()
    net.load_state_dict(torch.load(Path(model) / "model.pt", map_location=here))
    net.to(here)
    files = sorted(p for p in (Path(examples) / "test").glob("*/*.pgm")
                   if p.parent.name in encoding)
    x = torch.tensor([read_pgm(p) for p in files]).view(-1, 1, SIZE, SIZE).to(here)
    y = torch.tensor([encoding[p.parent.name] for p in files]).to(here)
    with torch.no_grad():
        hit = net(x).argmax(1) == y
    metrics = {"accuracy": {"value": hit.float().mean().item() if len(files) else 0.0,
                            "scope": "global"}}
    for name, code in encoding.items():
        mask = y == code
        metrics[f"recall_{name}"] = {"value": hit[mask].float().mean().item() if mask.any()
                                     else 0.0, "scope": "global"}
    for name, entry in metrics.items():
        log_metric(name, entry["value"], scope="global", population=f"test, {len(files)} examples")
    Path(report).write_text(json.dumps({"population": {"split": "test", "examples": len(files)},
                                        "metrics": metrics}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description="Run train_cnn's body (under a launcher).")
    parser.add_argument("examples")
    parser.add_argument("labels")
    parser.add_argument("model")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    train_cnn.fn(args.examples, args.labels, args.model, epochs=args.epochs, seed=args.seed)


if __name__ == "__main__":
    main()
