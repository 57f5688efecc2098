"""The local launcher: starts a distributed step's processes on this machine the way Azure ML
starts them on a cluster (same variables, same topology), watches them as one group, and ends
the whole group when one worker fails or hangs.

It launches and watches processes only; it knows nothing of pipelines, the store or torch.
``layout`` plans the processes and their variables, ``group`` runs and watches them, ``mpi``
hands an MPI launch to mpirun; ``launch`` here puts the three together and checks coordination.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.backends.local.launcher.accelerators import (
    node_devices,
    refusal,
    refusal_hint,
    visible_gpus,
)
from mlpipe.backends.local.launcher.group import ProcessGroup, Worker
from mlpipe.backends.local.launcher.layout import (
    HOST,
    LAUNCH_VARS,
    Plan,
    base_env,
    free_port,
    plan,
    writers_json,
)
from mlpipe.backends.local.launcher.mpi import run_mpi
from mlpipe.distribution import Distribution
from mlpipe.errors import DistributedError, LaunchFailed, LaunchRefused, UsageError
from mlpipe.judgements.coordination import CoordinationReport, check_coordination
from mlpipe.judgements.ranktrace import trace_findings
from mlpipe.runtime.devices import BACKEND_VAR
from mlpipe.runtime.distributed import WRITERS_VAR


class CoordinationFailed(DistributedError):
    """Every process exited 0, but the records show the ranks did not coordinate."""

    def __init__(self, result: "LaunchResult") -> None:
        self.result = result
        report = result.coordination
        assert report is not None  # raised only for a coordination report that failed
        self.report = report
        super().__init__(
            report.failure_text(),
            hint="see the step's coordination records; a distributed step must divide its "
                 "data and have one writer per output")


@dataclass(frozen=True)
class LaunchResult:
    """A finished launch. ``topology()`` is what evidence records."""

    framework: str
    instances: int
    processes_per_node: int
    world_size: int
    workers: tuple[Worker, ...]
    master_port: int | None = None
    coordination: CoordinationReport | None = None
    env: dict[int, dict[str, str]] = field(default_factory=dict, repr=False)

    def topology(self) -> dict[str, Any]:
        return {"framework": self.framework, "instances": self.instances,
                "processes_per_node": self.processes_per_node, "world_size": self.world_size,
                "ranks": [{"rank": w.rank, "local_rank": w.local_rank, "node_rank": w.node_rank,
                           "role": w.role, "returncode": w.returncode, "joined": w.joined}
                          for w in self.workers]}


def launch(argv: Sequence[str], *, distribution: Distribution | None, instances: int = 1,
           env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
           log_dir: str | Path, timeout: float | None = None,
           rendezvous_timeout: float | None = 120.0,
           require_coordination: bool = True, cuda: bool = False,
           step: str = "step") -> LaunchResult:
    """Run ``argv`` as a distributed step on this machine, as Azure ML would on ``instances``
    nodes, and wait for the whole group.

    PyTorch (and no distribution): instances x processes_per_node processes, each with exactly
    MASTER_ADDR, MASTER_PORT (a free port), WORLD_SIZE, RANK, LOCAL_RANK, NODE_RANK and
    LOCAL_WORLD_SIZE, so unmodified ``init_process_group(init_method="env://")`` code runs.
    TensorFlow: one process per worker (and parameter server) with its TF_CONFIG. MPI: one
    ``mpirun -np N`` (OpenMPI) that sets the OMPI rank variables. Every process also gets
    ``MLPIPE_WRITERS`` (the declared writer policy, read by ``is_writer``) and, when declared,
    ``MLPIPE_BACKEND`` (read by ``mlpipe.runtime.backend()``). Inherited launch variables are
    removed first.

    Each worker runs in its own process group with its output in ``log_dir/rank-<R>.log``.
    The first worker to exit non-zero ends the group (SIGTERM, then SIGKILL after 3 s), and so
    does the step ``timeout`` or, for PyTorch, a rank that has not connected to the rendezvous
    store within ``rendezvous_timeout``. No process outlives the call.

    When ``env`` has ``MLPIPE_STEP_DIR``, the per-rank coordination records are checked after a
    clean exit (``result.coordination``).

    Args:
        argv: the command, e.g. ``[sys.executable, "-m", "mlpipe.runtime.step", "req.json"]``.
        distribution: the step's ``PyTorch``/``TensorFlow``/``Mpi``, or None.
        instances: the node count to emulate.
        env: the step's environment (``os.environ`` when None).
        cwd: the working directory.
        log_dir: where the per-rank logs go (created).
        timeout: seconds for the whole step; None waits for ever.
        rendezvous_timeout: seconds for every PyTorch rank to join the store (None: no limit;
            only enforced where ``/proc`` shows sockets).
        require_coordination: raise ``CoordinationFailed`` when the coordination check finds
            an error.
        cuda: each rank takes a GPU of its own (``accelerators.uses_cuda``): a launch of more
            ranks than this machine shows GPUs is refused before anything starts, and the
            emulated nodes of a multi-node launch get disjoint ``CUDA_VISIBLE_DEVICES``.
        step: the step's name, for messages.

    Returns:
        A ``LaunchResult``: the topology, each worker's exit status and log, the report.

    Raises:
        LaunchFailed: a worker failed, hung or never joined; names the rank and its log tail.
        CoordinationFailed: all exited 0 but the records show no coordination.
        LaunchRefused: a CUDA launch with more ranks than visible GPUs (nothing started).
        UsageError: the launch cannot be made (bad instances, no mpirun, a library as type).

    Example:
        >>> result = launch([sys.executable, "train.py"],
        ...                 distribution=PyTorch(processes_per_node=2),
        ...                 instances=2, env=None, cwd=".", log_dir="logs", timeout=600)
        >>> result.world_size
        4
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise UsageError(f"argv must be a non-empty list of strings, got {argv!r}")
    layout = plan(distribution, instances)
    base = base_env(env)
    base[WRITERS_VAR] = writers_json(distribution)
    if backend := getattr(distribution, "backend", None):
        base[BACKEND_VAR] = backend
    if cuda:
        _fit_gpus(layout, instances, base, step)
    logs = Path(log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    if layout.framework == "mpi":
        workers, envs = run_mpi(list(argv), layout, base, cwd, logs, timeout)
    else:
        workers, envs = _run_group(list(argv), layout, base, cwd, logs, timeout,
                                   rendezvous_timeout, step)
    report = None
    step_dir = base.get("MLPIPE_STEP_DIR")
    if step_dir and layout.world > 1:
        report = check_coordination(step_dir, world_size=layout.world,
                                    distribution=distribution)
    result = LaunchResult(layout.framework, instances, layout.ppn, layout.world, workers,
                          layout.master_port, report, envs)
    if require_coordination and report is not None and not report.ok:
        raise CoordinationFailed(result)
    return result


def _run_group(argv: list[str], layout: Plan, base: dict[str, str], cwd: str | Path | None,
               logs: Path, timeout: float | None, rendezvous_timeout: float | None,
               step: str) -> tuple[tuple[Worker, ...], dict[int, dict[str, str]]]:
    """Run the group; a failure carries what the ranks' traces show."""
    try:
        return ProcessGroup(argv, layout, base, cwd, logs).run(
            timeout, rendezvous_timeout if layout.framework == "pytorch" else None)
    except LaunchFailed as exc:
        raise _traced(exc, base.get("MLPIPE_STEP_DIR"), layout.world, step) from None


def _traced(exc: LaunchFailed, step_dir: str | None, world: int, step: str) -> LaunchFailed:
    """``exc`` with what the ranks' traces show (a collective only some ranks called, where
    each rank waited when the step hung), when the ranks left any."""
    findings = trace_findings(step_dir, world, step=step) if step_dir and world > 1 else []
    if not findings:
        return exc
    shown = "\n".join("  " + d.render().replace("\n", "\n  ") for d in findings)
    return LaunchFailed(f"{exc.reason}; the ranks' traces show:\n{shown}", rank=exc.rank,
                        returncode=exc.returncode, log_path=exc.log_path,
                        log_tail=exc.log_tail, hint=exc.hint, kind=exc.kind)


def _fit_gpus(layout: Plan, instances: int, base: dict[str, str], step: str) -> None:
    """Refuse a CUDA launch that does not fit this machine's GPUs; give each emulated node
    its own GPUs."""
    gpus = visible_gpus(base)
    nodes = instances if layout.framework != "tensorflow" else layout.world
    per_node = layout.ppn
    reason = refusal(step, nodes, per_node, gpus)
    if reason is not None:
        raise LaunchRefused(reason, hint=refusal_hint(step, nodes, per_node, gpus))
    devices = node_devices(nodes, per_node, gpus)
    for _, _, node, _, extra in layout.roles:
        if node in devices:
            extra["CUDA_VISIBLE_DEVICES"] = devices[node]


__all__ = ["HOST", "LAUNCH_VARS", "CoordinationFailed", "LaunchResult", "Plan", "Worker",
           "free_port", "launch", "plan"]
