"""The local executor: runs a compiled pipeline here, reusing steps by content, recording all.

``submit`` builds the run's plan (:mod:`.plan`: everything checked, resolved and validated,
nothing recorded yet), then runs it: schedules the steps (in parallel up to ``max_parallel``)
and records every fact as it happens (:mod:`.runrecords`). Whether a step is reused is
``reuse``'s decision; running a step's process and filing its outputs is ``stepproc``'s job;
``--local-scale`` is ``localscale``'s; hashing is ``mlpipe.digests.snapshot``'s.
"""
from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mlpipe.backends.local import forkserver, reuse
from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.backends.local.distlaunch import rendezvous_timeout
from mlpipe.backends.local.plan import RunPlan, StepPlan, plan_run
from mlpipe.backends.local.processes import Processes
from mlpipe.backends.local.progress import Progress
from mlpipe.backends.local.runrecords import Produced, RunRecords, compute, log_path
from mlpipe.backends.local.stepjob import StepJob, StepOutcome
from mlpipe.backends.local.steplogs import tail
from mlpipe.backends.local.stepproc import execute
from mlpipe.diagnostics import Diagnostic
from mlpipe.digests.snapshot import StatCache
from mlpipe.errors import StepFailed, UsageError
from mlpipe.evidence.records.queries import running_run_ids
from mlpipe.evidence.storage import ignores
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.config import StoreConfig, locate
from mlpipe.evidence.storage.roots import ArtifactRoots, input_key, shared_root
from mlpipe.evidence.storage.store import Store, new_id
from mlpipe.graph import FromInput, FromStep, Graph, StepNode
from mlpipe.judgements.diagnosis import wiring
from mlpipe.judgements.reads import check_reads


@dataclass(slots=True)
class RunResult:
    """How a local run ended."""

    run_id: str
    status: str
    steps: dict[str, str] = field(default_factory=dict)      # step -> status
    step_runs: dict[str, str] = field(default_factory=dict)  # step -> step run id
    candidate_id: str | None = None
    failures: list[str] = field(default_factory=list)


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
                 fork_server: bool | None = None, isolate: bool = False,
                 commitment: dict[str, Any] | None = None) -> None:
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
        #: the qualification policy the run commits to before it runs (``commitment.commit``)
        self.commitment = commitment
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
        plan = plan_run(graph, inputs=inputs, params=params, diagnostics=diagnostics,
                        ignore=ignore, location=self.location, local_scale=self.local_scale,
                        isolate=self.isolate, stream=self.stream)
        return self._run(plan)

    def _run(self, plan: RunPlan) -> RunResult:
        """Run a plan: open the store, hold the artifact store's lock, schedule the steps."""
        first = ignores.first_run(self.location)
        store = Store.open(self.location.url)
        if first:  # the first run in this project: git must not commit the store
            ignores.ensure_ignored(self.location)
        cache = StatCache(self.location.stat_cache)
        try:
            run = _Run(self, plan, store, cache)
            with run.cas.lock():  # `mlpipe gc` removes nothing while a run holds it
                _sweep_work(store, self.location.work)
                return run.go()
        finally:
            cache.close()
            store.close()


