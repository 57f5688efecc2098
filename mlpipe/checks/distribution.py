"""Distribution checks (MP5xx): does a step's launch contract form one coherent design?

Node count, processes per node, the VM size's GPUs and network, the framework's backend,
output ownership and metric scope, judged from the spec and the compute catalogue only.
"""
from __future__ import annotations

import re
from typing import Iterator

from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.compute import CATALOGUE, Cluster, VmSize
from mlpipe.diagnostics import Diagnostic, Severity, register_code
from mlpipe.distribution import ALL_OUTPUTS, Mpi, NotAJobType, PyTorch, TensorFlow
from mlpipe.graph import FromLiteral, Graph, StepNode

ONE_PER_NODE = register_code(
    "MP501", "pytorch-one-process-per-node", Severity.ERROR,
    "PyTorch on a multi-GPU size without processes_per_node: one process per node, GPUs idle.")
PROCS_GPUS = register_code(
    "MP502", "processes-gpus-mismatch", Severity.ERROR,
    "Processes per node differ from the VM size's GPUs per node.")
WORLD = register_code(
    "MP503", "world-size-mismatch", Severity.ERROR,
    "A world size stated in the step disagrees with instances x processes per node.")
GPU_ON_CPU = register_code(
    "MP504", "gpu-distribution-on-cpu-size", Severity.WARNING,
    "PyTorch distribution on a CPU-only VM size with no CPU backend declared.")
BACKEND = register_code(
    "MP505", "backend-device-mismatch", Severity.ERROR,
    "The declared torch.distributed backend does not suit the VM size (NCCL on CPU, gloo on GPU).")
NO_IB = register_code(
    "MP506", "multi-node-without-infiniband", Severity.WARNING,
    "Multi-node GPU training on a VM size without InfiniBand: scaling will suffer.")
MPI_PROCS = register_code(
    "MP507", "mpi-processes-unset", Severity.ERROR,
    "An MPI distribution without processes_per_node, which Azure ML requires.")
BLOCKED = register_code(
    "MP508", "node-traffic-blocked", Severity.ERROR,
    "MPI or multi-node training on a cluster that blocks node-to-node traffic.")
LAUNCHER = register_code(
    "MP509", "launcher-in-command", Severity.ERROR,
    "torchrun, torch.distributed.launch, mpirun or deepspeed in a command Azure ML launches.")
LIBRARY = register_code(
    "MP510", "library-as-job-type", Severity.ERROR,
    "DeepSpeed, FSDP or Horovod requested as a distribution type; they are libraries.")
PARAM_SERVERS = register_code(
    "MP511", "tf-parameter-servers", Severity.WARNING,
    "TensorFlow parameter servers (a TF1 pattern) for TF2 code.")
IDLE_NODES = register_code(
    "MP512", "instances-without-distribution", Severity.ERROR,
    "instances > 1 for a component that declares no distribution: extra nodes sit idle.")
NO_WRITER = register_code(
    "MP513", "output-writer-undeclared", Severity.ERROR,
    "A distributed step's output has no declared writer policy.")
UNAGGREGATED = register_code(
    "MP514", "global-metric-unaggregated", Severity.ERROR,
    "A metric declared global has no aggregation across ranks.")
TOO_SMALL = register_code(
    "MP515", "cluster-too-small", Severity.ERROR,
    "A step asks for more instances than its cluster has nodes.")
UNKNOWN_SIZE = register_code(
    "MP516", "unknown-vm-size", Severity.INFO,
    "A distributed step's VM size is unknown, so GPU and network checks were skipped.")
WRITER_UNKNOWN = register_code(
    "MP517", "writer-for-unknown-output", Severity.ERROR,
    "A writer policy names an output the component does not have.")

# Run-time findings of the post-step coordination check (mlpipe.backends.local.coordination).
UNRECORDED = register_code(
    "MP520", "coordination-unrecorded", Severity.WARNING,
    "Ranks of a distributed step left no coordination record, so coordination is unevidenced.")
OVERLAP = register_code(
    "MP521", "shard-overlap", Severity.ERROR,
    "Two ranks consumed the same example in one distributed step.")
