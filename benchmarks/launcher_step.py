"""The mlpipe side of ``bench_launcher.py``: ``launcher_ddp.train`` as a distributed step
(declared 2 x 4 on a CPU cluster; the benchmark launches it smaller with ``--local-scale``).
The step adds only what an mlpipe step declares: the ids each rank trained on and the writer
of the model, for the coordination check."""
import launcher_ddp

from mlpipe import Compute, Environment, Output, Param, PyTorch, component, pipeline
from mlpipe.runtime import is_writer, mark_written, record_consumed


@component(name="ddp_train", environment=Environment("bench-torch", version="1"),
           compute=Compute("cpu-cluster", sku="Standard_D4s_v3"), instances=2,
           distribution=PyTorch(processes_per_node=4, backend="gloo",
                                writers={"model": "rank0"}))
def train(model: Output["uri_folder"], steps: Param[int] = 300):
    """DDP of a logistic regression on synthetic data (``launcher_ddp.train``)."""
    mine = launcher_ddp.train(model, steps)
    record_consumed(mine, population=range(launcher_ddp.EXAMPLES))
    if is_writer("model"):
        mark_written("model")


@pipeline(name="bench-launcher")
def ddp(steps=300):
    return {"model": train(steps=steps).model}
