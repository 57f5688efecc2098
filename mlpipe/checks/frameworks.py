"""Framework checks: does a step keep to its own framework's launch contract, and does a GPU
size hold code that uses a GPU?

Another framework's launch variables (``TF_CONFIG`` on a PyTorch job, ``MASTER_ADDR`` set by
hand in a TensorFlow job) are MP518; a launcher started from the body of a step Azure ML
already launches is MP509; a single-process step with no accelerator library on a GPU size is
MP519. Read from the spec and the body's source (``checks.body``); nothing is imported.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from mlpipe import codes
from mlpipe.checks.body import body_facts, uses_accelerator
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_code, at_step
from mlpipe.compute import CATALOGUE
from mlpipe.diagnostics import Diagnostic
from mlpipe.distribution import Mpi, PyTorch, TensorFlow
from mlpipe.graph import Graph, StepNode

#: A launcher started by a command: Azure ML (or the local launcher) already starts the ranks.
LAUNCHERS = re.compile(
    r"(?<![\w.-])(torchrun|torch\.distributed\.(?:launch|run)|mpirun|mpiexec|"
    r"deepspeed|horovodrun|accelerate\s+launch)(?![\w-])")
PYTORCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE",
                "LOCAL_WORLD_SIZE", "GROUP_RANK")
MPI_VARS = re.compile(r"^(OMPI_COMM_WORLD_\w+|PMI_RANK|PMI_SIZE|PMIX_RANK)$")
_CONTRACT = {
    "pytorch": "torch.distributed.init_process_group(init_method='env://') reads MASTER_ADDR, "
               "MASTER_PORT, RANK and WORLD_SIZE, which Azure ML sets",
    "tensorflow": "MultiWorkerMirroredStrategy reads TF_CONFIG, which Azure ML writes",
    "mpi": "MPI ranks come from mpirun's OMPI_COMM_WORLD_* variables, which Azure ML's OpenMPI "
           "launch sets",
}


def framework_of(node: StepNode) -> str | None:
    """The distribution framework a step declares (pytorch, tensorflow, mpi), or None."""
    dist = node.component.distribution
    return dist.type if isinstance(dist, (PyTorch, TensorFlow, Mpi)) else None


def _owner(variable: str) -> str | None:
    """The framework whose launch contract a variable belongs to."""
    if variable == "TF_CONFIG":
        return "tensorflow"
    if variable in PYTORCH_VARS:
        return "pytorch"
    if MPI_VARS.match(variable):
        return "mpi"
    return None


def _foreign(framework: str, variable: str) -> str | None:
    owner = _owner(variable)
    if owner is None or owner == framework:
        return None
    if framework == "mpi" and owner == "pytorch":
        return None  # PyTorch over an MPI launch (DeepSpeed, Horovod) derives these itself
    return owner


_NAMES = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "mpi": "MPI"}


def framework_steps(graph: Graph) -> Iterator[tuple[StepNode, str]]:
    """Each step that declares a distribution framework, with the framework's name."""
    for node in graph.step_nodes():
        framework = framework_of(node)
        if framework is not None:
            yield node, framework


@check(codes.FOREIGN_LAUNCH_VARIABLE)
def foreign_launch_variables(graph: Graph) -> Iterator[Diagnostic]:
    for node, framework in framework_steps(graph):
        c = node.component
        stated: list[tuple[str, str, int | None]] = [
            (k, "declares environment variable", None) for k, _ in c.environment_variables]
        if c.environment is not None:
            stated += [(k, f"gets from environment {c.environment.name!r} the variable", None)
                       for k, _ in c.environment.variables]
        facts = body_facts(c)
        if facts is not None:
            stated += [(k, "sets in its code the variable", line) for k, line in facts.env_sets]
        for variable, how, line in stated:
            owner = _foreign(framework, variable)
            if owner is None:
                continue
            yield Diagnostic.of(
                codes.FOREIGN_LAUNCH_VARIABLE,
                f"step '{node.id}' is a {_NAMES[framework]} job but {how} {variable}, part of "
                f"{_NAMES[owner]}'s launch contract: {_NAMES[framework]} ignores it, and "
                f"copying it is no substitute for {_NAMES[framework]}'s own initialization",
                hint=f"remove {variable}; {_CONTRACT[framework]}", **at_code(node, facts, line))


@check(codes.LAUNCHER_IN_COMMAND)
def launchers_in_body(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        if c.distribution is None:
            continue
        facts = body_facts(c)
        if facts is None:
            continue
        for command, line in facts.commands:
            m = LAUNCHERS.search(command)
            if m is None:
                continue
            world = c.distribution.world_size(c.instances)
            yield Diagnostic.of(
                codes.LAUNCHER_IN_COMMAND,
                f"the body of step '{node.id}' starts {m.group(1)!r} ({command!r}), but Azure "
                f"ML already starts the step as {world} process(es): each would start a group "
                f"of its own",
                hint="do the work in the body itself; declare the topology with distribution= "
                     "and instances=", **at_code(node, facts, line))


@check(codes.GPU_SIZE_WITHOUT_ACCELERATOR_CODE)
def gpu_without_accelerator(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        if c.distribution is not None or c.instances != 1 or c.compute is None:
            continue
        size, _, _ = CATALOGUE.resolve(c.compute)
        if size is None or not size.has_gpu:
            continue
        facts = body_facts(c)
        if facts is None or uses_accelerator(facts) is not False:
            continue
        yield Diagnostic.of(
            codes.GPU_SIZE_WITHOUT_ACCELERATOR_CODE,
            f"step '{node.id}' runs one process on {size.describe()} but its code imports no "
            f"library that uses a GPU: the GPUs sit idle while the size is billed",
            hint="run it on a CPU size (Compute('cpu-cluster', sku='Standard_D4s_v3')); keep "
                 "GPU sizes for the steps that train on them", **at_step(node))
