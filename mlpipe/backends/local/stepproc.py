"""Running one step in its own process and filing its outputs, off the scheduler's thread.

Writes the request, starts ``python -m mlpipe.runtime.step`` (a script component: its own
command, in a copy of its code folder; or either through the distributed launcher), waits,
reads the step record the runtime left (failure and its layer, output contracts, content
digests, metrics, what each rank read and wrote), and moves the outputs into the artifact
store only on success. A script component leaves no record: its outputs are validated and
hashed here. Never touches the evidence store: the scheduler records what this returns.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.backends.local.forkserver import forkable
from mlpipe.backends.local.reaper import Reaper
from mlpipe.contracts.base import output_file_name
from mlpipe.digests.snapshot import Snapshot, StatCache, snapshot
from mlpipe.runtime import record as step_record
from mlpipe.runtime import tracking
from mlpipe.runtime.metrics import STEP_DIR_ENV
from mlpipe.runtime.step import SCRATCH_ENV
from mlpipe.secret import ENV as SECRETS_ENV
from mlpipe.secret import Redactor
from mlpipe.spec import ComponentSpec, declared_topology

LOG_TAIL_LINES = 20


@dataclass(slots=True)
class StepJob:
    """Everything one step process needs; built by the scheduler."""

    node_id: str
    component: ComponentSpec
    inputs: dict[str, str]            # port -> path
    input_digests: dict[str, str]     # port -> content digest
    params: dict[str, Any]
    work: Path
    log: Path
    cwd: str
    sys_path: list[str]
    pipeline: str = "mlpipe"   # the MLflow experiment of its run, when MLflow is on
    run_id: str = ""
    bin_folder: str | None = None  # an isolated environment's bin/ (None: mlpipe's own)
    #: the parameters that are secrets: handed over in the environment, masked in its log
    secrets: frozenset[str] = frozenset()
    #: every secret value of the run (name -> value), masked in this step's log too
    masked: dict[str, str] = field(default_factory=dict)
    #: where each input is wired from (checks.diagnosis.wiring), for a failure's diagnosis
    wiring: tuple[Any, ...] = ()


@dataclass(slots=True)
class StepOutcome:
    """What happened: success, the filed outputs, metrics, and why it may not be cached."""

    ok: bool
    seconds: float
    outputs: dict[str, tuple[Snapshot, Path]] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None
    not_cached: str | None = None
    topology: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] | None = None
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class Processes:
    """The step processes now running, so an interrupted executor can stop them all.

    With a ``forkserver`` attached, a plain Python step is forked from it instead of starting
    a fresh interpreter (see :mod:`mlpipe.backends.local.forkserver`). Each step leads a
    process group of its own, watched by the reaper (:mod:`mlpipe.backends.local.reaper`):
    what a step leaves running when it ends is killed, and so is what any step started when
    the executor itself dies.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[Any] = set()
        self.stopping = False
        self.forkserver: Any = None
        self.reaper = Reaper()

    def run(self, argv: list[str], *, env: dict[str, str], cwd: str, log: Path,
            request: dict[str, Any] | None = None, request_file: Path | None = None) -> int:
        """Run one step process to its end with its output in ``log``; its exit status.

        Args:
            request: the step's request when the fork server may serve it; it is written to
                ``request_file`` (which ``argv`` names) only if a fresh interpreter must.
        """
        with open(log, "w") as out:
            proc = None
            if request is not None and self.forkserver is not None:
                proc = self.forkserver.spawn(request, env=env, cwd=cwd, log=str(log))
            if proc is None:
                if request is not None and request_file is not None:
                    request_file.write_text(json.dumps(request))
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                        cwd=cwd, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        self.add(proc)
        try:
            return proc.wait()
        finally:
            self.discard(proc)

    def add(self, proc: Any) -> None:
        if proc.pid is not None:
            self.reaper.watch(proc.pid)
        with self._lock:
            self._procs.add(proc)
            stopping = self.stopping
        if stopping:  # started while the run was being stopped
            _signal_group(proc.pid, signal.SIGTERM)

    def discard(self, proc: Any) -> None:
        with self._lock:
            self._procs.discard(proc)
        if proc.pid is not None:
            self.reaper.release(proc.pid)

    def stop_all(self) -> None:
        with self._lock:
            self.stopping = True
            procs = list(self._procs)
        for proc in procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        """Stop the fork server, if one was started (it stops any step it still runs)."""
        server, self.forkserver = self.forkserver, None
        if server is not None:
            server.close()
        self.reaper.close()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:  # a forked step that has not made its own session yet
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


