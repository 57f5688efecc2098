"""A distributed step through the local launcher (:mod:`mlpipe.backends.local.launcher`):
how long its ranks have to join their rendezvous, and what the launch ran or saw fail."""
from __future__ import annotations

import os
from typing import Any

from mlpipe.backends.local.stepjob import StepJob
from mlpipe.backends.local.steplogs import combined_rank_logs, rank_logs

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


def launch_distributed(job: StepJob, argv: list[str], env: dict[str, str],
                       declared: dict[str, Any], cwd: str
                       ) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
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
            d.to_json() for d in exc.report.findings]}
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
