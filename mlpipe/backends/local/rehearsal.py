"""The differential rehearsal's runs: one distributed step, on the same inputs, parameters and
seed, launched here twice through the local launcher, at world size 1 and at its topology
scaled down (``mlpipe rehearse``). Each run leaves its step record and, from the rehearsal
probe (``mlpipe.runtime.rehearsal``), each rank's training facts; ``judgements/rehearsal.py``
judges the two. Runs and collects; judges nothing, records nothing in the evidence store.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import output_file_name
from mlpipe.errors import UsageError
from mlpipe.spec import ComponentSpec

#: The topology a rehearsal launches when none is given: 2 ranks on one node.
DEFAULT_SCALE = (1, 2)


@dataclass
class RehearsalRun:
    """One launch of the rehearsed step: its size, time, failure, record and probe facts."""

    instances: int
    processes_per_node: int
    seconds: float = 0.0
    failure: str | None = None
    record: dict[str, Any] | None = None
    probe: list[dict[str, Any]] = field(default_factory=list)
    coordination: list[dict[str, Any]] = field(default_factory=list)
    folder: str = ""

    @property
    def world_size(self) -> int:
        return self.instances * self.processes_per_node

    def facts(self) -> dict[str, Any]:
        """The run as the judge reads it (plain JSON)."""
        return {"world_size": self.world_size, "instances": self.instances,
                "processes_per_node": self.processes_per_node, "seconds": self.seconds,
                "failure": self.failure, "record": self.record, "probe": self.probe,
                "coordination": self.coordination, "folder": self.folder}


def scaled(comp: ComponentSpec, instances: int, per_node: int) -> ComponentSpec:
    """``comp`` launched as ``instances`` x ``per_node``.

    Raises:
        UsageError: a step that is not distributed, a size that is not positive, or a
            distribution without processes per node (TensorFlow).
    """
    dist = comp.distribution
    if dist is None and comp.instances == 1:
        raise UsageError(f"component {comp.name!r} is not distributed: there is no topology "
                         f"to rehearse against world size 1",
                         hint="rehearse a step that declares a distribution or instances")
    if instances < 1 or per_node < 1:
        raise UsageError(f"--scale {instances}x{per_node} is not a positive size",
                         hint="write it as NODESxPROCESSES, e.g. 1x2 or 2x2")
    if dist is not None and hasattr(dist, "processes_per_node"):
        dist = dataclasses.replace(dist, processes_per_node=per_node)
    elif per_node != 1:
        raise UsageError(f"component {comp.name!r} has no processes per node to rehearse "
                         f"({type(dist).__name__})",
                         hint="rehearse PyTorch or MPI steps; give --scale Nx1 otherwise")
    return dataclasses.replace(comp, instances=instances, distribution=dist)


def _outputs(comp: ComponentSpec, work: Path) -> dict[str, str]:
    outputs = {}
    for port in comp.outputs:
        holder = work / f"out.{port.name}"
        holder.mkdir(parents=True)
        path = holder / output_file_name(port.contract, port.name)
        if port.kind is not AssetType.URI_FILE:
            path.mkdir()
        outputs[port.name] = str(path)
    return outputs


def run_once(comp: ComponentSpec, *, inputs: dict[str, str], params: dict[str, Any],
             work: Path, cwd: str, sys_path: list[str], timeout: float | None,
             probe_ranks: bool = True) -> RehearsalRun:
    """Launch ``comp`` (already scaled) once in folder ``work``, with the rehearsal probe
    (``probe_ranks``; without it, the step's plain correctness run, as the executor starts it).
    """
    from mlpipe.backends.local.distlaunch import rendezvous_timeout
    from mlpipe.backends.local.launcher import launch
    from mlpipe.backends.local.launcher.accelerators import uses_cuda
    from mlpipe.errors import MlpipeError
    from mlpipe.runtime import record as step_record
    from mlpipe.runtime import rehearsal as probe
    from mlpipe.runtime.step import SCRATCH_ENV

    per_node = comp.distribution.processes_per_instance() if comp.distribution else 1
    run = RehearsalRun(comp.instances, per_node, folder=str(work))
    if work.exists():
        shutil.rmtree(work)
    (work / "step").mkdir(parents=True)
    request = {"function": comp.function, "sys_path": sys_path, "inputs": inputs,
               "outputs": _outputs(comp, work), "params": params, "digest": comp.digest}
    (work / "request.json").write_text(json.dumps(request))
    env = dict(os.environ)
    if comp.environment is not None:
        env.update(dict(comp.environment.variables))
    env.update(dict(comp.environment_variables))
    env.update({step_record.RECORD_DIR_ENV: str(work / "step"), SCRATCH_ENV: str(work),
                probe.DIR_ENV: str(work / "rehearsal")})
    entry = "mlpipe.runtime.rehearsal" if probe_ranks else "mlpipe.runtime.step"
    argv = [sys.executable, "-m", entry, str(work / "request.json")]
    start = time.perf_counter()
    try:
        result = launch(argv, distribution=comp.distribution, instances=comp.instances,
                        env=env, cwd=cwd, log_dir=work / "logs", timeout=timeout,
                        rendezvous_timeout=rendezvous_timeout(env), require_coordination=False,
                        cuda=uses_cuda(comp.distribution, comp.compute), step=comp.name)
        if result.coordination is not None:
            run.coordination = [d.to_json() for d in result.coordination.findings]
    except MlpipeError as exc:
        run.failure = exc.message
    run.seconds = time.perf_counter() - start
    run.record = step_record.load_record(work / "step")
    run.probe = probe.read(work / "rehearsal")
    return run


def rehearse(comp: ComponentSpec, *, inputs: dict[str, str], params: dict[str, Any],
             work: Path, cwd: str, sys_path: list[str],
             scale: tuple[int, int] = DEFAULT_SCALE, timeout: float | None = 600.0,
             together: bool = True) -> tuple[RehearsalRun, RehearsalRun]:
    """Run ``comp`` at world size 1 and at ``scale`` on the same inputs and parameters.

    Args:
        comp: the distributed step's component.
        inputs: input port -> local path.
        params: parameter -> value (the same seed for both runs).
        work: a folder for the two runs (``ws1/``, ``wsN/``; emptied first).
        cwd: the working directory of the ranks.
        sys_path: folders the step imports its code from.
        scale: ``(instances, processes_per_node)`` of the distributed run.
        timeout: seconds each run may take.
        together: start both runs at once (each is small; the wall time is the longer one).

    Returns:
        The run at world size 1 and the distributed run.

    Example:
        >>> one, many = rehearse(train_cnn.spec, inputs={...}, params={"epochs": 3},
        ...                      work=Path("build/rehearse"), cwd=".", sys_path=["."])
        >>> many.world_size
        2
    """
    if comp.function is None:
        raise UsageError(f"{comp.name!r} is a script component: the rehearsal runs a function "
                         f"step's body through mlpipe's step runtime",
                         hint="rehearse a step defined with @component on a Python function")
    single, spread = scaled(comp, 1, 1), scaled(comp, *scale)
    for port in comp.inputs:
        if port.name not in inputs and not port.optional:
            raise UsageError(f"input {port.name!r} of {comp.name!r} is not given",
                             hint=f"pass --input {port.name}=PATH")
    unknown = sorted(set(inputs) - {p.name for p in comp.inputs})
    if unknown:
        raise UsageError(f"{comp.name!r} has no input {unknown[0]!r}",
                         hint=f"its inputs: {', '.join(p.name for p in comp.inputs) or 'none'}")
    jobs = {"one": (single, work / "ws1"), "many": (spread, work / f"ws{scale[0] * scale[1]}")}
    done: dict[str, RehearsalRun] = {}

    def go(key: str) -> None:
        c, folder = jobs[key]
        done[key] = run_once(c, inputs=inputs, params=params, work=folder, cwd=cwd,
                             sys_path=sys_path, timeout=timeout)

    if together:
        threads = [threading.Thread(target=go, args=(k,)) for k in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for key in jobs:
            go(key)
    return done["one"], done["many"]