RENDEZVOUS_TIMEOUT_ENV = "MLPIPE_RENDEZVOUS_TIMEOUT_S"
RENDEZVOUS_TIMEOUT_S = 120.0


def rendezvous_timeout(env: dict[str, str] | None = None) -> float:
    """Seconds every rank of a PyTorch step has to join its rendezvous before the launch fails
    (``MLPIPE_RENDEZVOUS_TIMEOUT_S``, default 120).

    Raises:
        UsageError: the variable is not a positive number.
    """
    from mlpipe.errors import UsageError

    raw = (os.environ if env is None else env).get(RENDEZVOUS_TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return RENDEZVOUS_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{RENDEZVOUS_TIMEOUT_ENV}={raw!r} is not a positive number of seconds",
                         hint=f"set it to e.g. {RENDEZVOUS_TIMEOUT_S:g}, or unset it")
    return value


def rank_logs(log: Path) -> Path:
    """The folder of a distributed step's per-rank logs (``rank-<R>.log``) beside its log."""
    return log.with_suffix(".ranks")


def _launch(job: StepJob, argv: list[str], env: dict[str, str], declared: dict[str, Any],
            cwd: str) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """Run a distributed step through the local launcher: (failure message or None, topology,
    what the launcher saw of a failure, for its diagnosis).

    The ranks' logs go to ``<step log>.ranks/rank-<R>.log`` and are appended to the step's log.
    """
    from mlpipe.backends.local.launcher import CoordinationFailed, launch
    from mlpipe.backends.local.launcher.accelerators import uses_cuda
    from mlpipe.errors import LaunchFailed, LaunchRefused, MlpipeError

    comp = job.component
    folder = rank_logs(job.log)
    topology: dict[str, Any] = {"declared": declared, "distributed": True}
    failed, failed_rank, seen = None, None, {}
    try:
        result = launch(argv, distribution=comp.distribution, instances=comp.instances, env=env,
                        cwd=cwd, log_dir=folder, timeout=None,
                        rendezvous_timeout=rendezvous_timeout(env),
                        cuda=uses_cuda(comp.distribution, comp.compute), step=job.node_id)
    except CoordinationFailed as exc:
        result = exc.result
        failed = f"step {job.node_id!r} did not coordinate: {exc.message}"
        seen = {"launch": "coordination", "coordination": [
            d.to_json() for d in result.coordination.findings]}
    except LaunchRefused as exc:  # nothing started: the launch layer says why, and the fix
        result = None
        failed = f"{exc.message}; {exc.hint}"
        seen = {"launch": "refused", "hint": exc.hint}
    except MlpipeError as exc:  # LaunchFailed, or a launch that cannot be made
        result = None
        failed = f"step {job.node_id!r} failed: {exc.message}"
        failed_rank = exc.rank if isinstance(exc, LaunchFailed) else None
        if isinstance(exc, LaunchFailed):
            seen = {"launch": exc.kind, "rank": exc.rank, "returncode": exc.returncode}
        else:
            seen = {"launch": "start", "not_started": True}
    if result is not None:
        topology["ran"] = result.topology()
        if result.coordination is not None:
            topology["coordination"] = result.coordination.to_dict()
    text = combined_rank_logs(folder, failed_rank)
    if result is None and failed is not None and not text:
        text = f"mlpipe: {failed}\n"  # no rank started: the log says why
    job.log.write_text(text)
    return failed, topology, seen


