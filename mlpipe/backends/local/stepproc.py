"""Running one step in its own process and filing its outputs, off the scheduler's thread.

Writes the request, starts ``python -m mlpipe.runtime.step`` (a script component: its own
command, in a copy of its code folder; or either through the distributed launcher), waits,
reads the step record the runtime left (failure and its layer, output contracts, content
digests, metrics, what each rank read and wrote), and moves the outputs into the artifact
store only on success. A script component leaves no record: its outputs are validated and
hashed here. Never touches the evidence store: the scheduler records what this returns.

The parts: ``stepjob`` (the job and its outcome), ``processes`` (starting and stopping step
processes), ``distlaunch`` (a distributed step through the launcher), ``steplogs``,
``stepmask`` (the run's secrets masked in what is kept) and ``filing`` (checking outputs
before they are filed).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.backends.local.distlaunch import launch_distributed
from mlpipe.backends.local.filing import (
    inputs_changed,
    materialize_links,
    metric_rows,
    output_files,
    recorded_snapshot,
    validate_outputs,
)
from mlpipe.backends.local.forkserver import forkable
from mlpipe.backends.local.processes import Processes
from mlpipe.backends.local.stepjob import StepJob, StepOutcome
from mlpipe.backends.local.steplogs import rank_logs
from mlpipe.backends.local.stepmask import masked
from mlpipe.contracts.base import output_file_name
from mlpipe.digests.snapshot import StatCache, snapshot
from mlpipe.runtime import record as step_record
from mlpipe.runtime import tracking
from mlpipe.runtime.metrics import STEP_DIR_ENV
from mlpipe.runtime.step import SCRATCH_ENV
from mlpipe.secret import ENV as SECRETS_ENV
from mlpipe.spec import declared_topology


@dataclass(slots=True)
class _Command:
    """How a step's process starts: its command line and folder, a function step's request
    when the fork server may serve it, and why its result is not cached (a script's code
    folder changed)."""

    argv: list[str]
    cwd: str
    request: dict[str, Any] | None = None
    code_note: str | None = None


@dataclass(slots=True)
class _Ran:
    """What a step's process left behind: its time, the topology it ran, the launcher's
    failure and what it saw of it, its exit status and its step record."""

    seconds: float
    topology: dict[str, Any]
    failed: str | None
    seen: dict[str, Any]
    returncode: int
    found: dict[str, Any] | None
    stored: dict[str, Any] | None


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
        outcome = masked(job, _execute(job, cas, cache, procs, start, mlflow_run))
        return outcome
    finally:
        mlflowruns.close_run(mlflow_run, outcome is not None and outcome.ok)
        _clear(job.work)


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
    outputs = _scratch(job)
    env = _environment(job, mlflow_run)
    declared = declared_topology(job.component)
    from mlpipe.backends.local import script

    try:
        command = _command(job, outputs, env, declared)
    except script.ScriptError as exc:
        return _failed(job, time.perf_counter() - start, f"step {job.node_id!r} cannot "
                       f"start: {exc}", {}, None, not_started=True)
    job.log.parent.mkdir(parents=True, exist_ok=True)
    if procs.stopping:
        return StepOutcome(False, 0.0, message="the run was interrupted")
    ran = _run(job, command, env, declared, procs, start)
    return _refused(job, ran, outputs) or _filed(job, cas, cache, start, outputs, ran,
                                                 command.code_note)


def _scratch(job: StepJob) -> dict[str, str]:
    """The step's record folder and an empty place for each output: port -> path."""
    (job.work / "step").mkdir(parents=True)
    outputs: dict[str, str] = {}
    for port in job.component.outputs:
        holder = job.work / f"out.{port.name}"  # moved into the artifact store whole
        holder.mkdir()
        # a file output is named so that its contract's own validator accepts it (table.csv)
        path = holder / output_file_name(port.contract, port.name)
        if port.kind is not AssetType.URI_FILE:
            path.mkdir()
        outputs[port.name] = str(path)
    return outputs


