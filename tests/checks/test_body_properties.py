"""Hypothesis properties of the body facts (checks/body.py) and the checks that read them: on
any generated step body (imports under aliases, environment writes, spawns, launchers, device
calls, strategies, guards, helpers, odd syntax) and any launch it is declared with, reading
the facts never raises and no check crashes (no MP001)."""
from __future__ import annotations

import dataclasses
import itertools
import textwrap

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe import Compute, Input, Mpi, Output, PyTorch, TensorFlow, component
from mlpipe.checks import check_pipeline
from mlpipe.checks.body import body_facts, names_used
from mlpipe.spec import (
    InputRole,
    Location,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    StepOutput,
    StepSpec,
)

STATEMENTS = [
    "import torch", "import torch.distributed as dist", "import tensorflow as tf",
    "import torch.multiprocessing as mp", "import horovod.torch as hvd", "from mpi4py import MPI",
    "from torch.nn.parallel import DistributedDataParallel as DDP", "import os, subprocess, sys",
    "from . import sibling", "from .. import up", "from mlpipe import runtime",
    "import json as j", "from os import environ", "from os import *",
    "dist.init_process_group('nccl', init_method='env://')", "dist.init_process_group(backend=b)",
    "tf.distribute.MultiWorkerMirroredStrategy()", "hvd.init()", "MPI.COMM_WORLD.Get_rank()",
    "mp.spawn(helper, nprocs=4)", "helper()", "helper", "DDP(model)",
    "os.environ['RANK'] = '0'", "os.environ[key] = value", "os.environ.setdefault('MASTER_ADDR', 'x')",
    "os.environ.update({'TF_CONFIG': '{}', 1: 2})", "environ['WORLD_SIZE'] = str(n)",
    "os.putenv('LOCAL_RANK', '1')", "os.environ.update(RANK='3')", "rank = os.environ['RANK']",
    "os.environ.get('LOCAL_RANK')", "os.getenv(name)", "del os.environ['X']",
    "subprocess.run(['torchrun', '--nproc_per_node', '4', 'x.py'])",
    "subprocess.run([sys.executable, '-m', 'torch.distributed.run', 'x.py'])",
    "os.system(f'mpirun -np {n} python x.py')", "subprocess.Popen(cmd)",
    "model.cuda()", "x.cuda(0, 1)", "torch.device('cuda:1')", "t.to('cuda')", "t.to(device)",
    "torch.load(p, map_location='cuda')", "torch.cuda.set_device(local_rank)", "t.cpu()",
    "torch.cuda.is_available()", "device = 'cuda' if torch.cuda.is_available() else 'cpu'",
    "runtime.device()", "runtime.shard(items)", "pass", "...", "'a docstring'", "x = (y := 3)",
    "lambda q: q.cuda()", "f'{a!r:>{w}}'", "[i for i in range(3) if i]", "yield_ = None",
    "a.b.c.d.e()", "(lambda: 0)()()", "getattr(os, 'environ')['RANK'] = '1'", "global g",
]
BLOCKS = ["if cond:", "try:", "while False:", "with ctx:", "for i in xs:", "def inner():",
          "class K:", "async def co():"]
DISTRIBUTIONS = [None, PyTorch(processes_per_node=4, writers="rank0"),
                 PyTorch(processes_per_node=2, backend="gloo", writers="rank0"),
                 TensorFlow(workers=2, writers="rank0"), TensorFlow(workers=3, writers="rank0"),
                 Mpi(processes_per_node=4, writers="rank0")]
COMPUTES = [None, Compute("gpu", sku="Standard_NC24rs_v3"), Compute("cpu", sku="Standard_D4s_v3"),
            Compute("x", sku="Standard_Unknown")]
_COUNTER = itertools.count()


@component
def step_fn(data: Input["uri_folder"], model: Output["uri_folder"]):
    pass


def _lines(draw) -> list[str]:
    out: list[str] = []
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()) and draw(st.integers(0, 4)) == 0:
            block = draw(st.sampled_from(BLOCKS))
            inner = draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=3))
            out.append(block)
            out += ["    " + s for s in inner]
            if block == "try:":
                out.append("except Exception:\n    pass")
        else:
            out.append(draw(st.sampled_from(STATEMENTS)))
    return out


@st.composite
def bodies(draw):
    return _lines(draw), _lines(draw), _lines(draw)


def _spec(tmp_path, top, body, helper, dist, compute, instances, script):
    n = next(_COUNTER)
    source = "\n".join(top) + "\n\n\ndef helper():\n" + textwrap.indent(
        "\n".join(helper) or "pass", "    ") + "\n\n\ndef fn(data, model):\n" + textwrap.indent(
        "\n".join(body) or "pass", "    ") + "\n"
    path = tmp_path / f"body_{n}.py"
    path.write_text(source)
    line = source.splitlines().index("def fn(data, model):") + 1
    if script:
        comp = dataclasses.replace(step_fn.spec, function=None, command=f"python {path.name} x",
                                   code=str(tmp_path), location=Location(str(path), line))
    else:
        comp = dataclasses.replace(step_fn.spec, function=f"pkg.body_{n}:fn",
                                   location=Location(str(path), line))
    comp = dataclasses.replace(comp, distribution=dist, compute=compute, instances=instances)
    return comp, PipelineSpec("p", (PipelineInputSpec("data", InputRole.ARTIFACT),), (
        StepSpec("s", comp, (("data", PipelineInput("data")),), Location(str(path), line)),),
        (("model", StepOutput("s", "model")),))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=bodies(), dist=st.sampled_from(DISTRIBUTIONS), compute=st.sampled_from(COMPUTES),
       instances=st.integers(1, 3), script=st.booleans())
def test_body_facts_and_the_checks_never_raise(tmp_path, parts, dist, compute, instances, script):
    top, body, helper = parts
    comp, spec = _spec(tmp_path, top, body, helper, dist, compute, instances, script)
    facts = body_facts(comp)
    if facts is not None:
        names, _ = names_used(facts)
        assert isinstance(names, frozenset)
    _, diagnostics = check_pipeline(spec)
    assert [d for d in diagnostics if d.code == "MP001"] == []
