"""``mlpipe submit --target azure`` and ``mlpipe sync``: pre-flight, record and submit a
pipeline job, follow it with ``--wait``, and write what Azure ML ran into the store.

Talks to Azure ML only through the service the caller's factory makes for the workspace.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlpipe.commands.request import (
    Interrupted,
    SubmitHooks,
    SubmitRequest,
    Submitted,
    Waited,
    credential_warnings,
)


def submit_azure(request: SubmitRequest, commitment: dict[str, Any] | None,
                 hooks: SubmitHooks, azure_service: Callable[[Any], Any]) -> Submitted:
    """Check, pre-flight against the workspace (unless ``offline``), record and submit; with
    ``wait``, follow the job until Azure ML ends it and sync it into the store."""
    from mlpipe.backends.azure import options
    from mlpipe.backends.azure.preflight import run_preflight
    from mlpipe.backends.azure.submit import submit_to_azure
    from mlpipe.backends.azure.workspace import resolve_workspace
    from mlpipe.evidence import open_store
    from mlpipe.evidence.qualification.gate import run_report
    from mlpipe.evidence.storage.config import locate
    from mlpipe.loader import load_spec

    azure = request.azure
    options.no_secrets_to_azure(bool(request.secrets))
    for text in credential_warnings(request.params, None, request.ignored):
        hooks.warn(text)
    wait = bool(azure.get("wait"))
    interval = options.azure_poll_interval(
        no_reuse=request.no_reuse, max_parallel=request.max_parallel,
        local_scale=bool(request.local_scale), isolate=request.isolate, wait=wait,
        poll_interval=azure.get("poll_interval"))
    values = {**request.inputs, **request.params}
    store = None
    try:
        spec, found = load_spec(request.target)
        workspace = resolve_workspace(subscription_id=azure.get("subscription_id"),
                                      resource_group=azure.get("resource_group"),
                                      workspace_name=azure.get("workspace_name"),
                                      config=azure.get("config"))
        service = azure_service(workspace)
        preflight = None
        if not azure.get("offline"):
            preflight = run_preflight(spec, workspace, service.client, inputs=values,
                                      default_compute=azure.get("default_compute"))
            found = [*found, *preflight.diagnostics]
        store = open_store()
        run = submit_to_azure(spec, workspace, service, inputs=values,
                              experiment=azure.get("experiment"),
                              default_compute=azure.get("default_compute"),
                              extra_diagnostics=found, store=store, ignore=request.ignored,
                              preflight=preflight, commitment=commitment)
    finally:
        if store is not None:
            store.close()
    hooks.submitted(run)
    url = locate().url
    if not wait:
        return Submitted("azure", run.run_id, run.pipeline, run.pipeline_digest, "submitted",
                         None, run_report(url, run.run_id, None), url, run.ci, azure=run)
    waited = _wait(run, service, interval, hooks)
    outcome = waited.outcome
    return Submitted("azure", run.run_id, run.pipeline, run.pipeline_digest, outcome.status,
                     outcome.candidate_id, run_report(url, run.run_id, outcome.candidate_id),
                     url, run.ci, azure=run, waited=waited)


def _wait(run: Any, service: Any, interval: float, hooks: SubmitHooks) -> Waited:
    """Follow the job, then sync it into the store."""
    from mlpipe.backends.azure.follow import failures, follow
    from mlpipe.errors import AzureError

    view = hooks.progress(run) if hooks.progress is not None else None
    try:
        last = follow(run.job_name, service, interval=interval,
                      on_update=view if view is not None else (lambda _snapshot: None))
    except KeyboardInterrupt:
        raise Interrupted(f"stopped waiting; Azure ML job {run.job_name} goes on: follow it "
                          f"with mlpipe sync {run.run_id}") from None
    except AzureError as err:
        raise AzureError(f"{err.message}; Azure ML job {run.job_name} goes on",
                         hint=f"follow it with `mlpipe sync {run.run_id}` once Azure ML is "
                              f"reachable") from err
    finally:
        if view is not None:
            view.close()
    outcome, _ = sync_into_store(run.run_id, run.job_name, service)
    return Waited(outcome, tuple(failures(last)), last.pipeline.name, last.pipeline.status)


def sync_into_store(run_id: str, job_name: str, service: Any) -> tuple[Any, Any]:
    """``mlpipe sync``'s work for run ``run_id``: its job, child jobs, metrics, step records
    and the outputs its plan needs downloaded (the evaluation report), fetched and recorded.

    Returns:
        (what was recorded, ``SyncOutcome``; what was fetched, ``SyncedRun``).
    """
    from mlpipe.backends.azure.ingest import outputs_to_fetch, record_sync
    from mlpipe.backends.azure.sync import sync_run
    from mlpipe.evidence import open_store
    from mlpipe.evidence.records.queries import find_run
    from mlpipe.evidence.storage.config import locate

    store = open_store()
    try:
        with store.session() as s:
            options = dict(find_run(s, run_id).options or {})
        synced = sync_run(job_name, service, fetch=outputs_to_fetch(options),
                          into=locate().home / "downloads" / run_id)
        return record_sync(store, run_id, synced), synced
    finally:
        store.close()


def sync_recorded_run(run: str, flags: dict[str, str | None], config: str | None,
                      azure_service: Callable[[Any], Any]) -> tuple[Any, Any]:
    """``mlpipe sync RUN``: the Azure run ``run`` (an mlpipe run id or unique prefix, or its
    job name) fetched from the workspace it was submitted to (unless ``flags``/``config``
    name another) and recorded.

    Returns:
        (``SyncOutcome``, ``SyncedRun``), as :func:`sync_into_store`.

    Raises:
        UsageError: no such Azure run in the store.
        AzureError: the workspace cannot be reached or does not know the job.

    Example:
        >>> outcome, synced = sync_recorded_run("r-0a1b2", {}, None, service_factory)
        >>> outcome.status
        'completed'
    """
    from mlpipe.backends.azure.ingest import find_azure_run
    from mlpipe.evidence import open_store

    store = open_store()
    try:
        with store.session() as s:
            found = find_azure_run(s, run)
            run_id, job_name, options = found.id, found.options["job_name"], dict(found.options)
    finally:
        store.close()
    workspace = _recorded_workspace(options, flags, config)
    return sync_into_store(run_id, job_name, azure_service(workspace))


def _recorded_workspace(options: dict[str, Any], flags: dict[str, str | None],
                        config: str | None) -> Any:
    from mlpipe.backends.azure.workspace import Workspace, resolve_workspace

    given = {k: v for k, v in flags.items() if v}
    stored = options.get("workspace") or {}
    if not given and config is None and all(stored.get(k) for k in flags):
        return Workspace(**{k: stored[k] for k in flags}, source="the evidence store")
    return resolve_workspace(**{**{k: stored.get(k) for k in flags}, **given}, config=config)


__all__ = ["submit_azure", "sync_into_store", "sync_recorded_run"]
