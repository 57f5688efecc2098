"""What ``mlpipe submit`` is asked and what it answers: the request, the hooks its progress
goes to, and ``Submitted``, whose ``document`` is the one builder of ``mlpipe.submit/1``. Shared
by the local and the Azure ML halves of ``commands.submission``; prints nothing.
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


__all__ = ["AZURE_FLAGS", "Interrupted", "SubmitHooks", "SubmitRequest", "Submitted", "Waited",
           "credential_warnings"]
