"""Launch checks (MP528-MP533, MP535, MP537): does a step's code keep to its launch?

Azure ML is the launcher: it starts ``instances x processes_per_node`` processes, injects the
framework's launch variables into each and leaves the coordination to the code. A body that
starts its own workers (MP528), overwrites those variables (MP529), coordinates through another
framework's strategy (MP530) or through nothing at all (MP532) contradicts its declaration;
so does a TensorFlow worker count that does not fit the instances (MP531), and a model wrapped
in DataParallel by each of several processes on a node (MP533), and a collective only the
ranks that pass a condition on their rank reach (MP535), and a download every rank makes
(MP537). Read from the spec
and the body's source (``checks.body``); nothing is imported.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator

from mlpipe import codes
from mlpipe.checks.body import BodyFacts, names_used, step_facts
from mlpipe.checks.envkeep import keeps_injected
from mlpipe.checks.flows import call_at, every_rank_downloads, rank_guarded_collectives
from mlpipe.checks.frameworks import LAUNCHERS, MPI_VARS, PYTORCH_VARS, framework_of
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_code, at_step
from mlpipe.diagnostics import Diagnostic, Severity
from mlpipe.distribution import TensorFlow
from mlpipe.graph import Graph, StepNode

#: Entry points that start a group of worker processes from inside a process.
SPAWNERS = (
    "torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
    "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes",
    "torch.distributed.run.main", "torch.distributed.run.run",
    "torch.distributed.launch.main", "torch.distributed.launcher.api.elastic_launch",
    "torch.distributed.launcher.elastic_launch", "torch.distributed.launcher.api.launch_agent",
    "torch.distributed.elastic.multiprocessing.start_processes",
    "deepspeed.launcher.runner.main", "horovod.run", "horovod.runner.run",
    "accelerate.notebook_launcher", "accelerate.launchers.notebook_launcher",
    "accelerate.commands.launch.launch_command",
)
#: What each framework's distributed code uses (a name used, or a module imported).
TORCH_DISTRIBUTED = ("torch.distributed", "torch.nn.parallel.DistributedDataParallel",
                     "torch.nn.parallel.distributed", "torch.utils.data.distributed",
                     "torch.utils.data.DistributedSampler", "deepspeed")
TF_DISTRIBUTED = ("tensorflow.distribute", "tensorflow.python.distribute",
                  "tensorflow.keras.distribution", "keras.distribution")
TF_MULTI_WORKER = ("tensorflow.distribute.MultiWorkerMirroredStrategy",
                   "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy",
                   "tensorflow.distribute.experimental.ParameterServerStrategy",
                   "tensorflow.distribute.ParameterServerStrategy",
                   "tensorflow.distribute.experimental.CollectiveAllReduceStrategy",
                   "tensorflow.distribute.cluster_resolver.TFConfigClusterResolver")
MPI_ONLY = ("horovod", "mpi4py")
#: Libraries that coordinate processes themselves (they read the launch variables).
COORDINATING = (*TORCH_DISTRIBUTED, *TF_DISTRIBUTED, *MPI_ONLY, "accelerate", "lightning",
                "pytorch_lightning", "transformers", "ray", "dask", "xgboost.dask",
                "xgboost.collective", "xgboost.spark", "pyspark", "mlpipe.runtime.shard",
                "mlpipe.runtime.rank", "mlpipe.runtime.local_rank", "mlpipe.runtime.world_size",
                "mlpipe.runtime.node_rank", "mlpipe.runtime.all_reduce_metric",
                "mlpipe.runtime.record_consumed", "mlpipe.runtime.distributed")
_RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK", "TF_CONFIG",
              "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
              "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "AZ_BATCHAI_TASK_INDEX")
_NAMES = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "mpi": "MPI"}


def _steps(graph: Graph) -> Iterator[tuple[StepNode, BodyFacts | None]]:
    """Each step with its body's facts; a stub body (``pass``) has none worth judging."""
    for node, facts in step_facts(graph):
        yield node, None if facts is None or facts.empty else facts


def _first(facts: BodyFacts, prefixes: tuple[str, ...]) -> tuple[str, int] | None:
    return facts.uses(*prefixes)


def _in(names: frozenset[str], prefixes: tuple[str, ...]) -> str | None:
    for name in sorted(names):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return name
    return None


