"""``mlpipe submit``, here or on Azure ML, as one library call: ``submit(request)`` checks,
runs or submits (and with ``--wait`` follows and syncs), and returns a ``Submitted`` whose
``document`` is the one builder of ``mlpipe.submit/1``.

Prints nothing: warnings, the submitted job and the live view go to ``SubmitHooks``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlpipe.commands.request import (
    AZURE_FLAGS,
    Interrupted,
    SubmitHooks,
    SubmitRequest,
    Submitted,
    credential_warnings,
)

#: No hooks: nothing is told while it works.
QUIET = SubmitHooks()


def submit(request: SubmitRequest, *, hooks: SubmitHooks = QUIET,
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
        from mlpipe.evidence.qualification.commitment import commit

        commitment = commit(request.policy_file)   # a bad policy: refused before anything runs
    if request.run_target == "azure":
        if azure_service is None:
            raise ValueError("submit to Azure ML needs azure_service")
        from mlpipe.commands.azuresubmit import submit_azure

        return submit_azure(request, commitment, hooks, azure_service)
    return _submit_local(request, commitment, hooks)


def _submit_local(request: SubmitRequest, commitment: dict[str, Any] | None,
                  hooks: SubmitHooks) -> Submitted:
    from mlpipe.backends.local import options as local
    from mlpipe.backends.local.executor import LocalExecutor
    from mlpipe.errors import StepFailed
    from mlpipe.evidence.qualification.gate import run_report
    from mlpipe.evidence.storage.ci import ci_provenance
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


__all__ = ["QUIET", "submit"]
