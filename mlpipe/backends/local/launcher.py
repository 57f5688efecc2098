"""The local launcher: starts a distributed step's processes on this machine the way Azure ML
starts them on a cluster (same variables, same topology), watches them as one group, and ends
the whole group when one worker fails or hangs.

It launches and watches processes only; it knows nothing of pipelines, the store or torch.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from mlpipe.backends.local.coordination import CoordinationReport, check_coordination
from mlpipe.distribution import Distribution, Mpi, NotAJobType, PyTorch, TensorFlow
from mlpipe.errors import DistributedError, LaunchFailed, UsageError
from mlpipe.runtime.devices import BACKEND_VAR
from mlpipe.runtime.distributed import WRITERS_VAR

#: Variables a launcher owns: inherited values are dropped so each worker sees only its own.
LAUNCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK",
               "LOCAL_WORLD_SIZE", "GROUP_RANK", "TF_CONFIG", WRITERS_VAR, BACKEND_VAR)
_LAUNCH_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "TORCHELASTIC_")
HOST = "127.0.0.1"
POLL_S = 0.05
GRACE_S = 3.0
TAIL_LINES = 20


class CoordinationFailed(DistributedError):
    """Every process exited 0, but the records show the ranks did not coordinate."""

    def __init__(self, result: "LaunchResult") -> None:
        self.result = result
        report = result.coordination
        lines = [d.render() for d in report.findings if d.severity.value == "error"]
        super().__init__(
            f"the {result.world_size} processes finished, but the coordination check failed:\n"
            + "\n".join("  " + line.replace("\n", "\n  ") for line in lines),
            hint="see the step's coordination records; a distributed step must divide its "
                 "data and have one writer per output")


@dataclass(frozen=True)
class Worker:
    """One launched process: its place in the topology and how it ended."""

    rank: int
    local_rank: int
    node_rank: int
    role: str
    pid: int
    log: Path
    returncode: int | None
    joined: bool | None = None


@dataclass(frozen=True)
class LaunchResult:
    """A finished launch. ``topology()`` is what evidence records."""

    framework: str
    instances: int
    processes_per_node: int
    world_size: int
    workers: tuple[Worker, ...]
    wall_s: float
    master_port: int | None = None
    coordination: CoordinationReport | None = None
    env: dict[int, dict[str, str]] = field(default_factory=dict, repr=False)

    def topology(self) -> dict[str, Any]:
        return {"framework": self.framework, "instances": self.instances,
                "processes_per_node": self.processes_per_node, "world_size": self.world_size,
                "ranks": [{"rank": w.rank, "local_rank": w.local_rank, "node_rank": w.node_rank,
                           "role": w.role, "returncode": w.returncode, "joined": w.joined}
                          for w in self.workers]}


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _base_env(env: Mapping[str, str] | None) -> dict[str, str]:
    base = dict(os.environ if env is None else env)
    return {k: v for k, v in base.items()
            if k not in LAUNCH_VARS and not k.startswith(_LAUNCH_PREFIXES)}


def _writers_json(distribution: Distribution | None) -> str:
    return json.dumps(dict(getattr(distribution, "writers", ())) or {"*": "rank0"})


@dataclass
class _Plan:
    framework: str
    ppn: int
    world: int
    roles: list[tuple[int, int, int, str, dict[str, str]]]   # rank, local, node, role, vars
    master_port: int | None = None


def plan(distribution: Distribution | None, instances: int) -> _Plan:
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
        return _Plan("pytorch" if distribution else "none", ppn, world, roles, port)
    if isinstance(distribution, TensorFlow):
        workers = distribution.world_size(instances)
        ps = distribution.parameter_servers
        cluster: dict[str, list[str]] = {"worker": [f"{HOST}:{free_port()}" for _ in range(workers)]}
        if ps:
            cluster["ps"] = [f"{HOST}:{free_port()}" for _ in range(ps)]
        roles = []
        for i in range(workers):
            roles.append((i, 0, i, "worker", {"TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": i}})}))
        for i in range(ps):
            roles.append((workers + i, 0, workers + i, "ps", {"TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": "ps", "index": i}})}))
        return _Plan("tensorflow", 1, workers, roles)
    if isinstance(distribution, Mpi):
        ppn = distribution.processes_per_instance()
        world = instances * ppn
        return _Plan("mpi", ppn, world, [(r, r % ppn, r // ppn, "worker", {})
                                         for r in range(world)])
    raise UsageError(f"cannot launch distribution {distribution!r}")


def launch(argv: Sequence[str], *, distribution: Distribution | None, instances: int = 1,
           env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
           log_dir: str | Path, timeout: float | None = None,
           rendezvous_timeout: float | None = 120.0,
           require_coordination: bool = True) -> LaunchResult:
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

    Returns:
        A ``LaunchResult``: the topology, each worker's exit status and log, the report.

    Raises:
        LaunchFailed: a worker failed, hung or never joined; names the rank and its log tail.
        CoordinationFailed: all exited 0 but the records show no coordination.
        UsageError: the launch cannot be made (bad instances, no mpirun, a library as type).

    Example:
        >>> result = launch([sys.executable, "train.py"], distribution=PyTorch(processes_per_node=2),
        ...                 instances=2, env=None, cwd=".", log_dir="logs", timeout=600)
        >>> result.world_size
        4
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise UsageError(f"argv must be a non-empty list of strings, got {argv!r}")
    layout = plan(distribution, instances)
    logs = Path(log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    base = _base_env(env)
    base[WRITERS_VAR] = _writers_json(distribution)
    if getattr(distribution, "backend", None):
        base[BACKEND_VAR] = distribution.backend
    if layout.framework == "mpi":
        workers, envs, wall = _run_mpi(list(argv), layout, base, cwd, logs, timeout)
    else:
        workers, envs, wall = _Group(list(argv), layout, base, cwd, logs).run(
            timeout, rendezvous_timeout if layout.framework == "pytorch" else None)
    report = None
    step_dir = base.get("MLPIPE_STEP_DIR")
    if step_dir and layout.world > 1:
        report = check_coordination(step_dir, world_size=layout.world,
                                    distribution=distribution)
    result = LaunchResult(layout.framework, instances, layout.ppn, layout.world, workers, wall,
                          layout.master_port, report, envs)
    if require_coordination and report is not None and not report.ok:
        raise CoordinationFailed(result)
    return result


def _tail(path: Path, n: int = TAIL_LINES) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


class _Group:
    """The processes of one launch, watched together."""

    def __init__(self, argv: list[str], layout: _Plan, base: dict[str, str],
                 cwd: str | Path | None, logs: Path) -> None:
        self.argv, self.layout, self.base, self.cwd, self.logs = argv, layout, base, cwd, logs
        self.procs: list[subprocess.Popen] = []
        self.exits: dict[int, float] = {}
        self.lock = threading.Lock()
        self.joined: dict[int, bool] = {}

    def _start(self) -> dict[int, dict[str, str]]:
        envs = {}
        for index, (rank, _, _, role, extra) in enumerate(self.layout.roles):
            env = {**self.base, **extra}
            envs[rank] = extra
            with open(self.logs / f"rank-{rank}.log", "wb") as log:
                try:
                    proc = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
                except OSError as exc:
                    raise LaunchFailed(f"rank {rank} could not start {self.argv[0]!r}: {exc}",
                                       rank=rank, hint="check the command and working "
                                                       "directory") from exc
            self.procs.append(proc)
            threading.Thread(target=self._wait, args=(index, proc), daemon=True).start()
        return envs

    def _wait(self, index: int, proc: subprocess.Popen) -> None:
        proc.wait()
        with self.lock:
            self.exits[index] = time.monotonic()

    def run(self, timeout: float | None, rendezvous_timeout: float | None):
        started = time.monotonic()
        try:
            envs = self._start()
            failure = self._watch(started, timeout, rendezvous_timeout)
        except BaseException:
            self._stop()
            raise
        self._stop()
        wall = time.monotonic() - started
        workers = tuple(
            Worker(rank, local, node, role, p.pid, self.logs / f"rank-{rank}.log",
                   p.returncode, self.joined.get(rank) if self.layout.framework == "pytorch"
                   else None)
            for (rank, local, node, role, _), p in zip(self.layout.roles, self.procs))
        if failure is not None:
            raise failure
        return workers, envs, wall

    def _watch(self, started: float, timeout: float | None,
               rendezvous_timeout: float | None) -> LaunchFailed | None:
        roles = self.layout.roles
        workers = [i for i, r in enumerate(roles) if r[3] == "worker"]
        port = self.layout.master_port if self.layout.framework == "pytorch" else None
        rendezvous_done = port is None or self.layout.world == 1
        last_probe = 0.0
        while True:
            now = time.monotonic()
            with self.lock:
                exits = sorted(self.exits.items(), key=lambda kv: kv[1])
            for index, _ in exits:
                code = self.procs[index].returncode
                if code != 0 and not (roles[index][3] == "ps" and code is not None and
                                      all(self.procs[i].returncode == 0 for i in workers)):
                    rank = roles[index][0]
                    return self._failure(
                        f"rank {rank} of {self.layout.world} exited with code {code} after "
                        f"{now - started:.1f} s; the other processes were stopped", rank, code,
                        "the rank's log above shows why it failed")
            if all(self.procs[i].returncode == 0 for i in workers):
                return None
            if not rendezvous_done and now - last_probe > 0.2:
                last_probe = now
                rendezvous_done = self._probe_rendezvous(port)
            elapsed = now - started
            if not rendezvous_done and rendezvous_timeout is not None and \
                    elapsed > rendezvous_timeout:
                waiting = [roles[i][0] for i in workers
                           if not self.joined.get(roles[i][0]) and self.procs[i].returncode is None]
                if waiting:
                    return self._failure(
                        f"rank {waiting[0]} of {self.layout.world} did not join the rendezvous at "
                        f"{HOST}:{port} within {rendezvous_timeout:g} s (not joined: ranks "
                        f"{', '.join(map(str, waiting))}); the group was stopped", waiting[0],
                        None, "the script must call torch.distributed.init_process_group("
                              "init_method='env://') early; raise rendezvous_timeout if start-up "
                              "is slow")
            if timeout is not None and elapsed > timeout:
                running = [roles[i][0] for i in workers if self.procs[i].returncode is None]
                return self._failure(
                    f"the step exceeded its timeout of {timeout:g} s; ranks still running: "
                    f"{', '.join(map(str, running))} (rank {running[0]} shown); the group was "
                    f"stopped", running[0], None,
                    "a rank that hangs blocks its peers in the next collective; look for the "
                    "rank whose log stops earliest, or raise the timeout")
            time.sleep(POLL_S)

    def _failure(self, reason: str, rank: int, code: int | None, hint: str) -> LaunchFailed:
        self._stop()
        log = self.logs / f"rank-{rank}.log"
        return LaunchFailed(reason, rank=rank, returncode=code, log_path=str(log),
                            log_tail=_tail(log), hint=hint)

    def _probe_rendezvous(self, port: int) -> bool:
        """True when every running PyTorch rank holds a connection to the store at ``port``."""
        clients = _client_socket_inodes(port)
        if clients is None:
            return True   # no /proc: the step timeout is the only limit
        for (rank, *_), proc in zip(self.layout.roles, self.procs):
            if self.joined.get(rank):
                continue
            if proc.returncode == 0:
                continue
            self.joined[rank] = bool(_socket_inodes(proc.pid) & clients)
        return all(self.joined.get(r[0]) or p.returncode == 0
                   for r, p in zip(self.layout.roles, self.procs))

    def _stop(self) -> None:
        alive = [p for p in self.procs if p.poll() is None]
        for p in alive:
            _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for p in alive:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:
            # the leader may be gone while children it started still run in its group
            _signal_group(p.pid, signal.SIGKILL)
        for p in alive:
            p.wait()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _client_socket_inodes(port: int) -> set[str] | None:
    """Inodes of established TCP sockets whose remote end is ``port`` (None without /proc)."""
    found: set[str] = set()
    seen_table = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        seen_table = True
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "01" and int(parts[2].rsplit(":", 1)[1], 16) == port:
                found.add(parts[9])
    return found if seen_table else None


def _socket_inodes(pid: int) -> set[str]:
    """Socket inodes held by ``pid`` and the processes of its group."""
    inodes: set[str] = set()
    for member in _group_members(pid):
        try:
            for fd in os.listdir(f"/proc/{member}/fd"):
                try:
                    target = os.readlink(f"/proc/{member}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def _group_members(pgid: int) -> list[int]:
    members = [pgid]
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit() or int(entry) == pgid:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            members.append(int(entry))
    return members


# --- MPI -----------------------------------------------------------------------------------

_MPI_TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:")


def _run_mpi(argv: list[str], layout: _Plan, base: dict[str, str], cwd: str | Path | None,
             logs: Path, timeout: float | None):
    mpirun = shutil.which("mpirun", path=base.get("PATH"))
    if mpirun is None:
        raise UsageError(
            "an Mpi distribution is launched with mpirun, and no mpirun is on PATH",
            hint="install OpenMPI (Debian: apt-get install openmpi-bin), or run the step with "
                 "PyTorch(...) locally")
    cmd = [mpirun, "-np", str(layout.world), "--oversubscribe", "--tag-output"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for key in sorted(base):
        if key.startswith("MLPIPE_") or key == "PYTHONPATH":
            cmd += ["-x", key]
    cmd += argv
    log = logs / "mpirun.log"
    started = time.monotonic()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=base, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout)
        failure = None
    except subprocess.TimeoutExpired:
        code, failure = None, f"the MPI step exceeded its timeout of {timeout:g} s"
    except BaseException:
        _stop_one(proc)
        raise
    _stop_one(proc)
    wall = time.monotonic() - started
    text = log.read_text(errors="replace")
    # split the tagged output ("[1,RANK]<stdout>:line") into one log per rank
    per_rank: dict[int, list[str]] = {r: [] for r in range(layout.world)}
    for line in text.splitlines():
        m = _MPI_TAG.match(line)
        if m and int(m.group(1)) in per_rank:
            per_rank[int(m.group(1))].append(_MPI_TAG.sub("", line))
    for rank, lines in per_rank.items():
        (logs / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    if failure is None and code != 0:
        m = re.search(r"Process name: \[\[\d+,\d+\],(\d+)\]", text)
        m2 = re.search(r"Exit code:\s*(-?\d+)", text)
        rank = int(m.group(1)) if m else None
        failure = (f"rank {rank if rank is not None else '?'} of {layout.world} exited with code "
                   f"{m2.group(1) if m2 else code}; mpirun stopped the job")
    if failure is not None:
        rank = rank if code is not None and failure.startswith("rank") else None
        path = logs / (f"rank-{rank}.log" if rank is not None else "mpirun.log")
        raise LaunchFailed(failure, rank=rank, returncode=code, log_path=str(path),
                           log_tail=_tail(path), hint="see the rank's log")
    workers = tuple(Worker(r, lr, nr, "worker", proc.pid, logs / f"rank-{r}.log", code)
                    for r, lr, nr, _, _ in layout.roles)
    return workers, {}, wall


def _stop_one(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