@check(codes.WORKERS_STARTED_IN_BODY)
def workers_started(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in _steps(graph):
        c = node.component
        if facts is None:
            continue
        found = [(n, line) for n, line in facts.names if n in SPAWNERS]
        if c.distribution is None:  # a launcher in a command of a distributed step is MP509
            found += [(m.group(1), line) for cmd, line in facts.commands
                      if (m := LAUNCHERS.search(cmd)) is not None]
        for name, line in found[:1]:
            if c.distribution is not None:
                world = c.distribution.world_size(c.instances)
                said = (f"Azure ML already starts {world} process(es) for it "
                        f"({_NAMES.get(framework_of(node) or '', 'declared')} distribution): "
                        f"each would start a group of its own")
                severity = Severity.ERROR
            else:
                said = ("it declares no distribution, so Azure ML starts one process and mlpipe "
                        "records one rank: the workers it starts are launched, placed and "
                        "recorded by nobody")
                severity = Severity.WARNING
            yield Diagnostic.of(
                codes.WORKERS_STARTED_IN_BODY,
                f"the code of step '{node.id}' starts worker processes through {name!r}, but "
                f"{said}",
                hint="remove the spawn and run the worker function once per process; declare "
                     "the topology with distribution=PyTorch(processes_per_node=N) (or Mpi/"
                     "TensorFlow) and instances=K, and read the rank from the environment",
                severity=severity, **at_code(node, facts, line))


def _owned(framework: str, variable: str) -> bool:
    if framework == "pytorch":
        return variable in PYTORCH_VARS
    if framework == "tensorflow":
        return variable == "TF_CONFIG"
    return bool(MPI_VARS.match(variable))


@check(codes.LAUNCH_VARIABLE_OVERWRITTEN)
def launch_variables(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in _steps(graph):
        c = node.component
        framework = framework_of(node)
        if framework is None or facts is None:
            continue
        for variable, line in facts.env_overwrites:
            if not _owned(framework, variable):
                continue  # another framework's variable is MP518
            if keeps_injected(facts.file, line, variable):
                continue  # set only where unset, or to its own value: what was injected stays
            address = variable in ("MASTER_ADDR", "MASTER_PORT")
            severity = Severity.WARNING if address and c.instances == 1 else Severity.ERROR
            effect = ("every node would look for the rendezvous at the address it sets"
                      if address else "every process gets the same value, so the ranks no "
                      "longer tell themselves apart")
            yield Diagnostic.of(
                codes.LAUNCH_VARIABLE_OVERWRITTEN,
                f"the code of step '{node.id}' sets {variable}, which Azure ML injects into "
                f"each process of its {_NAMES[framework]} launch: {effect}",
                hint=f"read {variable} from the environment instead of setting it (or use "
                     f"os.environ.setdefault for a local default)", severity=severity,
                **at_code(node, facts, line))


def _foreign_strategy(framework: str, facts: BodyFacts, names: frozenset[str]
                      ) -> tuple[str, str, int] | None:
    """(what is used, whose launch it needs, line) when the code coordinates otherwise."""
    wanted: list[tuple[tuple[str, ...], str]] = []
    if framework == "pytorch":
        wanted = [(TF_DISTRIBUTED, "TensorFlow (TF_CONFIG)"), (MPI_ONLY, "MPI")]
    elif framework == "tensorflow":
        wanted = [(TORCH_DISTRIBUTED, "PyTorch (MASTER_ADDR, RANK, WORLD_SIZE)"),
                  (MPI_ONLY, "MPI")]
    elif framework == "mpi":
        wanted = [(TF_MULTI_WORKER, "TensorFlow (TF_CONFIG)")]
    for prefixes, needs in wanted:
        hit = _first(facts, prefixes)
        if hit is not None:
            return hit[0], needs, hit[1]
        name = _in(names, prefixes)
        if name is not None:
            return name, needs, 0
    return None


@check(codes.FOREIGN_DISTRIBUTION_STRATEGY)
def foreign_strategy(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in _steps(graph):
        framework = framework_of(node)
        if framework is None or facts is None:
            continue
        found = _foreign_strategy(framework, facts, names_used(facts)[0])
        if found is None:
            continue
        name, needs, line = found
        how = "uses" if line else "imports (through a local module)"
        fix = {"pytorch": "torch.distributed.init_process_group (DDP)",
               "tensorflow": "tf.distribute.MultiWorkerMirroredStrategy",
               "mpi": "Horovod or mpi4py over the MPI ranks"}[framework]
        yield Diagnostic.of(
            codes.FOREIGN_DISTRIBUTION_STRATEGY,
            f"step '{node.id}' declares a {_NAMES[framework]} distribution but its code {how} "
            f"{name!r}, which expects {'an' if needs == 'MPI' else 'a'} {needs} launch: "
            f"Azure ML's {_NAMES[framework]} launch does not provide it",
            hint=f"coordinate with {fix}, or declare the distribution the code is written for",
            **at_code(node, facts, line))


@check(codes.TF_WORKERS_INSTANCES_MISMATCH)
def tf_workers(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        dist = c.distribution
        if not isinstance(dist, TensorFlow) or dist.workers is None or \
                dist.parameter_servers or dist.workers == c.instances:
            continue  # parameter servers (TF1) are MP511's, and their placement their own
        if dist.workers < c.instances:
            effect = f"{c.instances - dist.workers} node(s) get no TensorFlow worker and sit idle"
            severity = Severity.ERROR
        else:
            effect = (f"{dist.workers - c.instances} worker(s) more than nodes, so workers share "
                      f"a node and its GPUs")
            severity = Severity.WARNING
        yield Diagnostic.of(
            codes.TF_WORKERS_INSTANCES_MISMATCH,
            f"step '{node.id}' declares {dist.workers} TensorFlow worker(s) on {c.instances} "
            f"instance(s): {effect}",
            hint=f"set TensorFlow(workers={c.instances}) (one worker per node, as Azure ML "
                 f"defaults worker_count to the instance count), or instances={dist.workers}",
            severity=severity, **at_step(node))


@check(codes.DISTRIBUTION_WITHOUT_COORDINATION)
def without_coordination(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in _steps(graph):
        c = node.component
        framework, dist = framework_of(node), c.distribution
        if framework is None or dist is None or dist.world_size(c.instances) < 2:
            continue
        if facts is None or facts.commands:
            continue  # the work runs in programs it starts, which are not read here
        names, complete = names_used(facts)
        if not complete or _in(names, COORDINATING) is not None or \
                any(v in facts.env_reads for v in _RANK_VARS):
            continue
        world = dist.world_size(c.instances)
        yield Diagnostic.of(
            codes.DISTRIBUTION_WITHOUT_COORDINATION,
            f"step '{node.id}' starts {world} {_NAMES[framework]} processes, but its code "
            f"(read from {facts.file} and the local modules it imports) uses no distributed "
            f"API and reads no rank: read statically, each process trains alone on all of its "
            f"data; the run's coordination record (MP522, MP523) settles it",
            hint="initialize the framework's process group (torch.distributed, "
                 "tf.distribute, Horovod) and divide the data by rank "
                 "(mlpipe.runtime.shard), or drop the distribution and run one process",
            **at_step(node))


#: The single-process, many-GPU wrapper (one process drives every GPU of its node).
DATA_PARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                 "torch.nn.parallel.data_parallel.DataParallel")


def _one_device(call) -> bool:
    """Whether the DataParallel call is given exactly one device (``device_ids=[local_rank]``):
    then each process drives only its own GPU."""
    if call is None:
        return False
    given = [k.value for k in call.keywords if k.arg == "device_ids"] or call.args[1:2]
    return bool(given) and isinstance(given[0], (ast.List, ast.Tuple)) and \
        len(given[0].elts) == 1


@check(codes.DATA_PARALLEL_IN_LAUNCHED_PROCESSES)
def data_parallel_in_processes(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in _steps(graph):
        c, framework = node.component, framework_of(node)
        if facts is None or c.distribution is None or framework not in ("pytorch", "mpi"):
            continue
        per_node = c.distribution.processes_per_instance()
        hit = facts.uses(*DATA_PARALLEL)
        if per_node < 2 or hit is None or not hit[1] or _one_device(call_at(facts, hit[1],
                                                                             hit[0])):
            continue
        yield Diagnostic.of(
            codes.DATA_PARALLEL_IN_LAUNCHED_PROCESSES,
            f"the code of step '{node.id}' wraps its model in {hit[0]!r}, but Azure ML starts "
            f"{per_node} processes on each node ({_NAMES[framework]} distribution, "
            f"{per_node} per node): each process replicates the model over every GPU it "
            f"sees, so the {per_node} processes contend for the same GPUs",
            hint="wrap the model in torch.nn.parallel.DistributedDataParallel(model, "
                 "device_ids=[local_rank]) in each process (DataParallel belongs to a job of "
                 "one process per node)", **at_code(node, facts, hit[1]))


@check(codes.COLLECTIVE_UNDER_RANK_GUARD)
def collective_under_rank_guard(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in _steps(graph):
        c = node.component
        if facts is None or c.distribution is None or c.distribution.world_size(
                c.instances) < 2:
            continue
        world = c.distribution.world_size(c.instances)
        for name, line, guard in rank_guarded_collectives(c)[:1]:
            yield Diagnostic.of(
                codes.COLLECTIVE_UNDER_RANK_GUARD,
                f"the code of step '{node.id}' calls the collective {name!r} only where "
                f"`{guard}` holds: of its {world} ranks, the others never call it, so those "
                f"that do wait in it until the process group times out",
                hint="call the collective on every rank, outside the condition, and keep only "
                     "the one rank's work (saving, logging) under it",
                **at_code(node, facts, line))


@check(codes.EVERY_RANK_DOWNLOADS)
def every_rank_download(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in _steps(graph):
        c = node.component
        if facts is None or c.distribution is None:
            continue
        per_node = c.distribution.processes_per_instance()
        world = c.distribution.world_size(c.instances)
        if per_node < 2:
            continue  # one process per node: each node downloads once, as staging should
        for what, line in every_rank_downloads(c)[:1]:
            yield Diagnostic.of(
                codes.EVERY_RANK_DOWNLOADS,
                f"the code of step '{node.id}' calls {what!r} on every rank, under no "
                f"condition on the rank: its {world} processes ({per_node} on each node) "
                f"download the same data at once, and those on one node write the same files",
                hint="download on one process per node (local rank 0), make every rank "
                     "wait for it (a barrier) before reading; or pass the data as an input of "
                     "the step", **at_code(node, facts, line))