COPIES = register_code(
    "MP522", "independent-copies", Severity.ERROR,
    "Every rank consumed the whole data set: N independent copies, not a distributed run.")
COVERAGE = register_code(
    "MP523", "coverage-gap", Severity.ERROR,
    "Examples of the data set that no rank consumed.")
WRITERS = register_code(
    "MP524", "multiple-writers", Severity.ERROR,
    "More than one rank wrote an output that has a single writer.")
WRONG_WRITER = register_code(
    "MP525", "undeclared-writer", Severity.ERROR,
    "A rank other than the declared writer wrote an output.")
PARTIAL_GLOBAL = register_code(
    "MP526", "partial-metric-logged-as-global", Severity.ERROR,
    "A metric logged as global by more than one rank: each rank's partial view, not the whole.")


_LAUNCHERS = re.compile(r"(?<![\w.-])(torchrun|torch\.distributed\.(?:launch|run)|mpirun|mpiexec|"
                        r"deepspeed|horovodrun|accelerate\s+launch)(?![\w-])")
_WORLD_FLAG = re.compile(r"--world[-_]size[=\s]+(\d+)")
_TF1 = re.compile(r"(tensorflow|tf)[-_:.]?1(\b|[._-])", re.I)


def _size(node: StepNode) -> tuple[VmSize | None, Cluster | None, str | None]:
    return CATALOGUE.resolve(node.component.compute)


def _distributed(node: StepNode) -> bool:
    c = node.component
    return c.distribution is not None or c.instances > 1