class _Run:
    """One run of a plan: the scheduler's state, complete from construction.

    The scheduler thread (the one that called ``submit``) owns it and alone writes to the
    store. The step workers run :func:`_run_step` on a thread pool and touch none of this
    state: they get the job and the parts that are safe to share (the artifact store, the stat
    cache, the running processes, the artifact roots and the progress notes).
    """

    def __init__(self, ex: LocalExecutor, plan: RunPlan, store: Store, cache: StatCache
                 ) -> None:
        self.ex, self.plan, self.graph, self.cache = ex, plan, plan.graph, cache
        self.records = RunRecords(store, plan, cache)
        self.stale: dict[str, str] = {}  # why a step's earlier run was passed over
        self.cas = ArtifactStore(ex.location.artifacts, cache)
        self.roots = ArtifactRoots(ex.location.artifacts,
                                   shared_root(ex.location.shared_artifacts), cache)
        self.said_unreachable = False
        self.procs = Processes()
        self.progress = Progress(len(plan.graph.steps), ex.stream)
        self.progress.width = max([12, *(len(s) for s in plan.graph.steps)])
        self.produced: dict[str, dict[str, Produced]] = {}
        self.inputs: dict[str, Produced] = {}
        self.failed_log: dict[str, Path] = {}
        self.diagnoses: dict[str, dict[str, Any] | None] = {}
        self.outside: dict[str, str] = {}  # step -> how it ran outside its environment
        self.fork_tried = not ex.fork_server

    @property
    def store(self) -> Store:
        return self.records.store

    # --- setup ------------------------------------------------------------------------------

    def _start(self, run_id: str) -> RunResult:
        """Record the run's inputs and the run itself; its result, running."""
        spec = self.graph.spec
        snaps = {}
        for name, path in sorted(self.plan.paths.items()):
            declared = spec.input(name)
            kind = declared.kind.value if declared and declared.kind else (
                "uri_folder" if os.path.isdir(path) else "uri_file")
            self.inputs[name], snap = self.records.input_artifact(path, kind)
            snaps[name] = self.store.snapshot(snap.digest, path, snap.size, snap.file_count,
                                              mutable=True)
            if self.roots.shared is not None:  # by content: every home verifies it
                problem = self.roots.publish(input_key(snap.digest), path)
                if problem:
                    self.progress.note(f"input {name!r}: {problem}; other homes cannot verify "
                                       f"it unless they hold the same bytes")
        run_id = self.records.begin(run_id, snaps, reuse=self.ex.reuse,
                                    max_parallel=self.ex.max_parallel, isolate=self.ex.isolate,
                                    commitment=self.ex.commitment)
        self.ex.run_id = run_id
        self.records.checks(run_id)
        self.progress.header(run_id, spec.name, self.ex.max_parallel)
        return RunResult(run_id, m.RUNNING)

    # --- the schedule -----------------------------------------------------------------------

    def go(self) -> RunResult:
        run_id = new_id("r", 5)
        # the server imports while the run is set up; unused (every step reused), it is
        # simply killed at the end
        self._start_fork_server(run_id)
        try:
            result = self._start(run_id)
        except BaseException:
            self.procs.close()
            raise
        try:
            self._schedule(run_id, result)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                self.store.interrupt_run(run_id, "the executor was stopped (Ctrl-C or a "
                                                 "signal) before the run finished")
                result.status = m.INTERRUPTED
            else:
                self.store.interrupt_run(run_id, f"the executor failed: {exc}")
                self.store.finish_run(run_id, m.FAILED, f"the executor failed: {exc}")
                result.status = m.FAILED
            raise
        if result.failures:
            result.status = m.FAILED
            self.store.finish_run(run_id, m.FAILED, "; ".join(result.failures))
            raise StepFailed(f"run {run_id} failed: {result.failures[0]}",
                             hint=self._failure_hint())
        result.candidate_id = self.records.candidate(run_id, self.produced, self.inputs)
        result.status = m.SUCCEEDED
        self.store.finish_run(run_id, m.SUCCEEDED)
        return result

    def _schedule(self, run_id: str, result: RunResult) -> None:
        """Run every step whose upstream steps are done, up to ``max_parallel`` at a time,
        until none is left; on any exception, stop every step process first."""
        steps = self.graph.steps
        # the plain links, not the networkx graph: its import is a fifth of a reused submit
        pred = self.graph.links.predecessors()
        waiting = {sid: {p for p in pred[sid] if p in steps} for sid in steps}
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
                    started = self._begin_step(self.plan.steps[sid], run_id, result)
                    if started is None:
                        _release(sid, waiting)
                    else:
                        step_run_id, job = started
                        future = pool.submit(_run_step, job, self.cas, self.cache, self.procs,
                                             self.roots, self.progress)
                        running[future] = (sid, step_run_id, job)
                if not running:
                    if any(not deps for deps in waiting.values()):
                        continue
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    sid, step_run_id, job = running.pop(future)
                    if self._finish_step(sid, step_run_id, job, future.result(), result):
                        _release(sid, waiting)
                    else:
                        self._skip_downstream(sid, run_id, waiting, result)
                self.cache.flush()
        except BaseException:
            self.progress.close()
            self.procs.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        self.progress.close()
        self.procs.close()

    def _failure_hint(self) -> str | None:
        """Where to look first for a failed run: the first failed step's diagnosis, its log's
        last lines, and how it ran outside its environment."""
        first = next(iter(self.failed_log.items()), None)
        if first is None:
            return None
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
        return hint

    def _skip_downstream(self, sid: str, run_id: str, waiting: dict[str, set[str]],
                         result: RunResult) -> None:
        skipped = {d for d in self.graph.links.descendants(sid) if d in waiting}
        for d in sorted(skipped):
            del waiting[d]
            self.records.skipped(run_id, self.graph.steps[d], sid)
            result.steps[d] = m.SKIPPED
            self.progress.finished(d, m.SKIPPED, detail=f"(upstream {sid!r} failed)")

    # --- one step ---------------------------------------------------------------------------

    def _bound_inputs(self, node: StepNode) -> dict[str, Produced]:
        bound: dict[str, Produced] = {}
        for port in node.component.inputs:
            endpoint = node.bindings.get(port.name)
            if isinstance(endpoint, FromStep):
                bound[port.name] = self.produced[endpoint.node][endpoint.port]
            elif isinstance(endpoint, FromInput) and endpoint.name in self.inputs:
                bound[port.name] = self.inputs[endpoint.name]
            elif (node.id, port.name) in self.plan.literals:  # checked before the run began
                path = self.plan.literals[(node.id, port.name)]
                bound[port.name] = self.records.input_artifact(path, port.kind.value)[0]
        return bound

    def _begin_step(self, step: StepPlan, run_id: str, result: RunResult
                    ) -> tuple[str, StepJob] | None:
        """Reuse the step (returning None) or record it running and return its job."""
        node = step.node
        bound = self._bound_inputs(node)
        env_row = self.records.environment_row(node)
        decision = reuse.decide(
            self.store, self.roots, node.component, environment_digest=env_row.digest,
            params=self.records.recorded(step.params, step.secrets),
            inputs={port: p.artifact.digest for port, p in bound.items()},
            local_scale=step.launched, packages=self.plan.interpreters.packages(node.id),
            enabled=self.ex.reuse, cache=self.cache)
        common = dict(run_id=run_id, step=node.id,
                      component_version_id=self.records.component_row(node).id,
                      environment_id=env_row.id, compute=compute(node), cache_key=decision.key,
                      key_material=decision.material)
        self._say_unreachable()
        original = decision.origin
        if original is not None:
            step_run_id = self.store.record_reused(
                **common, topology=original.topology, original_id=original.id,
                inputs={k: v.artifact for k, v in bound.items()}, outputs=decision.outputs)
            self.produced[node.id] = {port: Produced(art, str(decision.paths[port]))
                                      for port, art in decision.outputs.items()}
            result.steps[node.id] = m.REUSED
            result.step_runs[node.id] = step_run_id
            self.progress.finished(node.id, m.REUSED,
                                   detail=f"from {original.id} (run {original.run_id})")
            return None
        if decision.stale is not None:
            self.stale[node.id] = decision.stale
            self.progress.note(f"{node.id!r} is not reused: {decision.stale}")
        topology = step.declared
        if step.launched is not None and topology is not None:
            self.progress.note(f"{node.id!r} is scaled down here (--local-scale): declared "
                               f"{topology['world_size']} process(es), launching "
                               f"{step.launched['world_size']}")
        interpreter = self.plan.interpreters.evidence(node.id, node.component)
        if interpreter["in_declared_environment"] is False:
            self.outside[node.id] = interpreter["note"]
        log = log_path(self.ex.location.logs, run_id, node.id)
        step_run_id = self.store.begin_step_run(
            **common, topology={"declared": topology} if topology else {}, status=m.RUNNING,
            message=decision.why_not, interpreter=interpreter, log_path=str(log),
            inputs={k: v.artifact for k, v in bound.items()})
        result.step_runs[node.id] = step_run_id
        if topology is not None and step.launched is None:
            self.progress.note(f"{node.id!r} is launched as {topology['world_size']} "
                               f"process(es) the way Azure ML would")
        self.progress.started(node.id, log)
        return step_run_id, self._job(step, run_id, bound, log)

    def _say_unreachable(self) -> None:
        """Say once that the shared artifact root did not answer."""
        shared = self.roots.shared
        if self.roots.unreachable is not None and shared is not None and not self.said_unreachable:
            self.said_unreachable = True
            self.progress.note(f"the shared artifact root {shared.name} did not "
                               f"answer ({self.roots.unreachable}); steps whose outputs are "
                               f"not here run again")

    def _job(self, step: StepPlan, run_id: str, bound: dict[str, Produced], log: Path
             ) -> StepJob:
        """What the step's process needs."""
        node = step.node
        return StepJob(node.id, step.component, {k: v.path for k, v in bound.items()},
                       {k: v.artifact.digest for k, v in bound.items()}, dict(step.params),
                       self.ex.location.work / run_id / node.id.replace("/", "_"), log,
                       os.getcwd(), [p for p in sys.path if p], pipeline=self.graph.spec.name,
                       run_id=run_id, bin_folder=self.plan.interpreters.bin_folder(node.id),
                       secrets=step.secrets, masked=self.plan.secret_values(),
                       wiring=wiring(self.graph, node.id))

    def _start_fork_server(self, run_id: str) -> None:
        """Start the run's fork server, once, on the scheduler thread (it dies with it)."""
        if self.fork_tried:
            return
        self.fork_tried = True
        forkable = [step.node.component for step in self.plan.steps.values()
                    if step.declared is None
                    and forkserver.forkable(step.node.component)
                    and step.node.id not in self.plan.interpreters.isolated]
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

    def _finish_step(self, sid: str, step_run_id: str, job: StepJob, outcome: StepOutcome,
                     result: RunResult) -> bool:
        step = self.plan.steps[sid]
        topology = outcome.topology
        if step.launched is not None:
            topology = {**topology, "declared": step.declared, "local_scale": step.launched}
        if not outcome.ok:
            self.records.failed(step_run_id, outcome, topology)
            result.failures.append(outcome.message or f"step {sid!r} failed")
            result.steps[sid] = m.FAILED
            self.failed_log[sid] = job.log
            self.diagnoses[sid] = (outcome.record or {}).get("diagnosis")
            self.progress.finished(sid, m.FAILED, outcome.seconds,
                                   detail=f"log: {job.log}")
            return False
        self.produced[sid] = self.records.executed(
            step_run_id, job, outcome, topology, outcome.not_cached or self.stale.get(sid),
            self.cas)
        result.steps[sid] = m.EXECUTED
        self.progress.finished(sid, m.EXECUTED, outcome.seconds, detail=outcome.not_cached)
        for finding in check_reads(outcome.record, step=sid):
            self.progress.note(finding.render())
        return True


def _run_step(job: StepJob, cas: ArtifactStore, cache: StatCache, procs: Processes,
              roots: ArtifactRoots, progress: Progress) -> StepOutcome:
    """Run a step (on a worker thread) and publish its outputs to the shared root."""
    outcome = execute(job, cas, cache, procs)
    if outcome.ok and roots.shared is not None:
        for _snap, location in outcome.outputs.values():
            problem = roots.publish(cas.key(location))
            if problem:
                progress.note(f"{job.node_id!r}: {problem}; other homes re-run it")
    return outcome


def _release(sid: str, waiting: dict[str, set[str]]) -> None:
    for deps in waiting.values():
        deps.discard(sid)


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
