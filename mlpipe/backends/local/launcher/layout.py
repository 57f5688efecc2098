"""The layout of a local launch: which processes start, with which rank, role and launch
variables, exactly as Azure ML sets them on a cluster. No side effects but choosing free ports.
"""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from mlpipe.distribution import Distribution, Mpi, NotAJobType, PyTorch, TensorFlow
from mlpipe.errors import UsageError
from mlpipe.runtime.devices import BACKEND_VAR
from mlpipe.runtime.distributed import WRITERS_VAR

#: Variables a launcher owns: inherited values are dropped so each worker sees only its own.
LAUNCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK",
               "LOCAL_WORLD_SIZE", "GROUP_RANK", "TF_CONFIG", WRITERS_VAR, BACKEND_VAR)
_LAUNCH_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "TORCHELASTIC_")
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def base_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` (``os.environ`` when None) without any inherited launch variable."""
    base = dict(os.environ if env is None else env)
    return {k: v for k, v in base.items()
            if k not in LAUNCH_VARS and not k.startswith(_LAUNCH_PREFIXES)}


def writers_json(distribution: Distribution | None) -> str:
    """The declared writer policy as ``MLPIPE_WRITERS`` carries it (rank 0 by default)."""
    return json.dumps(dict(getattr(distribution, "writers", ())) or {"*": "rank0"})


@dataclass
class Plan:
    """The processes of one launch: ``roles`` holds (rank, local rank, node rank, role, the
    launch variables of that process)."""

    framework: str
    ppn: int
    world: int
    roles: list[tuple[int, int, int, str, dict[str, str]]]   # rank, local, node, role, vars
    master_port: int | None = None


def plan(distribution: Distribution | None, instances: int) -> Plan:
    """The processes a launch starts and the variables each one gets (no side effects but
    choosing free ports).

    Example:
        >>> [r[4]["RANK"] for r in plan(PyTorch(processes_per_node=2), 2).roles]
        ['0', '1', '2', '3']
    """
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        raise UsageError(f"instances={instances!r}; the node count is an int >= 1")
    if isinstance(distribution, NotAJobType):
        raise UsageError(f"distribution type {distribution.requested!r} cannot be launched; it "
                         f"is a library, not a distribution type",
                         hint="declare PyTorch(processes_per_node=N) and use the library inside "
                              "the script")
    if distribution is None or isinstance(distribution, PyTorch):
        # No distribution: Azure ML's command runs once; the other instances sit idle (MP512).
        ppn = distribution.processes_per_instance() if distribution else 1
        nodes = instances if distribution else 1
        world, port = nodes * ppn, free_port()
        roles = []
        for r in range(world):
            roles.append((r, r % ppn, r // ppn, "worker", {
                "MASTER_ADDR": HOST, "MASTER_PORT": str(port), "WORLD_SIZE": str(world),
                "RANK": str(r), "LOCAL_RANK": str(r % ppn), "NODE_RANK": str(r // ppn),
                "LOCAL_WORLD_SIZE": str(ppn)}))
        return Plan("pytorch" if distribution else "none", ppn, world, roles, port)
    if isinstance(distribution, TensorFlow):
        workers = distribution.world_size(instances)
        ps = distribution.parameter_servers
        cluster: dict[str, list[str]] = {
            "worker": [f"{HOST}:{free_port()}" for _ in range(workers)]}
        if ps:
            cluster["ps"] = [f"{HOST}:{free_port()}" for _ in range(ps)]
        roles = []
        for i in range(workers):
            roles.append((i, 0, i, "worker", {"TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": i}})}))
        for i in range(ps):
            roles.append((workers + i, 0, workers + i, "ps", {"TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": "ps", "index": i}})}))
        return Plan("tensorflow", 1, workers, roles)
    if isinstance(distribution, Mpi):
        ppn = distribution.processes_per_instance()
        world = instances * ppn
        return Plan("mpi", ppn, world, [(r, r % ppn, r // ppn, "worker", {})
                                         for r in range(world)])
    raise UsageError(f"cannot launch distribution {distribution!r}")