def _environment(job: StepJob, mlflow_run: str | None) -> dict[str, str]:
    """The step process's variables: mlpipe's own, the environment's and component's, the
    step's folders, its MLflow run, and its secrets (never in request.json, nor on a command
    line)."""
    comp = job.component
    env = dict(os.environ)
    if comp.environment is not None:
        env.update(dict(comp.environment.variables))
    env.update(dict(comp.environment_variables))
    env[STEP_DIR_ENV] = str(job.work / "step")
    env[SCRATCH_ENV] = str(job.work)
    if mlflow_run is not None:
        env[tracking.RUN_ENV] = mlflow_run
    env["MLPIPE_PARENT_PID"] = str(os.getpid())
    given = {k: str(v) for k, v in job.params.items() if k in job.secrets and v is not None}
    if given:
        env[SECRETS_ENV] = json.dumps(given, ensure_ascii=False)
    return env


def _command(job: StepJob, outputs: dict[str, str], env: dict[str, str],
             declared: dict[str, Any] | None) -> _Command:
    """How the step starts (``env`` gains what its interpreter needs on ``PATH``).

    Raises:
        ScriptError: a script component's command or code folder cannot be prepared.
    """
    comp = job.component
    if comp.function is None and comp.command is not None:
        command = _script_command(job, outputs, env)
    else:
        command = _function_command(job, outputs, declared)
    if job.bin_folder is not None:  # an isolated environment (--isolate), as if activated
        env["PATH"] = os.pathsep.join([job.bin_folder, env.get("PATH", "")])
        env["VIRTUAL_ENV"] = os.path.dirname(job.bin_folder)
        env.pop("PYTHONHOME", None)
    return command


def _script_command(job: StepJob, outputs: dict[str, str], env: dict[str, str]) -> _Command:
    """A script component: its own command, run in a copy of its code folder."""
    from mlpipe.backends.local import script

    comp = job.component
    assert comp.command is not None
    command = script.render_command(comp.command, inputs=job.inputs, outputs=outputs,
                                    params=job.params)
    cwd = str(script.stage_code(comp, job.work / "code"))
    code_note = None
    if script.code_changed(comp):
        code_note = ("its code folder changed after the pipeline was loaded; its result "
                     "is not cached")
    # `python` in the command is the step's interpreter: its isolated environment's
    # (--isolate), else the one mlpipe runs on
    env["PATH"] = os.pathsep.join([job.bin_folder or os.path.dirname(sys.executable),
                                   env.get("PATH", "")])
    return _Command(["bash", "-c", command], cwd, code_note=code_note)


def _function_command(job: StepJob, outputs: dict[str, str],
                      declared: dict[str, Any] | None) -> _Command:
    """A function step: ``python -m mlpipe.runtime.step request.json``, or a fork of the fork
    server (a plain, undistributed step on mlpipe's own interpreter), which gets its request
    in the server's message instead of the file."""
    comp = job.component
    sys_path = job.sys_path if job.bin_folder is None else _own_code(job.sys_path)
    params = {k: v for k, v in job.params.items() if k not in job.secrets}
    request = {"function": comp.function, "sys_path": sys_path, "inputs": job.inputs,
               "outputs": outputs, "params": params, "digest": comp.digest}
    request_path = job.work / "request.json"
    fork = declared is None and forkable(comp) and job.bin_folder is None
    if not fork:
        request_path.write_text(json.dumps(request))
    python = sys.executable if job.bin_folder is None else os.path.join(job.bin_folder,
                                                                         "python")
    return _Command([python, "-m", "mlpipe.runtime.step", str(request_path)], job.cwd,
                    request=request if fork else None)


def _run(job: StepJob, command: _Command, env: dict[str, str], declared: dict[str, Any] | None,
         procs: Processes, start: float) -> _Ran:
    """Run the step's process (or its ranks, through the launcher) to its end."""
    if declared is not None:
        failed, topology, seen = launch_distributed(job, command.argv, env, declared,
                                                    command.cwd)
        returncode = 0
    else:
        failed, topology, seen = None, {"processes": 1, "distributed": False}, {}
        returncode = procs.run(command.argv, env=env, cwd=command.cwd, log=job.log,
                               request=command.request, request_file=job.work / "request.json")
    seconds = time.perf_counter() - start
    found = step_record.load_record(job.work / "step")
    return _Ran(seconds, topology, failed, seen, returncode, found, step_record.stored(found))


