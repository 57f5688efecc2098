"""What ``submit --target azure``'s options mean together, checked before anything is loaded
or sent: which apply to a local run only, and the poll interval of ``--wait``. The CLI parses
the flags and hands them here.
"""
from __future__ import annotations

from mlpipe.errors import UsageError


def no_secrets_to_azure(secrets: bool) -> None:
    """``--secret`` with ``--target azure`` is refused: mlpipe never sends a secret to Azure
    ML, where a job holds every input value in clear."""
    if secrets:
        from mlpipe.backends.azure.export import SECRET_HINT

        raise UsageError("--secret applies to --target local only: mlpipe never sends a "
                         "secret to Azure ML, where a job holds every input value in clear",
                         hint=SECRET_HINT)


def azure_poll_interval(*, no_reuse: bool, max_parallel: int | None, local_scale: bool,
                        isolate: bool, wait: bool, poll_interval: float | None) -> float:
    """The options of a submission to Azure ML, checked; the poll interval to use.

    Raises:
        UsageError: a local-only option, or ``--poll-interval`` without ``--wait``.
    """
    if no_reuse or max_parallel is not None or local_scale or isolate:
        raise UsageError("--no-reuse, --max-parallel, --local-scale and --isolate apply to "
                         "--target local only",
                         hint="control reuse on Azure ML with @component(reuse=False); "
                              "Azure ML runs each step in its declared environment")
    if poll_interval is not None and not wait:
        raise UsageError("--poll-interval applies to --wait only",
                         hint="add --wait, or drop --poll-interval")
    return 15.0 if poll_interval is None else poll_interval