def combined_rank_logs(folder: Path, last: int | None = None) -> str:
    """The ranks' logs as one text: each rank that printed something under a
    ``--- rank-N.log ---`` header, in rank order with rank ``last`` (the one that failed) at
    the end, where a log's tail shows it; the ranks that printed nothing on one line."""
    logs: dict[int, str] = {}
    for path in folder.glob("rank-*.log"):
        number = path.stem.removeprefix("rank-")
        if number.isdigit():
            logs[int(number)] = path.read_text(errors="replace")
    order = sorted(logs, key=lambda r: (r == last, r))
    silent = [r for r in order if not logs[r].strip()]
    parts = []
    if silent:
        parts.append(f"(rank{'s' if len(silent) > 1 else ''} "
                     f"{', '.join(map(str, sorted(silent)))} printed nothing)\n")
    for r in order:
        if logs[r].strip():
            body = logs[r] if logs[r].endswith("\n") else logs[r] + "\n"
            parts.append(f"--- rank-{r}.log ---\n{body}")
    return "".join(parts)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def execute(job: StepJob, cas: ArtifactStore, cache: StatCache, procs: Processes
            ) -> StepOutcome:
    """Run ``job`` and file its outputs; never raises for a failure of the step itself.

    With ``MLFLOW_TRACKING_URI`` set, the step runs in an MLflow run of its own.
    """
    from mlpipe.backends.local import mlflowruns

    start = time.perf_counter()
    mlflow_run = mlflowruns.open_run(
        experiment=job.pipeline, name=job.node_id,
        tags=mlflowruns.step_tags(run_id=job.run_id, step=job.node_id,
                                  component=job.component)) if tracking.active() else None
    outcome = None
    try:
        outcome = _masked(job, _execute(job, cas, cache, procs, start, mlflow_run))
        return outcome
    finally:
        mlflowruns.close_run(mlflow_run, outcome is not None and outcome.ok)
        _clear(job.work)


def _masked(job: StepJob, outcome: StepOutcome) -> StepOutcome:
    """The run's secret values masked wherever the step wrote text for mlpipe to keep: its
    log, its ranks' logs, its failure message, the free text of its record (failure messages,
    the diagnosis; never a key, digest, path or time, which masking a short secret would
    garble) and its metrics' populations."""
    redact = Redactor({**job.masked, **{name: job.params[name] for name in job.secrets
                                        if isinstance(job.params.get(name), str)}})
    if not redact:
        return outcome
    redact.file(job.log)
    folder = rank_logs(job.log)
    if folder.is_dir():
        for path in folder.iterdir():
            redact.file(path)
    metrics = [{**m, "population": redact.text(m["population"])}
               if isinstance(m.get("population"), str) else m for m in outcome.metrics]
    return replace(outcome, message=None if outcome.message is None
                   else redact.text(outcome.message),
                   record=_masked_record(outcome.record, redact), metrics=metrics)


def _masked_record(record: dict[str, Any] | None, redact: Redactor) -> dict[str, Any] | None:
    if not isinstance(record, dict):
        return record

    def failure(part: Any) -> Any:
        if isinstance(part, dict) and isinstance(part.get("failure"), dict) \
                and isinstance(part["failure"].get("message"), str):
            return {**part, "failure": {**part["failure"],
                                        "message": redact.text(part["failure"]["message"])}}
        return part

    masked = {**record, "step": failure(record.get("step")),
              "ranks": [failure(r) for r in record.get("ranks") or []]}
    diagnosis = record.get("diagnosis")
    if isinstance(diagnosis, dict):
        masked["diagnosis"] = {
            **diagnosis, **{k: redact.text(diagnosis[k]) for k in ("message", "hint")
                            if isinstance(diagnosis.get(k), str)},
            "findings": [redact.text(f) if isinstance(f, str) else f
                         for f in diagnosis.get("findings") or []]}
    return masked


def _clear(work: Path) -> None:
    """Remove a step's scratch folder: a few direct removals in the usual case (the outputs
    have moved away), a full tree removal where the step left more."""
    try:
        with os.scandir(work) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    try:
                        os.rmdir(entry.path)
                    except OSError:
                        shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
        os.rmdir(work)
    except OSError:
        shutil.rmtree(work, ignore_errors=True)


