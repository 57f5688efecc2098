"""Submitting a pipeline to Azure ML: check, export, load with azure-ai-ml, record the run,
create the job.

Talks to Azure only through a ``JobsService``; records through ``record`` when given a store.
"""
from __future__ import annotations

import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from mlpipe.backends.azure.export import refuse_secrets, write_export
from mlpipe.backends.azure.service import JobsService
from mlpipe.backends.azure.sync import parse_job
from mlpipe.backends.azure.validate import load_export
from mlpipe.backends.azure.workspace import Workspace
from mlpipe.checks import check_pipeline
from mlpipe.diagnostics import ChecksFailed, Diagnostic, refuse_check_errors
from mlpipe.digests import canonical_json
from mlpipe.errors import MlpipeError
from mlpipe.evidence.storage.ci import ci_provenance, ci_tags
from mlpipe.evidence.storage.store import Store, new_id
from mlpipe.graph import Graph
from mlpipe.spec import PipelineSpec


@dataclass(frozen=True, slots=True)
class SubmittedRun:
    """What a submission produced: mlpipe's run id, the Azure job and where to see it."""

    run_id: str
    job_name: str
    studio_url: str | None
    status: str | None
    experiment: str
    pipeline: str
    pipeline_digest: str
    workspace: Workspace
    ci: dict[str, str | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "job_name": self.job_name, "studio_url": self.studio_url,
                "status": self.status, "experiment": self.experiment, "pipeline": self.pipeline,
                "pipeline_digest": self.pipeline_digest, "workspace": self.workspace.arm_id,
                "ci": self.ci}


def submit_to_azure(spec: PipelineSpec, workspace: Workspace, service: JobsService, *,
                    inputs: Mapping[str, Any] | None = None, experiment: str | None = None,
                    default_compute: str | None = None, run_id: str | None = None,
                    extra_diagnostics: list[Diagnostic] | None = None,
                    store: Store | None = None, ignore: Collection[str] = (),
                    preflight: Any = None, commitment: dict[str, Any] | None = None
                    ) -> SubmittedRun:
    """Check ``spec``, export it, load it with azure-ai-ml, record it and submit it.

    Checks run first and credentials/network are checked before anything is recorded or
    created, so such a failure leaves the store and the workspace untouched. With a
    ``store``, the run is recorded (``running``) before the job is created; if Azure ML then
    does not confirm the job, the run is closed as ``failed`` with the reason, never left
    running.

    Args:
        spec: the pipeline.
        workspace: the resolved workspace.
        service: the Azure ML boundary (``MLClientService`` live; a fake in tests).
        inputs: pipeline input values.
        run_id: mlpipe's run id (a new one by default), recorded in the job's tags.
        store: the evidence store to record the run in (None records nothing).
        ignore: diagnostic codes the caller has reviewed: not reported, never stopping it.
        preflight: the ``preflight.Preflight`` run before (its diagnostics are among
            ``extra_diagnostics``): the versions its moving references named are written in
            the job's tags (``mlpipe.resolved``) and recorded with the run.

    Returns:
        The submitted run's record.

    Raises:
        ChecksFailed: check errors (nothing sent).
        AzureError: no credentials, no network, or Azure rejected the job.
        ExportError: the pipeline cannot be written as Azure ML YAML.
    """
    graph, diagnostics = _checked(spec, extra_diagnostics, ignore)
    refuse_secrets(spec)  # before anything is recorded or sent
    run_id = run_id or new_id("r", 5)
    experiment = experiment or spec.name
    ci = ci_provenance()
    tags = ci_tags(ci)
    resolved = dict(getattr(preflight, "resolved", None) or {})
    if resolved:
        tags["mlpipe.resolved"] = canonical_json(resolved)
    with tempfile.TemporaryDirectory(prefix="mlpipe-azure-") as tmp:
        export = write_export(spec, tmp, inputs=inputs, default_compute=default_compute,
                              run_id=run_id, experiment=experiment, check=False,  # checked above
                              tags=tags)
        job = load_export(tmp, export.job_file)
        service.check_access()
        if store is None:
            created = parse_job(service.create(job, experiment))
        else:
            from mlpipe.backends.azure import record
            from mlpipe.evidence.records.checkresults import record_checks

            record.begin_azure_run(store, graph, run_id=run_id, workspace=workspace,
                                   experiment=experiment, inputs=inputs,
                                   default_compute=default_compute, ci=ci,
                                   commitment=commitment,
                                   preflight=None if preflight is None else {
                                       "resolved": resolved, "requests": preflight.requests})
            # the compile-time warnings it was submitted with are the run's evidence, as a
            # local run's are (the bundle's checks, policies' findings_absent)
            record_checks(store, run_id, diagnostics)
            try:
                created = parse_job(service.create(job, experiment))
            except BaseException as exc:
                why = exc.message if isinstance(exc, MlpipeError) else (
                    f"interrupted ({type(exc).__name__})" if not isinstance(exc, Exception)
                    else f"{type(exc).__name__}: {exc}")
                record.mark_not_submitted(store, run_id, why)
                raise
            record.mark_submitted(store, run_id, created)
    return SubmittedRun(run_id, created.name, created.studio_url, created.status, experiment,
                        spec.name, spec.digest, workspace, ci)


def _checked(spec: PipelineSpec, extra_diagnostics: list[Diagnostic] | None,
             ignore: Collection[str]) -> tuple[Graph, list[Diagnostic]]:
    """The checked graph and the diagnostics it is submitted with (``extra_diagnostics``
    first, the ignored codes left out); ChecksFailed when an error remains."""
    graph, diagnostics = check_pipeline(spec)
    diagnostics = [d for d in list(extra_diagnostics or []) + diagnostics
                   if d.code not in ignore]
    refuse_check_errors(diagnostics, "submit")
    return graph, diagnostics


# ChecksFailed: what a refused submission raises, importable where it is raised
__all__ = ["ChecksFailed", "SubmittedRun", "submit_to_azure"]
