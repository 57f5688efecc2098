"""Distribution checks (MP5xx): does a step's launch contract form one coherent design?

Node count, processes per node, the VM size's GPUs and network, the framework's backend,
output ownership and metric scope, judged from the spec and the compute catalogue only.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from mlpipe.checks.body import body_facts
from mlpipe.checks.fields import deepspeed_world_size
from mlpipe.checks.frameworks import LAUNCHERS
from mlpipe.checks.jobfields import stated_by_launchers
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step, help_for
from mlpipe.codes import (
    BACKEND_DEVICE_MISMATCH,
    CLUSTER_TOO_SMALL,
    GLOBAL_METRIC_UNAGGREGATED,
    GPU_DISTRIBUTION_ON_CPU_SIZE,
    INSTANCES_WITHOUT_DISTRIBUTION,
    LAUNCHER_IN_COMMAND,
    LIBRARY_AS_JOB_TYPE,
    MPI_PROCESSES_UNSET,
    MULTI_NODE_WITHOUT_INFINIBAND,
    NODE_TRAFFIC_BLOCKED,
    OUTPUT_WRITER_UNDECLARED,
    PROCESSES_GPUS_MISMATCH,
    PYTORCH_ONE_PROCESS_PER_NODE,
    TF_PARAMETER_SERVERS,
    UNKNOWN_VM_SIZE,
    WORLD_SIZE_MISMATCH,
    WRITER_FOR_UNKNOWN_OUTPUT,
)
from mlpipe.compute import CATALOGUE, Cluster, VmSize
from mlpipe.diagnostics import Diagnostic, Severity
from mlpipe.distribution import (
    ALL_OUTPUTS,
    FOREIGN_LAUNCH,
    Mpi,
    NotAJobType,
    PyTorch,
    TensorFlow,
)
from mlpipe.graph import FromLiteral, Graph, StepNode

_WORLD_FLAG = re.compile(r"--world[-_]size[=\s]+(\d+)")
_TF1 = re.compile(r"(tensorflow|tf)[-_:.]?1(\b|[._-])", re.I)


def _size(node: StepNode) -> tuple[VmSize | None, Cluster | None, str | None]:
    return CATALOGUE.resolve(node.component.compute)


def _distributed(node: StepNode) -> bool:
    c = node.component
    return c.distribution is not None or c.instances > 1


@check(PYTORCH_ONE_PROCESS_PER_NODE, PROCESSES_GPUS_MISMATCH)
def processes_per_gpu(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        dist, (size, _, _) = node.component.distribution, _size(node)
        if not isinstance(dist, (PyTorch, Mpi)) or size is None or not size.has_gpu:
            continue
        ppn = dist.processes_per_node
        if ppn is None and isinstance(dist, PyTorch) and size.gpus > 1:
            yield Diagnostic.of(
                PYTORCH_ONE_PROCESS_PER_NODE,
                f"step '{node.id}' uses PyTorch on {size.describe()} without "
                f"processes_per_node, so Azure ML starts 1 process per node and "
                f"{size.gpus - 1} of {size.gpus} GPUs sit idle",
                hint=help_for(node, f"pass PyTorch(processes_per_node={size.gpus})",
                              f"set distribution: {{type: pytorch, process_count_per_instance: "
                              f"{size.gpus}}}",
                              f"pass distribution=PyTorchDistribution(process_count_per_instance="
                              f"{size.gpus})"), **at_step(node))
        elif ppn is not None and ppn != size.gpus:
            more = ppn > size.gpus
            yield Diagnostic.of(
                PROCESSES_GPUS_MISMATCH, f"step '{node.id}' starts {ppn} processes per node on "
                            f"{size.describe()}: " + (
                                f"{ppn - size.gpus} processes have no GPU of their own" if more
                                else f"{size.gpus - ppn} GPUs sit idle"),
                hint=help_for(node, f"set processes_per_node={size.gpus}, one process per GPU",
                              f"set distribution.process_count_per_instance: {size.gpus}, one "
                              f"process per GPU",
                              f"set process_count_per_instance={size.gpus} in the "
                              f"distribution, one process per GPU"),
                **at_step(node))


def _stated_world_sizes(node: StepNode) -> Iterator[tuple[str, int | float]]:
    c = node.component
    for key, value in c.environment_variables:
        if key == "WORLD_SIZE" and value.isdigit():
            yield "environment variable WORLD_SIZE", int(value)
    env = c.environment
    if env:
        for key, value in env.variables:
            if key == "WORLD_SIZE" and value.isdigit():
                yield f"environment {env.name!r} variable WORLD_SIZE", int(value)
    param = c.param("world_size")
    if param is not None:
        bound = node.bindings.get("world_size")
        value = bound.value if isinstance(bound, FromLiteral) else param.default
        if isinstance(value, int) and not isinstance(value, bool):
            yield "parameter world_size", value
    if c.command:
        for m in _WORLD_FLAG.finditer(c.command):
            yield f"command flag {m.group(0).split()[0].split('=')[0]}", int(m.group(1))
    if c.distribution is not None:
        implied = deepspeed_world_size(node, body_facts(c))
        if implied is not None:
            yield implied
        yield from stated_by_launchers(node)


@check(WORLD_SIZE_MISMATCH)
def world_size(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        expected = c.distribution.world_size(c.instances) if c.distribution else c.instances
        for where, stated in _stated_world_sizes(node):
            if stated == expected:
                continue
            if c.distribution is None:
                how = f"{c.instances} instance(s)"
            elif isinstance(c.distribution, TensorFlow):
                how = f"{expected} TensorFlow workers"
            else:
                how = (f"{c.instances} instances x {c.distribution.processes_per_instance()} "
                       f"processes per node")
            yield Diagnostic.of(
                WORLD_SIZE_MISMATCH,
                f"step '{node.id}' states a world size of {stated} ({where}) but launches "
                f"{expected} processes ({how})",
                hint="remove the stated value and read WORLD_SIZE from the environment Azure ML "
                     "sets, or change instances/processes_per_node to match", **at_step(node))


@check(GPU_DISTRIBUTION_ON_CPU_SIZE, BACKEND_DEVICE_MISMATCH)
def backend_device(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        dist, (size, _, _) = node.component.distribution, _size(node)
        if not isinstance(dist, PyTorch) or size is None:
            continue
        if not size.has_gpu and dist.backend is None:
            yield Diagnostic.of(
                GPU_DISTRIBUTION_ON_CPU_SIZE,
                f"step '{node.id}' declares a PyTorch distribution on "
                f"{size.describe()}; there is no GPU for NCCL",
                hint="move the step to a GPU size (NC, ND series), or declare "
                     "PyTorch(backend='gloo') if CPU data-parallel training is intended",
                **at_step(node))
        elif not size.has_gpu and dist.backend == "nccl":
            yield Diagnostic.of(
                BACKEND_DEVICE_MISMATCH,
                f"step '{node.id}' declares backend 'nccl' on {size.describe()}; NCCL "
                f"needs GPUs", hint="use backend='gloo' on CPU, or a GPU size",
                **at_step(node))
        elif size.has_gpu and dist.backend == "gloo":
            yield Diagnostic.of(
                BACKEND_DEVICE_MISMATCH,
                f"step '{node.id}' declares backend 'gloo' on {size.describe()}; GPU "
                f"collectives over gloo are far slower than NCCL",
                hint="use backend='nccl' on GPUs", severity=Severity.WARNING, **at_step(node))


@check(MULTI_NODE_WITHOUT_INFINIBAND)
def infiniband(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, (size, _, _) = node.component, _size(node)
        if c.distribution is None or c.instances < 2 or size is None or not size.has_gpu:
            continue
        if not size.infiniband:
            older = " (its RDMA network is the older, non-SR-IOV kind)" if size.rdma else ""
            yield Diagnostic.of(
                MULTI_NODE_WITHOUT_INFINIBAND, f"step '{node.id}' trains on {c.instances} nodes of "
                       f"{size.describe()}{older}; collectives between nodes go over Ethernet",
                hint="use an InfiniBand size (the 'r' sizes such as Standard_NC24rs_v3, or the "
                     "ND series), or train on one node", **at_step(node))


@check(MPI_PROCESSES_UNSET, NODE_TRAFFIC_BLOCKED)
def mpi(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, (_, cluster, _) = node.component, _size(node)
        if isinstance(c.distribution, Mpi) and c.distribution.processes_per_node is None:
            yield Diagnostic.of(
                MPI_PROCESSES_UNSET, f"step '{node.id}' uses an MPI distribution without "
                           f"processes_per_node; Azure ML requires process_count_per_instance "
                           f"for MPI", hint="pass Mpi(processes_per_node=N), N = GPUs per node "
                                            "(or ranks per CPU node)", **at_step(node))
        needs_network = isinstance(c.distribution, Mpi) or (
            c.distribution is not None and c.instances > 1)
        if cluster is not None and not cluster.node_to_node and needs_network:
            what = "MPI" if isinstance(c.distribution, Mpi) else f"{c.instances}-node training"
            yield Diagnostic.of(
                NODE_TRAFFIC_BLOCKED,
                f"step '{node.id}' runs {what} on cluster {cluster.name!r}, whose network "
                f"blocks node-to-node traffic", hint="use a communication-enabled cluster "
                "that allows traffic between its nodes", **at_step(node))


@check(LAUNCHER_IN_COMMAND, LIBRARY_AS_JOB_TYPE)
def launchers(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        m = LAUNCHERS.search(c.command or "")
        if m:
            yield Diagnostic.of(
                LAUNCHER_IN_COMMAND,
                f"the command of step '{node.id}' runs {m.group(1)!r}, but Azure ML "
                f"already starts the processes: {c.command!r}",
                hint="run the script directly (python train.py ...) and declare "
                     "distribution=PyTorch(processes_per_node=N) / Mpi(...) and instances=K",
                **at_step(node))
        if isinstance(c.distribution, NotAJobType):
            yield Diagnostic.of(
                LIBRARY_AS_JOB_TYPE, f"step '{node.id}' requests distribution type "
                         f"{c.distribution.requested!r}; it is a library in the training script, "
                         f"not an Azure ML job or distribution type",
                hint="declare PyTorch(processes_per_node=N) (or Mpi(...)) and use the library "
                     "inside the script and environment", **at_step(node))


@check(TF_PARAMETER_SERVERS)
def tf_parameter_servers(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        if not isinstance(c.distribution, TensorFlow) or c.distribution.parameter_servers == 0:
            continue
        env = c.environment
        if env is not None and any(_TF1.search(s or "") for s in (env.name, env.image)):
            continue
        yield Diagnostic.of(
            TF_PARAMETER_SERVERS, f"step '{node.id}' asks for {c.distribution.parameter_servers} "
                           f"parameter server(s); parameter servers are the TensorFlow 1.x "
                           f"strategy", hint="set parameter_servers=0 and use "
                           "MultiWorkerMirroredStrategy, or pin a TensorFlow 1.x environment if "
                           "the code really is TF1", **at_step(node))


def _foreign_launch(component) -> bool:
    """Whether the component declares a distribution mlpipe does not launch (Ray, read from
    YAML): it is distributed, only not by a launcher mlpipe models."""
    return (component.azure_only or "").endswith(FOREIGN_LAUNCH)


@check(INSTANCES_WITHOUT_DISTRIBUTION)
def idle_nodes(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        if c.instances > 1 and c.distribution is None and not _foreign_launch(c):
            yield Diagnostic.of(
                INSTANCES_WITHOUT_DISTRIBUTION,
                f"step '{node.id}' asks for {c.instances} instances but "
                f"{c.name!r} declares no distribution, so one node trains and "
                f"{c.instances - 1} sit idle",
                hint=help_for(node, "remove instances=..., or make the code distributed and "
                                    "declare distribution=PyTorch(...)/TensorFlow(...)/Mpi(...)",
                              "remove resources.instance_count, or make the code distributed and "
                              "declare distribution: {type: pytorch|tensorflow|mpi, ...}",
                              "remove instance_count=..., or make the code distributed and pass "
                              "distribution=PyTorchDistribution(...)/TensorFlowDistribution(...)/"
                              "MpiDistribution(...)"), **at_step(node))


@check(OUTPUT_WRITER_UNDECLARED, WRITER_FOR_UNKNOWN_OUTPUT, GLOBAL_METRIC_UNAGGREGATED)
def ownership(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, dist = node.component, node.component.distribution
        if dist is None or isinstance(dist, NotAJobType):
            continue
        outputs = {p.name for p in c.outputs}
        for name, _ in getattr(dist, "writers", ()):
            if name != ALL_OUTPUTS and name not in outputs:
                yield Diagnostic.of(
                    WRITER_FOR_UNKNOWN_OUTPUT,
                    f"step '{node.id}' declares a writer for {name!r}, which is "
                    f"not an output of {c.name!r}",
                    hint=f"its outputs are: {', '.join(sorted(outputs)) or 'none'}",
                    **at_step(node, name))
        if dist.world_size(c.instances) > 1:
            missing = [p.name for p in c.outputs if dist.writer_policy(p.name) is None]
            if missing and c.command is not None:
                # a command component (Azure ML YAML): declared in its tags, so a correct
                # azureml-examples DDP component is warned about, not refused
                yield Diagnostic.of(
                    OUTPUT_WRITER_UNDECLARED,
                    f"step '{node.id}' runs {dist.world_size(c.instances)} processes "
                    f"but its component declares no writer for output(s) "
                    f"{', '.join(repr(m) for m in missing)}",
                    hint=f"declare it in the component's YAML: tags: {{mlpipe.writers."
                         f"{missing[0]}: rank0}} (rank 0 saves), sharded (every rank saves "
                         f"its own part) or a rank number", severity=Severity.WARNING,
                    **at_step(node, missing[0]))
            elif missing:
                yield Diagnostic.of(
                    OUTPUT_WRITER_UNDECLARED,
                    f"step '{node.id}' runs {dist.world_size(c.instances)} processes "
                    f"but declares no writer for output(s) "
                    f"{', '.join(repr(m) for m in missing)}",
                    hint="declare writers='rank0' (rank 0 saves, others skip via is_writer()) "
                         "or writers={'name': 'sharded'} for a per-rank sharded save",
                    **at_step(node, missing[0]))
        for name, metric in getattr(dist, "metrics", ()):
            if metric.scope == "global" and metric.reduce is None:
                yield Diagnostic.of(
                    GLOBAL_METRIC_UNAGGREGATED,
                    f"step '{node.id}' declares metric {name!r} global but says "
                    f"not how the ranks' values are combined",
                    hint=f"declare metrics={{{name!r}: 'mean'}} (or sum/min/max, or 'rank0' "
                         f"when rank 0 computes it over the whole population), or 'partial'",
                    **at_step(node))


@check(CLUSTER_TOO_SMALL, UNKNOWN_VM_SIZE)
def capacity(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, (size, cluster, size_name) = node.component, _size(node)
        if cluster is not None and c.instances > cluster.nodes:
            yield Diagnostic.of(
                CLUSTER_TOO_SMALL, f"step '{node.id}' asks for {c.instances} instances but cluster "
                           f"{cluster.name!r} has at most {cluster.nodes} nodes",
                hint=f"lower instances to {cluster.nodes} or raise the cluster's maximum "
                     f"node count", **at_step(node))
        if _distributed(node) and size is None:
            said = (f"VM size {size_name!r} is not in the catalogue" if size_name else
                    "its compute names no VM size")
            yield Diagnostic.of(
                UNKNOWN_VM_SIZE, f"step '{node.id}' is distributed but {said}; GPU and network "
                              f"checks were skipped",
                hint=help_for(node, "pass Compute(name, sku='Standard_...') or declare the "
                                    "cluster with mlpipe.compute.define_cluster / "
                                    "define_vm_size",
                              "give the job resources.instance_type: Standard_... (its VM "
                              "size), so that the GPU and network checks can run",
                              "pass instance_type='Standard_...' (its VM size) to command(), so "
                              "that the GPU and network checks can run"), **at_step(node))