def _execute(job: StepJob, cas: ArtifactStore, cache: StatCache, procs: Processes,
             start: float, mlflow_run: str | None = None) -> StepOutcome:
    comp = job.component
    step_dir = job.work / "step"
    step_dir.mkdir(parents=True)
    outputs: dict[str, str] = {}
    for port in comp.outputs:
        holder = job.work / f"out.{port.name}"  # moved into the artifact store whole
        holder.mkdir()
        # a file output is named so that its contract's own validator accepts it (table.csv)
        path = holder / output_file_name(port.contract, port.name)
        if port.kind is not AssetType.URI_FILE:
            path.mkdir()
        outputs[port.name] = str(path)
    env = dict(os.environ)
    if comp.environment is not None:
        env.update(dict(comp.environment.variables))
    env.update(dict(comp.environment_variables))
    env[STEP_DIR_ENV] = str(step_dir)
    env[SCRATCH_ENV] = str(job.work)
    if mlflow_run is not None:
        env[tracking.RUN_ENV] = mlflow_run
    env["MLPIPE_PARENT_PID"] = str(os.getpid())
    params = {k: v for k, v in job.params.items() if k not in job.secrets}
    given = {k: str(v) for k, v in job.params.items() if k in job.secrets and v is not None}
    if given:  # never in request.json, nor on a command line
        env[SECRETS_ENV] = json.dumps(given, ensure_ascii=False)
    cwd, code_note = job.cwd, None
    declared = declared_topology(comp)
    request, fork = None, False
    if comp.function is None and comp.command is not None:
        # A script component: its own command, run in a copy of its code folder.
        from mlpipe.backends.local import script

        try:
            command = script.render_command(comp.command, inputs=job.inputs, outputs=outputs,
                                            params=job.params)
            cwd = str(script.stage_code(comp, job.work / "code"))
        except script.ScriptError as exc:
            return _failed(job, time.perf_counter() - start, f"step {job.node_id!r} cannot "
                           f"start: {exc}", {}, None, not_started=True)
        if script.code_changed(comp):
            code_note = ("its code folder changed after the pipeline was loaded; its result "
                         "is not cached")
        # `python` in the command is the step's interpreter: its isolated environment's
        # (--isolate), else the one mlpipe runs on
        env["PATH"] = os.pathsep.join([job.bin_folder or os.path.dirname(sys.executable),
                                       env.get("PATH", "")])
        argv = ["bash", "-c", command]
    else:
        sys_path = job.sys_path if job.bin_folder is None else _own_code(job.sys_path)
        request = {"function": comp.function, "sys_path": sys_path, "inputs": job.inputs,
                   "outputs": outputs, "params": params, "digest": comp.digest}
        request_path = job.work / "request.json"
        fork = declared is None and forkable(comp) and job.bin_folder is None
        if not fork:  # a forked step gets its request in the fork server's message
            request_path.write_text(json.dumps(request))
        python = sys.executable if job.bin_folder is None else os.path.join(job.bin_folder,
                                                                             "python")
        argv = [python, "-m", "mlpipe.runtime.step", str(request_path)]
    if job.bin_folder is not None:  # an isolated environment (--isolate), as if activated
        env["PATH"] = os.pathsep.join([job.bin_folder, env.get("PATH", "")])
        env["VIRTUAL_ENV"] = os.path.dirname(job.bin_folder)
        env.pop("PYTHONHOME", None)
    job.log.parent.mkdir(parents=True, exist_ok=True)
    if procs.stopping:
        return StepOutcome(False, 0.0, message="the run was interrupted")
    if declared is not None:
        failed, topology, seen = _launch(job, argv, env, declared, cwd)
        returncode = 0
    else:
        failed, topology, seen = None, {"processes": 1, "distributed": False}, {}
        returncode = procs.run(argv, env=env, cwd=cwd, log=job.log,
                               request=request if fork else None,
                               request_file=job.work / "request.json")
    seconds = time.perf_counter() - start
    found = step_record.load_record(step_dir)
    stored = step_record.stored(found)
    problem = step_record.failure_message(job.node_id, found)
    if failed is not None or returncode != 0:
        if problem is None or (failed is not None and not _contract_layer(found)):
            problem = failed or _failure(job, returncode)
        if returncode != 0:
            seen = {"returncode": returncode, **seen}
        return _failed(job, seconds, problem, topology, stored, metrics=_metrics(found), **seen)
    if problem is not None:
        return _failed(job, seconds, problem, topology, stored, metrics=_metrics(found))
    step = (found or {}).get("step") or {}
    missing = [name for name, path in outputs.items() if not os.path.exists(path)]
    if missing:
        return _failed(job, seconds, f"step {job.node_id!r} finished without writing its "
                                     f"output{'s' if len(missing) > 1 else ''} "
                                     f"{', '.join(map(repr, missing))}", topology, stored,
                       missing_outputs=missing)
    for name, path in outputs.items():
        linked = materialize_links(name, path)
        if linked:
            return _failed(job, seconds, f"step {job.node_id!r}: {linked}", topology, stored,
                           rejected_output=(name, linked))
    if not step:  # no record (a script component): validate here
        rejected = _validate(comp, outputs)
        if rejected:
            return _failed(job, seconds, f"step {job.node_id!r}: {rejected[1]}", topology,
                           stored, rejected_output=rejected[:2], mismatch=rejected[2])
    snaps = {name: _recorded(step, name, path) or snapshot(path)
             for name, path in outputs.items()}
    not_cached = _inputs_changed(job, cache) or code_note
    filed = {name: (snap, cas.put(outputs[name], snap, alone=True))
             for name, snap in snaps.items()}
    files = {name: _files(step, name, snap) for name, snap in snaps.items()}
    return StepOutcome(True, time.perf_counter() - start, filed, _metrics(found),
                       not_cached=not_cached, topology=topology, record=stored,
                       files={k: v for k, v in files.items() if v is not None})


