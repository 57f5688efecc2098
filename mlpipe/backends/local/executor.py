"""The local executor: runs a compiled pipeline here, reusing steps by content, recording all.

Schedules steps (in parallel up to ``max_parallel``) and writes every fact to the evidence
store as it happens. Whether a step is reused is ``reuse``'s decision; running a step's process
and filing its outputs is ``stepproc``'s job; hashing is ``mlpipe.digests.snapshot``'s.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mlpipe.backends.local import forkserver, isolation, reuse
from mlpipe.backends.local import inputs as inputs_mod
from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.backends.local.distlaunch import rendezvous_timeout
from mlpipe.backends.local.processes import Processes
from mlpipe.backends.local.progress import Progress
from mlpipe.backends.local.stepjob import StepJob, StepOutcome
from mlpipe.backends.local.steplogs import tail
from mlpipe.backends.local.stepproc import execute
from mlpipe.checks import run_checks
from mlpipe.checks.diagnosis import wiring
from mlpipe.checks.reads import check_reads
from mlpipe.diagnostics import ChecksFailed, Diagnostic, has_errors
from mlpipe.digests.snapshot import StatCache, snapshot
from mlpipe.environments import environment_identity
from mlpipe.errors import StepFailed, UsageError
from mlpipe.evidence import ignores
from mlpipe.evidence import models as m
from mlpipe.evidence.checkresults import record_checks, summary
from mlpipe.evidence.config import StoreConfig, locate, project_root
from mlpipe.evidence.queries import running_run_ids
from mlpipe.evidence.revision import file_states, git_revision, pipeline_files
from mlpipe.evidence.roots import ArtifactRoots, input_key, shared_root
from mlpipe.evidence.store import Store, new_id
from mlpipe.graph import FromInput, FromLiteral, FromStep, Graph, StepNode
from mlpipe.paths import display_path
from mlpipe.secret import Redactor, keyed_hash
from mlpipe.spec import ComponentSpec, ParamType, declared_topology


@dataclass(slots=True)
class RunResult:
    """How a local run ended."""

    run_id: str
    status: str
    steps: dict[str, str] = field(default_factory=dict)      # step -> status
    step_runs: dict[str, str] = field(default_factory=dict)  # step -> step run id
    candidate_id: str | None = None
    failures: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Produced:
    artifact: m.Artifact
    path: str


class LocalExecutor:
    """Runs pipelines on this machine against one evidence store.

    Args:
        location: store URL and local folders (default: :func:`~mlpipe.evidence.locate`).
        max_parallel: steps at a time (default: the number of cores).
        reuse: False re-runs every step (``--no-reuse``).
        stream: where progress goes (stderr by default; None for silence).
        local_scale: step id -> ``(instances, processes_per_node)`` (or ``"fit"``: as many
            as this machine's GPUs, or cores, allow, at most as declared) to launch a distributed
            step smaller here than declared (``--local-scale``); recorded with the topology
            and in the cache key.
        fork_server: fork plain Python steps from a server that has imported their modules
            once (each still runs in its own process); default: on, on Linux, unless
            ``MLPIPE_FORKSERVER=0``. Off, every step starts a fresh interpreter.
        isolate: run each step in a virtual environment built from its declared environment's
            conda file (``--isolate``; built once per environment digest, under
            ``StoreConfig.environments``), not on mlpipe's own interpreter. Either way each
            executed step records the interpreter and package set that ran it.

    Example:
        >>> result = LocalExecutor().submit(graph, inputs={"raw": "data/raw"}, params={})
        >>> result.status
        'succeeded'
    """

    def __init__(self, location: StoreConfig | None = None, *, max_parallel: int | None = None,
                 reuse: bool = True, stream: TextIO | None = sys.stderr,
                 local_scale: dict[str, tuple[int, int] | str] | None = None,
                 fork_server: bool | None = None, isolate: bool = False) -> None:
        if max_parallel is not None and max_parallel < 1:
            raise UsageError(f"--max-parallel {max_parallel} is not a positive number",
                             hint="pass --max-parallel 1 or more")
        rendezvous_timeout()  # a bad MLPIPE_RENDEZVOUS_TIMEOUT_S is refused before a run
        self.location = location or locate()
        self.max_parallel = max_parallel or os.cpu_count() or 1
        self.reuse = reuse
        self.stream = stream
        self.local_scale = dict(local_scale or {})
        self.fork_server = forkserver.enabled() if fork_server is None else fork_server
        self.isolate = isolate
        #: the run the last submit recorded, once it is in the store (None before)
        self.run_id: str | None = None

    def submit(self, graph: Graph, *, inputs: dict[str, str], params: dict[str, Any],
               diagnostics: Sequence[Diagnostic] = (), ignore: Collection[str] = ()
               ) -> RunResult:
        """Check ``graph`` and run it with the given pipeline inputs and parameters.

        Every graph check runs here, whoever calls: a pipeline with a check error is refused
        before anything is recorded. What the checks report (warnings, info), with
        ``diagnostics``, is recorded with the run.

        Args:
            graph: the compiled pipeline.
            inputs: pipeline input -> local path.
            params: pipeline parameter -> value.
            diagnostics: problems found before the graph existed, e.g. while reading Azure ML
                YAML (MP6xx); the graph checks are not to be passed here.
            ignore: the codes the caller chose not to report (``--ignore``): neither refused
                on nor recorded, and listed in the run's options (``ignored_codes``) so its
                evidence says what was set aside.

        Raises:
            ChecksFailed: check errors (nothing is run or recorded).
            UsageError: bad inputs or parameters (nothing is recorded).
            ContractError: an input's data does not match a contract a step requires of it
                (nothing is recorded).
            StoreError: the evidence store cannot be opened or written.
            StepFailed: a step failed; everything recorded up to then stays recorded.
            EnvironmentBuildFailed: with ``isolate``, an environment could not be built
                (nothing is run or recorded).
        """
        self.run_id = None
        found = [d for d in [*diagnostics, *run_checks(graph)] if d.code not in ignore]
        if has_errors(found):
            raise ChecksFailed(found, "the pipeline has check errors; nothing was run",
                               hint=None)
        _refuse_azure_only(graph)
        pipeline_inputs, overrides = inputs_mod.split_step_inputs(inputs)
        paths, values = inputs_mod.resolve(graph.spec, pipeline_inputs, params)
        _refuse_oversized_secrets(graph, values)
        literals = inputs_mod.literal_paths(graph, overrides)
        inputs_mod.check_input_contracts(graph, paths)
        scaled = scaled_components(graph, self.local_scale)
        _refuse_files_in_place_of_folders(self.location)
        interpreters = isolation.plan(
            {sid: node.component for sid, node in graph.steps.items()}, isolate=self.isolate,
            root=self.location.environments, note=Progress(0, self.stream).note)
        first = ignores.first_run(self.location)
        store = Store.open(self.location.url)
        if first:  # the first run in this project: git must not commit the store
            ignores.ensure_ignored(self.location)
        cache = StatCache(self.location.stat_cache)
        try:
            run = _Run(self, graph, store, cache, paths, values)
            run.diagnostics, run.scaled = found, scaled
            run.literals, run.overrides = literals, sorted(overrides)
            run.interpreters = interpreters
            run.ignored = sorted(set(ignore))
            with run.cas.lock():  # `mlpipe gc` removes nothing while a run holds it
                _sweep_work(store, self.location.work)
                return run.go()
        finally:
            cache.close()
            store.close()


class _Run:
    """One run's state; lives on the scheduler thread only."""

    def __init__(self, ex: LocalExecutor, graph: Graph, store: Store, cache: StatCache,
                 paths: dict[str, str], values: dict[str, Any]) -> None:
        self.ex, self.graph, self.store, self.cache = ex, graph, store, cache
        self.stale: dict[str, str] = {}  # why a step's earlier run was passed over
        self.paths, self.values = paths, values
        self.cas = ArtifactStore(ex.location.artifacts, cache)
        self.roots = ArtifactRoots(ex.location.artifacts,
                                   shared_root(ex.location.shared_artifacts), cache)
        self.said_unreachable = False
        self.procs = Processes()
        self.progress = Progress(len(graph.steps), ex.stream)
        self.progress.width = max([12, *(len(s) for s in graph.steps)])
        self.produced: dict[str, dict[str, _Produced]] = {}
        self.inputs: dict[str, _Produced] = {}
        self.rows: dict[str, Any] = {}
        self.result: RunResult | None = None
        self.failed_log: dict[str, Path] = {}
        self.diagnoses: dict[str, dict[str, Any] | None] = {}
        self.diagnostics: list[Any] = []
        self.scaled: dict[str, Any] = {}
        self.ignored: list[str] = []
        self.literals: dict[tuple[str, str], str] = {}
        self.overrides: list[str] = []
        self.interpreters = isolation.Plan()
        self.outside: dict[str, str] = {}  # step -> how it ran outside its environment
        #: the pipeline parameters declared Param[Secret]: only their keyed hash is recorded
        self.secret_inputs = {i.name for i in graph.spec.inputs if i.secret}
        self._secret_key: bytes | None = None
        self.fork_tried = not ex.fork_server

    # --- setup ------------------------------------------------------------------------------

    def _input_artifact(self, path: str, kind: str) -> tuple[_Produced, Any]:
        try:
            snap = snapshot(path, self.cache)
        except OSError as exc:  # a file in it that cannot be read, a symlink cycle
            where = f" ({exc.filename})" if exc.filename and exc.filename != path else ""
            raise UsageError(f"input {path} cannot be read{where}: {exc.strerror}",
                             hint="make every file in it readable and remove links that "
                                  "lead back into it, or give another path") from None
        art = self.store.artifact(snap.digest, kind, snap.size, snap.file_count, path)
        return _Produced(art, path), snap

    def _start(self, run_id: str) -> str:
        spec = self.graph.spec
        snaps = {}
        for name, path in sorted(self.paths.items()):
            declared = spec.input(name)
            kind = declared.kind.value if declared and declared.kind else (
                "uri_folder" if os.path.isdir(path) else "uri_file")
            self.inputs[name], snap = self._input_artifact(path, kind)
            snaps[name] = self.store.snapshot(snap.digest, path, snap.size, snap.file_count,
                                              mutable=True)
            if self.roots.shared is not None:  # by content: every home verifies it
                problem = self.roots.publish(input_key(snap.digest), path)
                if problem:
                    self.progress.note(f"input {name!r}: {problem}; other homes cannot verify "
                                       f"it unless they hold the same bytes")
        pipeline = self.store.pipeline_spec(spec.digest, spec.name, spec.to_dict())
        commit, dirty = git_revision(str(project_root()))
        code = self.store.code_revision(commit, dirty) if commit else None
        loaded = file_states(str(project_root()), pipeline_files(spec)) if commit else None
        run_id = self.store.begin_run(
            pipeline=pipeline, target="local", params=self._recorded(self.values,
                                                                     self.secret_inputs),
            inputs=snaps, code=code,
            run_id=run_id,
            options={"reuse": self.ex.reuse, "max_parallel": self.ex.max_parallel,
                     **({"code_files": loaded} if loaded is not None else {}),
                     "executor": "local", "checks": summary(self.diagnostics),
                     **({"ignored_codes": self.ignored} if self.ignored else {}),
                     **({"input_overrides": self.overrides} if self.overrides else {}),
                     **({"isolate": True} if self.ex.isolate else {}),
                     **({"local_scale": {k: f"{c.instances}x{_per_node(c)}"
                                         for k, c in sorted(self.scaled.items())}}
                        if self.scaled else {})})
        self.ex.run_id = run_id
        record_checks(self.store, run_id, self.diagnostics)
        self.result = RunResult(run_id, m.RUNNING)
        self.progress.header(run_id, spec.name, self.ex.max_parallel)
        return run_id

    # --- the schedule -----------------------------------------------------------------------

    def go(self) -> RunResult:
        run_id = new_id("r", 5)
        # the server imports while the run is set up; unused (every step reused), it is
        # simply killed at the end
        self._start_fork_server(run_id)
        try:
            self._start(run_id)
        except BaseException:
            self.procs.close()
            raise
        result = self.result
        steps = self.graph.steps
        waiting = {sid: {p for p in self.graph.dag.predecessors(sid) if p in steps}
                   for sid in steps}
        order = {sid: i for i, sid in enumerate(steps)}
        running: dict[Future, tuple[str, str, StepJob]] = {}
        pool = ThreadPoolExecutor(self.ex.max_parallel, thread_name_prefix="mlpipe-step")
        try:
            while True:
                ready = sorted((sid for sid, deps in waiting.items() if not deps),
                               key=order.__getitem__)
                for sid in ready:
                    if len(running) >= self.ex.max_parallel:
                        break
                    del waiting[sid]
                    started = self._begin_step(steps[sid], run_id)
                    if started is None:
                        self._release(sid, waiting)
                    else:
                        step_run_id, job = started
                        running[pool.submit(self._execute, job)] = (sid, step_run_id, job)
                if not running:
                    if any(not deps for deps in waiting.values()):
                        continue
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    sid, step_run_id, job = running.pop(future)
                    if self._finish_step(sid, step_run_id, job, future.result()):
                        self._release(sid, waiting)
                    else:
                        self._skip_downstream(sid, run_id, waiting)
                self.cache.flush()
        except BaseException as exc:
            self.progress.close()
            self.procs.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                self.store.interrupt_run(run_id, "the executor was stopped (Ctrl-C or a "
                                                 "signal) before the run finished")
                result.status = m.INTERRUPTED
            else:
                self.store.interrupt_run(run_id, f"the executor failed: {exc}")
                self.store.finish_run(run_id, m.FAILED, f"the executor failed: {exc}")
                result.status = m.FAILED
            raise
        pool.shutdown(wait=True)
        self.progress.close()
        self.procs.close()
        if result.failures:
            result.status = m.FAILED
            self.store.finish_run(run_id, m.FAILED, "; ".join(result.failures))
            first = next(iter(self.failed_log.items()), None)
            hint = None
            if first is not None:
                step, log = first
                hint = (f"the last lines of {step}'s log:\n{_indent(tail(log))}\n"
                        f"  whole log: {log}")
                found = self.diagnoses.get(step)
                if found:  # where to start looking, before the log (docs/checks.md)
                    hint = (f"{found['hint']} ({found['code']} {found['name']}, at the "
                            f"layer of {found['layer_title']})\n  {hint}")
                outside = self.outside.get(step)
                if outside:
                    hint += f"\n  note: {step!r} {outside}"
            raise StepFailed(f"run {run_id} failed: {result.failures[0]}", hint=hint)
        result.candidate_id = self._register_candidate(run_id)
        result.status = m.SUCCEEDED
        self.store.finish_run(run_id, m.SUCCEEDED)
        return result

    def _execute(self, job: StepJob) -> StepOutcome:
        """Run a step (on a worker thread) and publish its outputs to the shared root."""
        outcome = execute(job, self.cas, self.cache, self.procs)
        if outcome.ok and self.roots.shared is not None:
            for _snap, location in outcome.outputs.values():
                problem = self.roots.publish(self.cas.key(location))
                if problem:
                    self.progress.note(f"{job.node_id!r}: {problem}; other homes re-run it")
        return outcome

    def _release(self, sid: str, waiting: dict[str, set[str]]) -> None:
        for deps in waiting.values():
            deps.discard(sid)

    def _skip_downstream(self, sid: str, run_id: str, waiting: dict[str, set[str]]) -> None:
        import networkx as nx
        skipped = {d for d in nx.descendants(self.graph.dag, sid) if d in waiting}
        for d in sorted(skipped):
            del waiting[d]
            node = self.graph.steps[d]
            self.store.add_step_run(
                run_id=run_id, step=d, component_version_id=self._component_row(node).id,
                environment_id=None, compute=_compute(node), topology={}, cache_key=None,
                key_material=None, status=m.SKIPPED, finished_at=None,
                message=f"not run: upstream step {sid!r} failed")
            self.result.steps[d] = m.SKIPPED
            self.progress.finished(d, m.SKIPPED, detail=f"(upstream {sid!r} failed)")

    # --- one step ---------------------------------------------------------------------------

    def _component_row(self, node: StepNode) -> m.ComponentVersion:
        comp = node.component
        row = self.rows.get(comp.digest)
        if row is None:
            row = self.store.component_version(comp.name, comp.version, comp.digest,
                                               comp.code_digest, comp.to_dict())
            if comp.command is None:  # a function component: its source, for diffs
                secrets = Redactor({name: self.values.get(name) for name in self.secret_inputs})
                self.store.source_text(comp.code_digest,
                                       comp.location.file if comp.location else None,
                                       comp.function, comp.location.line if comp.location
                                       else None, secrets.text if secrets else None)
            self.rows[comp.digest] = row
        return row

    def _environment_row(self, node: StepNode) -> m.EnvironmentRow:
        comp = node.component
        name, version, digest, mutable = environment_identity(
            comp.environment, comp.location.file if comp.location else None)
        key = ("env", name, version, digest)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = self.store.environment(name, version, digest, mutable)
        return row

    def _bound_inputs(self, node: StepNode) -> dict[str, _Produced]:
        bound: dict[str, _Produced] = {}
        for port in node.component.inputs:
            endpoint = node.bindings.get(port.name)
            if isinstance(endpoint, FromStep):
                bound[port.name] = self.produced[endpoint.node][endpoint.port]
            elif isinstance(endpoint, FromInput) and endpoint.name in self.inputs:
                bound[port.name] = self.inputs[endpoint.name]
            elif (node.id, port.name) in self.literals:  # checked before the run began
                path = self.literals[(node.id, port.name)]
                bound[port.name] = self._input_artifact(path, port.kind.value)[0]
        return bound

    def _params(self, node: StepNode) -> tuple[dict[str, Any], frozenset[str]]:
        """The step's parameter values, and which of them are secrets: declared
        Param[Secret], or fed by a pipeline parameter that is one."""
        values: dict[str, Any] = {}
        secrets: set[str] = set()
        for param in node.component.params:
            endpoint = node.bindings.get(param.name)
            if param.type is ParamType.SECRET:
                secrets.add(param.name)
            if isinstance(endpoint, FromLiteral):
                values[param.name] = endpoint.value
            elif isinstance(endpoint, FromInput) and endpoint.name in self.values:
                values[param.name] = self.values[endpoint.name]
                if endpoint.name in self.secret_inputs:
                    secrets.add(param.name)
            else:
                values[param.name] = param.default
        return values, frozenset(secrets)

    def _recorded(self, values: dict[str, Any], secrets: Collection[str]) -> dict[str, Any]:
        """``values`` as the store holds them: each secret as its keyed hash."""
        if not any(isinstance(values.get(name), str) for name in secrets):
            return values
        if self._secret_key is None:
            self._secret_key = self.store.secret_key()
        return {name: keyed_hash(self._secret_key, value)
                if name in secrets and isinstance(value, str) else value
                for name, value in values.items()}

    def _begin_step(self, node: StepNode, run_id: str) -> tuple[str, StepJob] | None:
        """Reuse the step (returning None) or record it running and return its job."""
        comp = node.component
        bound = self._bound_inputs(node)
        params, secrets = self._params(node)
        env_row = self._environment_row(node)
        decision = reuse.decide(
            self.store, self.roots, comp, environment_digest=env_row.digest,
            params=self._recorded(params, secrets),
            inputs={port: p.artifact.digest for port, p in bound.items()},
            local_scale=(declared_topology(self.scaled[node.id]) if node.id in self.scaled
                         else None), packages=self.interpreters.packages(node.id),
            enabled=self.ex.reuse, cache=self.cache)
        common = dict(run_id=run_id, step=node.id,
                      component_version_id=self._component_row(node).id,
                      environment_id=env_row.id, compute=_compute(node), cache_key=decision.key,
                      key_material=decision.material)
        shared = self.roots.shared
        if self.roots.unreachable is not None and shared is not None and not self.said_unreachable:
            self.said_unreachable = True
            self.progress.note(f"the shared artifact root {shared.name} did not "
                               f"answer ({self.roots.unreachable}); steps whose outputs are "
                               f"not here run again")
        original = decision.origin
        if original is not None:
            step_run_id = self.store.record_reused(
                **common, topology=original.topology, original_id=original.id,
                inputs={k: v.artifact for k, v in bound.items()}, outputs=decision.outputs)
            self.produced[node.id] = {port: _Produced(art, str(decision.paths[port]))
                                      for port, art in decision.outputs.items()}
            self.result.steps[node.id] = m.REUSED
            self.result.step_runs[node.id] = step_run_id
            self.progress.finished(node.id, m.REUSED,
                                   detail=f"from {original.id} (run {original.run_id})")
            return None
        if decision.stale is not None:
            self.stale[node.id] = decision.stale
            self.progress.note(f"{node.id!r} is not reused: {decision.stale}")
        topology = declared_topology(comp)
        if node.id in self.scaled:
            comp = self.scaled[node.id]
            self.progress.note(f"{node.id!r} is scaled down here (--local-scale): declared "
                               f"{topology['world_size']} process(es), launching "
                               f"{declared_topology(comp)['world_size']}")
        interpreter = self.interpreters.evidence(node.id, node.component)
        if interpreter["in_declared_environment"] is False:
            self.outside[node.id] = interpreter["note"]
        step_run_id = self.store.begin_step_run(
            **common, topology={"declared": topology} if topology else {}, status=m.RUNNING,
            message=decision.why_not,
            interpreter=interpreter,
            log_path=str(self.ex.location.logs / run_id / f"{node.id}.log"),
            inputs={k: v.artifact for k, v in bound.items()})
        self.result.step_runs[node.id] = step_run_id
        if topology is not None and node.id not in self.scaled:
            self.progress.note(f"{node.id!r} is launched as {topology['world_size']} "
                               f"process(es) the way Azure ML would")
        self.progress.started(node.id, self.ex.location.logs / run_id / f"{node.id}.log")
        job = StepJob(node.id, comp, {k: v.path for k, v in bound.items()},
                      {k: v.artifact.digest for k, v in bound.items()}, params,
                      self.ex.location.work / run_id / node.id.replace("/", "_"),
                      self.ex.location.logs / run_id / f"{node.id}.log",
                      os.getcwd(), [p for p in sys.path if p], pipeline=self.graph.spec.name,
                      run_id=run_id, bin_folder=self.interpreters.bin_folder(node.id),
                      secrets=secrets, masked={name: value for name in self.secret_inputs
                                               if isinstance(value := self.values.get(name),
                                                             str)},
                      wiring=wiring(self.graph, node.id))
        return step_run_id, job

    def _start_fork_server(self, run_id: str) -> None:
        """Start the run's fork server, once, on the scheduler thread (it dies with it)."""
        if self.fork_tried:
            return
        self.fork_tried = True
        forkable = [node.component for node in self.graph.steps.values()
                    if declared_topology(node.component) is None
                    and forkserver.forkable(node.component)
                    and node.id not in self.interpreters.isolated]
        if not forkable:
            return
        modules = sorted({module for comp in forkable
                          if (module := forkserver.module_of(comp))})
        try:
            self.procs.forkserver = forkserver.ForkServer(
                modules, sys_path=[p for p in sys.path if p], cwd=os.getcwd(),
                log=self.ex.location.logs / run_id / "forkserver.log")
        except OSError as exc:
            self.progress.note(f"steps start fresh interpreters: the fork server did not "
                               f"start ({exc})")

    def _finish_step(self, sid: str, step_run_id: str, job: StepJob,
                     outcome: StepOutcome) -> bool:
        topology = outcome.topology
        if sid in self.scaled:
            topology = {**topology, "declared": declared_topology(self.graph.steps[sid].component),
                        "local_scale": declared_topology(job.component)}
        if not outcome.ok:
            self.store.finish_step_run(step_run_id, status=m.FAILED, message=outcome.message,
                                       topology=topology, record=outcome.record)
            self.result.failures.append(outcome.message or f"step {sid!r} failed")
            self.result.steps[sid] = m.FAILED
            self.failed_log[sid] = job.log
            self.diagnoses[sid] = (outcome.record or {}).get("diagnosis")
            self.progress.finished(sid, m.FAILED, outcome.seconds,
                                   detail=f"log: {job.log}")
            return False
        filed = self.store.complete_step_run(
            step_run_id, status=m.EXECUTED, message=outcome.not_cached or self.stale.get(sid),
            cacheable=outcome.not_cached is None, topology=topology,
            outputs={port: (snap.digest, job.component.output(port).kind.value, snap.size,
                            snap.file_count, self.cas.key(location))
                     for port, (snap, location) in outcome.outputs.items()},
            metrics=outcome.metrics, record=outcome.record)
        arts = {port: _Produced(art, str(outcome.outputs[port][1]))
                for port, art in filed.items()}
        self.produced[sid] = arts
        self.result.steps[sid] = m.EXECUTED
        self.progress.finished(sid, m.EXECUTED, outcome.seconds, detail=outcome.not_cached)
        for finding in check_reads(outcome.record, step=sid):
            self.progress.note(finding.render())
        return True

    def _register_candidate(self, run_id: str) -> str | None:
        cand = self.graph.spec.candidate
        if cand is None:
            return None

        def artifact(name: str | None) -> m.Artifact | None:
            endpoint = self.graph.outputs.get(name) if name else None
            if isinstance(endpoint, FromStep):
                return self.produced[endpoint.node][endpoint.port].artifact
            if isinstance(endpoint, FromInput):
                return self.inputs[endpoint.name].artifact
            return None

        model = artifact(cand.model)
        if model is None:
            return None
        return self.store.register_candidate(run_id, model, artifact(cand.evaluation), cand.name)


def _refuse_files_in_place_of_folders(location: StoreConfig) -> None:
    """The evidence folders a run writes must be folders: ``artifacts`` left as a file (a
    copy gone wrong) would otherwise fail the run after its first step."""
    for path in (location.home, location.artifacts, location.logs, location.work):
        if path.exists() and not path.is_dir():
            shown = display_path(str(path))
            raise UsageError(f"{shown} is a file, but mlpipe keeps a folder there",
                             hint=f"move the file away (mv {shown} {shown}.bak) and run again")


#: What a step's secrets may weigh together (UTF-8): they travel in one environment variable,
#: and Linux refuses a variable of 128 KiB or more.
SECRETS_LIMIT = 96 * 1024


def _refuse_oversized_secrets(graph: Graph, values: dict[str, Any]) -> None:
    """Refuse, before anything is recorded, secrets too large to hand to a step."""
    given = {i.name: values[i.name] for i in graph.spec.inputs
             if i.secret and isinstance(values.get(i.name), str)}
    size = len(json.dumps(given, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > SECRETS_LIMIT:
        raise UsageError(f"the secrets given ({', '.join(sorted(given))}) weigh {size // 1024} "
                         f"KiB; a step gets its secrets in one environment variable, and "
                         f"{SECRETS_LIMIT // 1024} KiB is the most mlpipe passes there",
                         hint="give the step a smaller secret, e.g. a key or token that "
                              "unlocks the large one at run time")


def _refuse_azure_only(graph: Graph) -> None:
    """Refuse, before anything is recorded, a pipeline with steps that run only on Azure ML."""
    only = [f"{node.id!r} ({node.component.azure_only})" for node in graph.step_nodes()
            if node.component.azure_only is not None]
    spec = graph.spec
    if only and len(spec.steps) == 1 and spec.origin is not None \
            and "jobs" not in spec.origin.document:  # a job file holding one job
        step = spec.steps[0]
        raise UsageError(f"{step.name!r} runs only on Azure ML, not here: it is "
                         f"{step.target.azure_only}",
                         hint="submit it with --target azure, or write it for az ml job create "
                              "with mlpipe compile FILE --out DIR (both check it first)")
    if only:
        raise UsageError(f"pipeline {graph.spec.name!r} cannot run here: step"
                         f"{'s' if len(only) > 1 else ''} {', '.join(only)} run"
                         f"{'' if len(only) > 1 else 's'} only on Azure ML",
                         hint="submit it with --target azure (mlpipe checks and exports every "
                              "step), or replace those steps with command jobs to run it here")


def _per_node(comp: ComponentSpec) -> int:
    return comp.distribution.processes_per_instance() if comp.distribution else 1


def fit_scale(comp: ComponentSpec, env: dict[str, str] | None = None) -> tuple[int, int]:
    """``--local-scale STEP=fit``: the declared launch, made as small as it must be for this
    machine: one GPU per CUDA rank, or one core per rank where there is no GPU."""
    from mlpipe.backends.local.launcher.accelerators import fitted, uses_cuda, visible_gpus

    gpus = visible_gpus(env).count if uses_cuda(comp.distribution, comp.compute) else 0
    room = gpus or os.cpu_count() or 1
    if comp.distribution is not None and not hasattr(comp.distribution, "processes_per_node"):
        return max(1, min(comp.instances, room)), 1  # TensorFlow: one worker per node
    return fitted(comp.instances, _per_node(comp), room)


def scaled_components(graph: Graph, scale: dict[str, tuple[int, int] | str]
                      ) -> dict[str, ComponentSpec]:
    """The components of ``scale``'s steps, launched with fewer instances/processes here.

    Raises:
        UsageError: an unknown step, a step that is not distributed, or a non-positive size.
    """
    found: dict[str, ComponentSpec] = {}
    for sid, size in sorted(scale.items()):
        node = graph.steps.get(sid)
        if node is None:
            raise UsageError(f"--local-scale names step {sid!r}, which the pipeline does not "
                             f"have (steps: {', '.join(graph.steps)})",
                             hint="give one of those step names")
        comp = node.component
        if declared_topology(comp) is None:
            raise UsageError(f"--local-scale names step {sid!r}, which is not distributed",
                             hint="scale only steps that declare a distribution or instances")
        if size == "fit":
            instances, per_node = fit_scale(comp)
            if (instances, per_node) == (comp.instances, _per_node(comp)):
                continue  # it fits as declared
        else:
            instances, per_node = size
        if instances < 1 or per_node < 1:
            raise UsageError(f"--local-scale {sid}={instances}x{per_node} is not a positive "
                             f"size", hint="write it as STEP=NODESxPROCESSES, e.g. train=2x2")
        dist = comp.distribution
        if dist is not None and hasattr(dist, "processes_per_node"):
            dist = dataclasses.replace(dist, processes_per_node=per_node)
        elif dist is not None or per_node != 1:
            raise UsageError(f"--local-scale {sid}={instances}x{per_node}: only PyTorch and MPI "
                             f"steps have processes per node to scale",
                             hint=f"give {sid}={instances}x1 to change the instance count only")
        found[sid] = dataclasses.replace(comp, instances=instances, distribution=dist)
    return found


def _compute(node: StepNode) -> dict[str, Any]:
    comp = node.component
    return {"declared": None if comp.compute is None else comp.compute.to_dict(),
            "ran_on": "local"}


def _indent(text: str) -> str:
    return "\n".join(f"    | {line}" for line in text.splitlines())


def _sweep_work(store: Store, work: Path) -> None:
    """Remove scratch folders of runs that are no longer running (killed executors)."""
    if not work.is_dir():
        return
    names = [p.name for p in work.iterdir() if p.is_dir()]
    if not names:
        return
    with store.session() as s:
        running = running_run_ids(s, names)
    for name in names:
        if name not in running:
            shutil.rmtree(work / name, ignore_errors=True)


__all__ = ["LocalExecutor", "RunResult"]