@check(ONE_PER_NODE, PROCS_GPUS)
def processes_per_gpu(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        dist, (size, _, _) = node.component.distribution, _size(node)
        if not isinstance(dist, (PyTorch, Mpi)) or size is None or not size.has_gpu:
            continue
        ppn = dist.processes_per_node
        if ppn is None and isinstance(dist, PyTorch) and size.gpus > 1:
            yield Diagnostic.of(
                ONE_PER_NODE, f"step '{node.id}' uses PyTorch on {size.describe()} without "
                              f"processes_per_node, so Azure ML starts 1 process per node and "
                              f"{size.gpus - 1} of {size.gpus} GPUs sit idle",
                hint=f"pass PyTorch(processes_per_node={size.gpus})", **at_step(node))
        elif ppn is not None and ppn != size.gpus:
            more = ppn > size.gpus
            yield Diagnostic.of(
                PROCS_GPUS, f"step '{node.id}' starts {ppn} processes per node on "
                            f"{size.describe()}: " + (
                                f"{ppn - size.gpus} processes have no GPU of their own" if more
                                else f"{size.gpus - ppn} GPUs sit idle"),
                hint=f"set processes_per_node={size.gpus}, one process per GPU",
                **at_step(node))


def _stated_world_sizes(node: StepNode) -> Iterator[tuple[str, int]]:
    c = node.component
    for key, value in c.environment_variables:
        if key == "WORLD_SIZE" and value.isdigit():
            yield "environment variable WORLD_SIZE", int(value)
    for key, value in (c.environment.variables if c.environment else ()):
        if key == "WORLD_SIZE" and value.isdigit():
            yield f"environment {c.environment.name!r} variable WORLD_SIZE", int(value)
    param = c.param("world_size")
    if param is not None:
        bound = node.bindings.get("world_size")
        value = bound.value if isinstance(bound, FromLiteral) else param.default
        if isinstance(value, int) and not isinstance(value, bool):
            yield "parameter world_size", value
    if c.command:
        for m in _WORLD_FLAG.finditer(c.command):
            yield f"command flag {m.group(0).split()[0].split('=')[0]}", int(m.group(1))


@check(WORLD)
def world_size(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        expected = c.distribution.world_size(c.instances) if c.distribution else c.instances
        for where, stated in _stated_world_sizes(node):
            if stated == expected:
                continue
            how = (f"{c.instances} instances x {c.distribution.processes_per_instance()} "
                   f"processes per node" if not isinstance(c.distribution, TensorFlow) else
                   f"{expected} TensorFlow workers") if c.distribution else f"{c.instances} instance(s)"
            yield Diagnostic.of(
                WORLD, f"step '{node.id}' states a world size of {stated} ({where}) but launches "
                       f"{expected} processes ({how})",
                hint="remove the stated value and read WORLD_SIZE from the environment Azure ML "
                     "sets, or change instances/processes_per_node to match", **at_step(node))


@check(GPU_ON_CPU, BACKEND)
def backend_device(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        dist, (size, _, _) = node.component.distribution, _size(node)
        if not isinstance(dist, PyTorch) or size is None:
            continue
        if not size.has_gpu and dist.backend is None:
            yield Diagnostic.of(
                GPU_ON_CPU, f"step '{node.id}' declares a PyTorch distribution on "
                            f"{size.describe()}; there is no GPU for NCCL",
                hint="move the step to a GPU size (NC, ND series), or declare "
                     "PyTorch(backend='gloo') if CPU data-parallel training is intended",
                **at_step(node))
        elif not size.has_gpu and dist.backend == "nccl":
            yield Diagnostic.of(
                BACKEND, f"step '{node.id}' declares backend 'nccl' on {size.describe()}; NCCL "
                         f"needs GPUs", hint="use backend='gloo' on CPU, or a GPU size",
                **at_step(node))
        elif size.has_gpu and dist.backend == "gloo":
            yield Diagnostic.of(
                BACKEND, f"step '{node.id}' declares backend 'gloo' on {size.describe()}; GPU "
                         f"collectives over gloo are far slower than NCCL",
                hint="use backend='nccl' on GPUs", severity=Severity.WARNING, **at_step(node))


@check(NO_IB)
def infiniband(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, (size, _, _) = node.component, _size(node)
        if c.distribution is None or c.instances < 2 or size is None or not size.has_gpu:
            continue
        if not size.infiniband:
            older = " (its RDMA network is the older, non-SR-IOV kind)" if size.rdma else ""
            yield Diagnostic.of(
                NO_IB, f"step '{node.id}' trains on {c.instances} nodes of "
                       f"{size.describe()}{older}; collectives between nodes go over Ethernet",
                hint="use an InfiniBand size (the 'r' sizes such as Standard_NC24rs_v3, or the "
                     "ND series), or train on one node", **at_step(node))


@check(MPI_PROCS, BLOCKED)
def mpi(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, (_, cluster, _) = node.component, _size(node)
        if isinstance(c.distribution, Mpi) and c.distribution.processes_per_node is None:
            yield Diagnostic.of(
                MPI_PROCS, f"step '{node.id}' uses an MPI distribution without "
                           f"processes_per_node; Azure ML requires process_count_per_instance "
                           f"for MPI", hint="pass Mpi(processes_per_node=N), N = GPUs per node "
                                            "(or ranks per CPU node)", **at_step(node))
        needs_network = isinstance(c.distribution, Mpi) or (
            c.distribution is not None and c.instances > 1)
        if cluster is not None and not cluster.node_to_node and needs_network:
            what = "MPI" if isinstance(c.distribution, Mpi) else f"{c.instances}-node training"
            yield Diagnostic.of(
                BLOCKED, f"step '{node.id}' runs {what} on cluster {cluster.name!r}, whose network "
                         f"blocks node-to-node traffic", hint="use a communication-enabled cluster "
                         "that allows traffic between its nodes", **at_step(node))


@check(LAUNCHER, LIBRARY)
def launchers(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        m = _LAUNCHERS.search(c.command or "")
        if m:
            yield Diagnostic.of(
                LAUNCHER, f"the command of step '{node.id}' runs {m.group(1)!r}, but Azure ML "
                          f"already starts the processes: {c.command!r}",
                hint="run the script directly (python train.py ...) and declare "
                     "distribution=PyTorch(processes_per_node=N) / Mpi(...) and instances=K",
                **at_step(node))
        if isinstance(c.distribution, NotAJobType):
            yield Diagnostic.of(
                LIBRARY, f"step '{node.id}' requests distribution type "
                         f"{c.distribution.requested!r}; it is a library in the training script, "
                         f"not an Azure ML job or distribution type",
                hint="declare PyTorch(processes_per_node=N) (or Mpi(...)) and use the library "
                     "inside the script and environment", **at_step(node))


@check(PARAM_SERVERS)
def tf_parameter_servers(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        if not isinstance(c.distribution, TensorFlow) or c.distribution.parameter_servers == 0:
            continue
        env = c.environment
        if env is not None and any(_TF1.search(s or "") for s in (env.name, env.image)):
            continue
        yield Diagnostic.of(
            PARAM_SERVERS, f"step '{node.id}' asks for {c.distribution.parameter_servers} "
                           f"parameter server(s); parameter servers are the TensorFlow 1.x "
                           f"strategy", hint="set parameter_servers=0 and use "
                           "MultiWorkerMirroredStrategy, or pin a TensorFlow 1.x environment if "
                           "the code really is TF1", **at_step(node))


@check(IDLE_NODES)
def idle_nodes(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        if c.instances > 1 and c.distribution is None:
            yield Diagnostic.of(
                IDLE_NODES, f"step '{node.id}' asks for {c.instances} instances but "
                            f"{c.name!r} declares no distribution, so one node trains and "
                            f"{c.instances - 1} sit idle",
                hint="remove instances=..., or make the code distributed and declare "
                     "distribution=PyTorch(...)/TensorFlow(...)/Mpi(...)", **at_step(node))


@check(NO_WRITER, WRITER_UNKNOWN, UNAGGREGATED)
def ownership(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, dist = node.component, node.component.distribution
        if dist is None or isinstance(dist, NotAJobType):
            continue
        outputs = {p.name for p in c.outputs}
        for name, _ in dist.writers:
            if name != ALL_OUTPUTS and name not in outputs:
                yield Diagnostic.of(
                    WRITER_UNKNOWN, f"step '{node.id}' declares a writer for {name!r}, which is "
                                    f"not an output of {c.name!r}",
                    hint=f"its outputs are: {', '.join(sorted(outputs)) or 'none'}",
                    **at_step(node, name))
        if dist.world_size(c.instances) > 1:
            missing = [p.name for p in c.outputs if dist.writer_policy(p.name) is None]
            if missing:
                yield Diagnostic.of(
                    NO_WRITER, f"step '{node.id}' runs {dist.world_size(c.instances)} processes "
                               f"but declares no writer for output(s) "
                               f"{', '.join(repr(m) for m in missing)}",
                    hint="declare writers='rank0' (rank 0 saves, others skip via is_writer()) "
                         "or writers={'name': 'sharded'} for a per-rank sharded save",
                    **at_step(node, missing[0]))
        for name, metric in dist.metrics:
            if metric.scope == "global" and metric.reduce is None:
                yield Diagnostic.of(
                    UNAGGREGATED, f"step '{node.id}' declares metric {name!r} global but says "
                                  f"not how the ranks' values are combined",
                    hint=f"declare metrics={{{name!r}: 'mean'}} (or sum/min/max, or 'rank0' "
                         f"when rank 0 computes it over the whole population), or 'partial'",
                    **at_step(node))


@check(TOO_SMALL, UNKNOWN_SIZE)
def capacity(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c, (size, cluster, size_name) = node.component, _size(node)
        if cluster is not None and c.instances > cluster.nodes:
            yield Diagnostic.of(
                TOO_SMALL, f"step '{node.id}' asks for {c.instances} instances but cluster "
                           f"{cluster.name!r} has at most {cluster.nodes} nodes",
                hint=f"lower instances to {cluster.nodes} or raise the cluster's maximum "
                     f"node count", **at_step(node))
        if _distributed(node) and size is None:
            said = (f"VM size {size_name!r} is not in the catalogue" if size_name else
                    "its compute names no VM size")
            yield Diagnostic.of(
                UNKNOWN_SIZE, f"step '{node.id}' is distributed but {said}; GPU and network "
                              f"checks were skipped",
                hint="pass Compute(name, sku='Standard_...') or declare the cluster with "
                     "mlpipe.compute.define_cluster / define_vm_size", **at_step(node))