def _own_code(paths: list[str]) -> list[str]:
    """The import path a function step needs for the user's code, without mlpipe's own
    interpreter's library folders: an isolated step imports its packages from its own
    environment, never from the one mlpipe runs in."""
    prefixes = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix,
                                                        sys.exec_prefix)}
    return [p for p in paths
            if not any(os.path.realpath(p).startswith(x) for x in prefixes)
            and os.path.basename(p.rstrip(os.sep)) not in ("site-packages", "dist-packages")]


def materialize_links(port: str, path: str) -> str | None:
    """Store files, never links: a symbolic link in output ``path`` to a file of the same
    output is replaced by a copy of that file; what else is not a plain file or folder is a
    refusal. Returns why the output is refused, or None.

    A link out of the output (``etc -> /etc``) would make the artifact's digest cover files
    outside the store, which change or vanish under it; a FIFO or device is no content.
    """
    if os.path.islink(path):
        return (f"output {port!r} is a symbolic link (-> {os.readlink(path)}), not a file or "
                f"folder; write the content itself")
    if not os.path.isdir(path):
        return None
    root = os.path.realpath(path)
    stack = [path]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = os.path.relpath(entry.path, path)
                if entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    if not (target.startswith(root + os.sep) and os.path.isfile(target)):
                        where = "a folder" if os.path.isdir(target) else (
                            "outside the output" if not target.startswith(root + os.sep)
                            else "nothing")
                        return (f"output {port!r} holds a symbolic link {rel} -> "
                                f"{os.readlink(entry.path)}, which leads to {where}; mlpipe "
                                f"stores files, not links: copy the files into the output")
                    copy = f"{entry.path}.mlpipe-copy"
                    shutil.copyfile(target, copy)
                    os.replace(copy, entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    return (f"output {port!r} holds {rel}, which is not a file or folder (a "
                            f"named pipe, socket or device); write files only")
    return None


def _contract_layer(found: dict[str, Any] | None) -> bool:
    named = step_record.failure(found)
    return bool(named) and named.get("layer") in ("input-contract", "output-contract",
                                                  "output-completeness")


def _recorded(step: dict[str, Any], port: str, path: str) -> Snapshot | None:
    """The output's snapshot from the record's digest when the files are still those the
    runtime hashed (the same names, sizes and modification times); else None."""
    entry = (step.get("outputs") or {}).get(port) or {}
    digest, files = entry.get("digest"), entry.get("files")
    if not digest or files is None or entry.get("files_omitted"):
        return None
    try:
        if os.path.isdir(path):
            now = sorted((rel, st.st_size, st.st_mtime_ns) for rel, st in _stats(path))
            kind = "folder"
        else:
            st = os.stat(path)
            now = [(os.path.basename(path), st.st_size, st.st_mtime_ns)]
            kind = "file"
    except OSError:
        return None
    then = sorted((f["name"], f["size"], f.get("mtime_ns")) for f in files)
    if now != then:
        return None
    return Snapshot(digest, int(entry.get("size") or 0), int(entry.get("file_count") or 0), kind)


def _stats(root: str):
    stack = [("", root)]
    while stack:
        rel, folder = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if entry.is_dir():
                    stack.append((f"{rel}{entry.name}/", entry.path))
                elif entry.is_file():
                    yield rel + entry.name, entry.stat()


def _files(step: dict[str, Any], port: str, snap: Snapshot) -> list[dict[str, Any]] | None:
    """The per-file sha256/blake3 list of an output, when the record's digest is the one filed."""
    entry = (step.get("outputs") or {}).get(port) or {}
    if entry.get("digest") != snap.digest or entry.get("files_omitted"):
        return None
    return [{"name": f["name"], "size": f["size"], "sha256": f["sha256"], "blake3": f["blake3"]}
            for f in entry.get("files") or []]


def _failure(job: StepJob, returncode: int) -> str:
    what = (f"killed by signal {-returncode}" if returncode < 0
            else f"exit status {returncode}")
    return f"step {job.node_id!r} failed: {what}"


def _validate(comp: ComponentSpec, outputs: dict[str, str]) -> tuple[str, str, str | None] | None:
    """``(port, message, mismatch)`` of the first output that does not match its contract."""
    from mlpipe.contracts import validate
    from mlpipe.errors import MlpipeError

    for port in comp.outputs:
        if port.contract is None:
            continue
        try:
            validate(port.contract, outputs[port.name])
        except MlpipeError as exc:
            return (port.name, f"output {port.name!r} does not match its contract: "
                               f"{exc.message}", getattr(exc, "mismatch", None))
    return None


def _failed(job: StepJob, seconds: float, message: str, topology: dict[str, Any],
            stored: dict[str, Any] | None, *, metrics: list[dict[str, Any]] | None = None,
            **seen: Any) -> StepOutcome:
    """A failed step's outcome, its record carrying the diagnosis (the layer that failed, its
    code, the fix and the logs: docs/step-record.md)."""
    from mlpipe.checks.diagnosis import StepFailure, diagnose
    from mlpipe.contracts.metrics import MetricsReport

    folder = rank_logs(job.log)
    ranks = {}
    if folder.is_dir():
        ranks = {p.stem.removeprefix("rank-"): str(p)
                 for p in sorted(folder.glob("rank-*.log"))
                 if p.stem.removeprefix("rank-").isdigit()}
    reports = frozenset(port.name for port in job.component.outputs
                        if isinstance(port.contract, MetricsReport))
    found = diagnose(StepFailure(
        job.node_id, message, record=stored, metric_reports=reports,
        logs={"step": str(job.log), "ranks": ranks}, wiring=job.wiring, **seen))
    record = dict(stored) if stored is not None else {
        "format": step_record.FORMAT, "version": step_record.VERSION, "stored": True,
        "step": None, "ranks": []}
    record["diagnosis"] = found.to_json()
    return StepOutcome(False, seconds, message=message, topology=topology, record=record,
                       metrics=metrics or [])


def _inputs_changed(job: StepJob, cache: StatCache) -> str | None:
    changed = []
    for port, path in job.inputs.items():
        try:
            now = snapshot(path, cache).digest
        except OSError:
            now = "(gone)"
        if now != job.input_digests.get(port):
            changed.append(port)
    if not changed:
        return None
    return (f"input{'s' if len(changed) > 1 else ''} {', '.join(map(repr, changed))} changed "
            f"while the step ran; its result is not cached")


def _metrics(found: dict[str, Any] | None) -> list[dict[str, Any]]:
    rows = []
    for row in step_record.metrics(found):
        try:
            rows.append({"name": str(row["name"]), "value": float(row["value"]),
                         "scope": str(row["scope"]), "rank": row.get("rank"),
                         "population": row.get("population"),
                         "reduced_over": row.get("reduced_over")})
        except (ValueError, KeyError, TypeError):
            continue
    return rows
