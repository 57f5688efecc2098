"""What a local run writes to the evidence store, fact by fact as it happens: the run and its
inputs, each step's run (reused, running, failed, executed or skipped) with its component and
environment rows, and the candidate. A secret parameter reaches the store only as its keyed
hash. Used by the run's scheduler thread only.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.backends.local.localscale import processes_per_node
from mlpipe.backends.local.plan import RunPlan
from mlpipe.backends.local.stepjob import StepJob, StepOutcome
from mlpipe.digests.snapshot import ContentDigest, StatCache, snapshot
from mlpipe.environments import environment_identity
from mlpipe.errors import UsageError
from mlpipe.evidence.records.checkresults import record_checks, summary
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.runstart import start_run
from mlpipe.evidence.storage.store import Store
from mlpipe.graph import FromInput, FromStep, StepNode
from mlpipe.secret import Redactor, keyed_hash


@dataclass(slots=True)
class Produced:
    """An artifact a run has (a pipeline input, or a step's output) and where its files are."""

    artifact: m.Artifact
    path: str


def run_options(plan: RunPlan, *, reuse: bool, max_parallel: int, isolate: bool
                ) -> dict[str, Any]:
    """The run's options as recorded: how it was asked to run (the code files and the
    committed policy are added by ``evidence.storage.runstart``)."""
    scaled = plan.scaled
    return {"reuse": reuse, "max_parallel": max_parallel,
            "executor": "local", "checks": summary(list(plan.diagnostics)),
            **({"ignored_codes": list(plan.ignored)} if plan.ignored else {}),
            **({"input_overrides": list(plan.overrides)} if plan.overrides else {}),
            **({"isolate": True} if isolate else {}),
            **({"local_scale": {k: f"{c.instances}x{processes_per_node(c)}"
                                for k, c in sorted(scaled.items())}} if scaled else {})}


class RunRecords:
    """One run's writes to ``store`` (the component and environment rows written once)."""

    def __init__(self, store: Store, plan: RunPlan, cache: StatCache) -> None:
        self.store, self.plan, self.cache = store, plan, cache
        self._rows: dict[Any, Any] = {}
        self._secret_key: bytes | None = None

    def input_artifact(self, path: str, kind: str) -> tuple[Produced, ContentDigest]:
        """A pipeline input (or a step input given as a path) as an artifact of the store.

        Raises:
            UsageError: a file in it cannot be read.
        """
        try:
            snap = snapshot(path, self.cache)
        except OSError as exc:  # a file in it that cannot be read, a symlink cycle
            where = f" ({exc.filename})" if exc.filename and exc.filename != path else ""
            raise UsageError(f"input {path} cannot be read{where}: {exc.strerror}",
                             hint="make every file in it readable and remove links that "
                                  "lead back into it, or give another path") from None
        art = self.store.artifact(snap.digest, kind, snap.size, snap.file_count, path)
        return Produced(art, path), snap

    def begin(self, run_id: str, snaps: dict[str, Any], *, reuse: bool, max_parallel: int,
              isolate: bool, commitment: dict[str, Any] | None = None) -> str:
        """Record the run as begun (its pipeline, code revision, inputs, parameters and
        options); its id."""
        return start_run(self.store, self.plan.graph.spec, target="local", run_id=run_id,
                         params=self.recorded(self.plan.values, self.plan.secret_inputs),
                         inputs=snaps, commitment=commitment,
                         options=run_options(self.plan, reuse=reuse, max_parallel=max_parallel,
                                             isolate=isolate))

    def checks(self, run_id: str) -> None:
        """Record what the checks found (the plan's diagnostics) with the run."""
        record_checks(self.store, run_id, list(self.plan.diagnostics))

    def recorded(self, values: Mapping[str, Any], secrets: Collection[str]) -> dict[str, Any]:
        """``values`` as the store holds them: each secret as its keyed hash."""
        if not any(isinstance(values.get(name), str) for name in secrets):
            return dict(values)
        if self._secret_key is None:
            self._secret_key = self.store.secret_key()
        return {name: keyed_hash(self._secret_key, value)
                if name in secrets and isinstance(value, str) else value
                for name, value in values.items()}

    def component_row(self, node: StepNode) -> m.ComponentVersion:
        comp = node.component
        row = self._rows.get(comp.digest)
        if row is None:
            row = self.store.component_version(comp.name, comp.version, comp.digest,
                                               comp.code_digest, comp.to_dict())
            if comp.command is None:  # a function component: its source, for diffs
                values = self.plan.values
                secrets = Redactor({name: values.get(name) for name in self.plan.secret_inputs})
                self.store.source_text(comp.code_digest,
                                       comp.location.file if comp.location else None,
                                       comp.function, comp.location.line if comp.location
                                       else None, secrets.text if secrets else None)
            self._rows[comp.digest] = row
        return row

    def environment_row(self, node: StepNode) -> m.EnvironmentRow:
        comp = node.component
        name, version, digest, mutable = environment_identity(
            comp.environment, comp.location.file if comp.location else None)
        key = ("env", name, version, digest)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self.store.environment(name, version, digest, mutable)
        return row

    def skipped(self, run_id: str, node: StepNode, upstream: str) -> None:
        self.store.add_step_run(
            run_id=run_id, step=node.id, component_version_id=self.component_row(node).id,
            environment_id=None, compute=compute(node), topology={}, cache_key=None,
            key_material=None, status=m.SKIPPED, finished_at=None,
            message=f"not run: upstream step {upstream!r} failed")

    def failed(self, step_run_id: str, outcome: StepOutcome, topology: dict[str, Any]) -> None:
        self.store.finish_step_run(step_run_id, status=m.FAILED, message=outcome.message,
                                   topology=topology, record=outcome.record)

    def executed(self, step_run_id: str, job: StepJob, outcome: StepOutcome,
                 topology: dict[str, Any], message: str | None, cas: ArtifactStore
                 ) -> dict[str, Produced]:
        """Record the step's run as executed with its outputs and metrics; its outputs."""
        filed = self.store.complete_step_run(
            step_run_id, status=m.EXECUTED, message=message,
            cacheable=outcome.not_cached is None, topology=topology,
            outputs={port: (snap.digest, job.component.output(port).kind.value, snap.size,
                            snap.file_count, cas.key(location))
                     for port, (snap, location) in outcome.outputs.items()},
            metrics=outcome.metrics, record=outcome.record)
        return {port: Produced(art, str(outcome.outputs[port][1])) for port, art in filed.items()}

    def candidate(self, run_id: str, produced: Mapping[str, Mapping[str, Produced]],
                  inputs: Mapping[str, Produced]) -> str | None:
        """Register the pipeline's candidate, when it declares one; its id."""
        graph = self.plan.graph
        cand = graph.spec.candidate
        if cand is None:
            return None

        def artifact(name: str | None) -> m.Artifact | None:
            endpoint = graph.outputs.get(name) if name else None
            if isinstance(endpoint, FromStep):
                return produced[endpoint.node][endpoint.port].artifact
            if isinstance(endpoint, FromInput):
                return inputs[endpoint.name].artifact
            return None

        model = artifact(cand.model)
        if model is None:
            return None
        return self.store.register_candidate(run_id, model, artifact(cand.evaluation), cand.name)


def compute(node: StepNode) -> dict[str, Any]:
    """The compute a step declared, and where it ran (here)."""
    comp = node.component
    return {"declared": None if comp.compute is None else comp.compute.to_dict(),
            "ran_on": "local"}


def log_path(logs: Path, run_id: str, step: str) -> Path:
    """Where a step's log is kept."""
    return logs / run_id / f"{step}.log"


__all__ = ["Produced", "RunRecords", "compute", "run_options"]