def _refused(job: StepJob, ran: _Ran, outputs: dict[str, str]) -> StepOutcome | None:
    """The failed outcome of a step that failed, or whose outputs cannot be filed; None when
    they can."""
    problem = step_record.failure_message(job.node_id, ran.found)
    if ran.failed is not None or ran.returncode != 0:
        if problem is None or (ran.failed is not None and not _contract_layer(ran.found)):
            problem = ran.failed or _failure(job, ran.returncode)
        seen = {"returncode": ran.returncode, **ran.seen} if ran.returncode != 0 else ran.seen
        return _failed(job, ran.seconds, problem, ran.topology, ran.stored,
                       metrics=metric_rows(ran.found), **seen)
    if problem is not None:
        return _failed(job, ran.seconds, problem, ran.topology, ran.stored,
                       metrics=metric_rows(ran.found))
    missing = [name for name, path in outputs.items() if not os.path.exists(path)]
    if missing:
        return _failed(job, ran.seconds, f"step {job.node_id!r} finished without writing its "
                                         f"output{'s' if len(missing) > 1 else ''} "
                                         f"{', '.join(map(repr, missing))}", ran.topology,
                       ran.stored, missing_outputs=missing)
    for name, path in outputs.items():
        linked = materialize_links(name, path)
        if linked:
            return _failed(job, ran.seconds, f"step {job.node_id!r}: {linked}", ran.topology,
                           ran.stored, rejected_output=(name, linked))
    if not (ran.found or {}).get("step"):  # no record (a script component): validate here
        rejected = validate_outputs(job.component, outputs)
        if rejected:
            return _failed(job, ran.seconds, f"step {job.node_id!r}: {rejected[1]}",
                           ran.topology, ran.stored, rejected_output=rejected[:2],
                           mismatch=rejected[2])
    return None


def _filed(job: StepJob, cas: ArtifactStore, cache: StatCache, start: float,
           outputs: dict[str, str], ran: _Ran, code_note: str | None) -> StepOutcome:
    """The successful outcome: each output snapshotted (from the record where its files are
    unchanged) and moved into the artifact store."""
    step = (ran.found or {}).get("step") or {}
    snaps = {name: recorded_snapshot(step, name, path) or snapshot(path)
             for name, path in outputs.items()}
    not_cached = inputs_changed(job, cache) or code_note
    filed = {name: (snap, cas.put(outputs[name], snap, alone=True))
             for name, snap in snaps.items()}
    files = {name: output_files(step, name, snap) for name, snap in snaps.items()}
    return StepOutcome(True, time.perf_counter() - start, filed, metric_rows(ran.found),
                       not_cached=not_cached, topology=ran.topology, record=ran.stored,
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


def _contract_layer(found: dict[str, Any] | None) -> bool:
    named = step_record.failure(found)
    return bool(named) and named.get("layer") in ("input-contract", "output-contract",
                                                  "output-completeness")


def _failure(job: StepJob, returncode: int) -> str:
    what = (f"killed by signal {-returncode}" if returncode < 0
            else f"exit status {returncode}")
    return f"step {job.node_id!r} failed: {what}"


def _failed(job: StepJob, seconds: float, message: str, topology: dict[str, Any],
            stored: dict[str, Any] | None, *, metrics: list[dict[str, Any]] | None = None,
            **seen: Any) -> StepOutcome:
    """A failed step's outcome, its record carrying the diagnosis (the layer that failed, its
    code, the fix and the logs: docs/step-record.md)."""
    from mlpipe.contracts.metrics import MetricsReport
    from mlpipe.judgements.diagnosis import StepFailure, diagnose

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
