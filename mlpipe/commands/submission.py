"""``mlpipe submit``, here or on Azure ML, as one library call: ``submit(request)`` checks,
runs or submits (and with ``--wait`` follows and syncs), and returns a ``Submitted`` whose
``document`` is the one builder of ``mlpipe.submit/1``.

Prints nothing: warnings, the submitted job and the live view go to ``SubmitHooks``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: submit's Azure-only options, by parameter name, as typed on the command line.
AZURE_FLAGS = {"experiment": "--experiment", "default_compute": "--compute",
               "workspace_name": "--workspace", "resource_group": "--resource-group",
               "subscription_id": "--subscription", "config": "--config", "wait": "--wait",
               "poll_interval": "--poll-interval", "offline": "--offline"}


class Interrupted(Exception):
    """The user stopped a submit (Ctrl-C, SIGTERM): ``message`` says what was left where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _ignore(*_args: Any) -> None:
    return None


@dataclass(frozen=True, slots=True)
class SubmitHooks:
    """What a caller is told while a submit works.

    Args:
        warn: a warning's text (credentials given in clear), before anything runs.
        submitted: Azure ML accepted the job (the ``SubmittedRun``).
        progress: with ``--wait``, the view that is called with each look at the job and
            closed when the wait ends (None: no view).
        failed: a local run's step failed: the run's report, before StepFailed is raised.
    """

    warn: Callable[[str], None] = _ignore
    submitted: Callable[[Any], None] = _ignore
    progress: Callable[[Any], Any] | None = None
    failed: Callable[[Any], None] = _ignore


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """What ``mlpipe submit`` was asked, parsed: every option by its parameter name."""

    target: str
    run_target: str = "local"
    inputs: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)
    no_reuse: bool = False
    max_parallel: int | None = None
    local_scale: Mapping[str, str] = field(default_factory=dict)
    isolate: bool = False
    ignored: frozenset[str] = frozenset()
    policy_file: str | None = None
    azure: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Waited:
    """How an Azure ML job ended, followed with ``--wait`` and synced."""

    outcome: Any       # backends.azure.ingest.SyncOutcome
    failed: tuple[Any, ...]   # backends.azure.follow.Failure, in node order
    job_name: str
    job_status: str | None


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a submit did, here or on Azure ML: everything its renderings show."""

    target: str
    run_id: str
    pipeline: str
    pipeline_digest: str
    status: str
    candidate_id: str | None
    report: Any        # evidence.gate.RunReport
    store_url: str
    ci: Mapping[str, Any] | None
    spec: Any = None   # a local run's PipelineSpec: where findings with no place are shown
    azure: Any = None  # backends.azure.submit.SubmittedRun
    waited: Waited | None = None

    def document(self, fail_on: str) -> dict[str, Any]:
        """The ``mlpipe.submit/1`` JSON document (docs/json.md), built here only."""
        azure, waited = self.azure, self.waited
        return {
            "format": "mlpipe.submit/1", "run_id": self.run_id, "target": self.target,
            "pipeline": self.pipeline, "pipeline_digest": self.pipeline_digest,
            "status": self.status,
            "job_name": None if azure is None else azure.job_name,
            "studio_url": None if azure is None else azure.studio_url,
            "azure_status": None if azure is None else (
                azure.status if waited is None else waited.outcome.azure_status),
            "experiment": None if azure is None else azure.experiment,
            "workspace": None if azure is None else azure.workspace.arm_id,
            "candidate_id": self.candidate_id,
            "failed_steps": [] if waited is None else [f.to_dict() for f in waited.failed],
            "ci": None if self.ci is None else dict(self.ci),
            "findings": self.report.findings, "fail_on": fail_on,
            "failing_findings": len(self.report.failing(fail_on))}


def submit(request: SubmitRequest, *, hooks: SubmitHooks = SubmitHooks(),
           azure_service: Callable[[Any], Any] | None = None) -> Submitted:
    """``mlpipe submit``: commit to the policy, check, then run here or submit to Azure ML.

    Args:
        request: the parsed options.
        hooks: what to tell the caller while it works.
        azure_service: the Azure ML service of a workspace (``--target azure``).

    Returns:
        What was run or submitted, with the findings its candidate's evidence carries.

    Raises:
        ChecksFailed: check errors (nothing run, recorded or sent).
        StepFailed: a local step failed (``hooks.failed`` had the run's report).
        Interrupted: stopped by the user.
        UsageError: options that do not go together, a bad input or policy.

    Example:
        >>> done = submit(SubmitRequest("pipelines/defect_classifier.py",
        ...                             inputs={"raw": "data/images"}))
        >>> done.document("error")["status"]
        'completed'
    """
    commitment = None
    if request.policy_file is not None:
        from mlpipe.evidence.commitment import commit

        commitment = commit(request.policy_file)   # a bad policy: refused before anything runs
    if request.run_target == "azure":
        if azure_service is None:
            raise ValueError("submit to Azure ML needs azure_service")
        from mlpipe.commands.azuresubmit import submit_azure

        return submit_azure(request, commitment, hooks, azure_service)
    return _submit_local(request, commitment, hooks)


def credential_warnings(params: Mapping[str, Any], spec: Any,
                        ignored: frozenset[str] | set[str]) -> list[str]:
    """The ``--param`` values recorded in clear that look like credentials (MP961), rendered;
    and a Param[Secret] given with --param (not recorded, but the command line shows it).
    None when ``--ignore`` names MP961."""
    from mlpipe.checks.credentials import secrets_on_command_line, submitted_credentials
    from mlpipe.codes import CREDENTIAL_IN_RECORDED_VALUE

    if CREDENTIAL_IN_RECORDED_VALUE.code in ignored:
        return []
    return [*(f"warning: --param {name} gives a secret on the command line, where "
              f"other users of this machine (ps) and your shell history see it\n"
              f"  help: pass it with --secret {name}=ENV_VAR"
              for name in secrets_on_command_line(dict(params), spec)),
            *(d.render() for d in submitted_credentials(dict(params), spec))]


def _submit_local(request: SubmitRequest, commitment: dict[str, Any] | None,
                  hooks: SubmitHooks) -> Submitted:
    from mlpipe.backends.local import options as local
    from mlpipe.backends.local.executor import LocalExecutor
    from mlpipe.errors import StepFailed
    from mlpipe.evidence.ci import ci_provenance
    from mlpipe.evidence.gate import run_report
    from mlpipe.graph import compile_pipeline
    from mlpipe.loader import load_spec
    from mlpipe.secret import from_environment

    local.check_local([AZURE_FLAGS[k] for k, v in request.azure.items()
                       if v not in (None, False)])
    params = local.local_params(dict(request.params), from_environment(dict(request.secrets)))
    scale = local.local_scales(dict(request.local_scale))
    executor = None
    try:
        spec, found = load_spec(request.target)
        for text in credential_warnings(params, spec, request.ignored):
            hooks.warn(text)
        graph = compile_pipeline(spec)
        executor = LocalExecutor(max_parallel=request.max_parallel, reuse=not request.no_reuse,
                                 local_scale=scale, isolate=request.isolate,
                                 commitment=commitment)
        result = executor.submit(graph, inputs=dict(request.inputs), params=params,
                                 diagnostics=found, ignore=request.ignored)
    except StepFailed:
        if executor is not None and executor.run_id is not None:
            hooks.failed(run_report(executor.location.url, executor.run_id, None))
        raise
    except KeyboardInterrupt:
        begun = executor.run_id if executor is not None else None
        raise Interrupted(f"interrupted; run {begun} is recorded as interrupted" if begun else
                          "interrupted before a run was recorded; nothing was recorded"
                          ) from None
    url = executor.location.url
    return Submitted("local", result.run_id, graph.spec.name, graph.spec.digest, result.status,
                     result.candidate_id, run_report(url, result.run_id, result.candidate_id),
                     url, ci_provenance(), spec=graph.spec)


__all__ = ["AZURE_FLAGS", "Interrupted", "SubmitHooks", "SubmitRequest", "Submitted", "Waited",
           "credential_warnings", "submit"]
