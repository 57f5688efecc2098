"""Azure ML commands: compile (CLI v2 YAML), sync into the evidence store, and the Azure
target of submit.

azure-ai-ml is imported inside the commands. ``_credential`` is the one seam the tests replace:
they hand the real ``MLClientService`` a static token credential for the loopback Azure ML
service instead of azure-identity's DefaultAzureCredential.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

from mlpipe.cli.base import (
    EXIT_INTERRUPTED,
    EXIT_PROBLEMS,
    TARGET,
    assignments,
    code_set,
    ignore_option,
    load_graph,
    main,
    workspace_options,
)


@main.command("compile")
@click.argument("target", metavar=TARGET)
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write pipeline.yml and components/*.yml into.")
@click.option("--input", "inputs", multiple=True, metavar="NAME=VALUE",
              help="A pipeline input's value (data path/URI or parameter); repeatable.")
@click.option("--compute", "default_compute", metavar="NAME",
              help="The pipeline's default compute (else the steps' most used one).")
@click.option("--code-root", type=click.Path(exists=True, file_okay=False),
              help="Folder uploaded as function components' code (else their import root).")
@click.option("--validate/--no-validate", default=True, show_default=True,
              help="Load and validate the written files with azure-ai-ml (offline).")
@ignore_option
def compile_(target: str, out_dir: str, inputs: tuple[str, ...], default_compute: str | None,
             code_root: str | None, validate: bool, ignore: str | None) -> None:
    """Check a pipeline, then write it as Azure ML CLI v2 YAML (pipeline job + components).

    A pipeline read from Azure ML YAML is written back as it was read: every field, relative
    paths rebased to the output folder.
    """
    from mlpipe.backends.azure.export import export_pipeline
    from mlpipe.backends.azure.export_checks import export_checks
    from mlpipe.backends.azure.staging import write_staged
    from mlpipe.backends.azure.validate import Validation
    from mlpipe.checks.where import SDK_FOLDER
    from mlpipe.diagnostics import Severity, has_errors, render_text
    from mlpipe.errors import ExportError
    from mlpipe.paths import display_path

    ignored = code_set(ignore)
    given = assignments(inputs, "--input")
    # azure-ai-ml is imported in a forked process while the pipeline is traced and written
    validation = Validation.start() if validate else None
    graph = None
    try:
        graph, diagnostics = load_graph(target)
        diagnostics = [d for d in [*diagnostics, *export_checks(graph.spec, inputs=given,
                                                                 code_root=code_root)]
                       if d.code not in ignored]
        if has_errors(diagnostics):
            click.echo(render_text(diagnostics), err=True)
            click.echo("error: nothing written; fix the errors above first", err=True)
            sys.exit(EXIT_PROBLEMS)
        warnings = [d for d in diagnostics if d.severity is Severity.WARNING]
        if warnings:
            click.echo(render_text(warnings), err=True)
        export = export_pipeline(graph.spec, out_dir=out_dir, inputs=given,
                                 default_compute=default_compute, code_root=code_root,
                                 check=False)  # checked and reported above
        # written beside out_dir and validated there: a refused job leaves nothing behind
        written = write_staged(export, out_dir, check=None if validation is None else (
            lambda folder: validation.run(folder, export.job_file)))
    except ExportError as err:
        if graph is not None and graph.spec.origin is not None and err.file is not None \
                and "azure-ai-ml" in err.message:
            # the job file was written back as it was read: azure-ai-ml refuses what it says
            err.hint = (f"azure-ai-ml refuses what {display_path(graph.spec.origin.file)} "
                        f"says; fix it there (nothing was written)")
            if SDK_FOLDER in Path(graph.spec.origin.file).parts and graph.spec.location:
                # written by mlpipe from an azure-ai-ml Python pipeline: the user's file
                err.hint = (f"azure-ai-ml refuses the job {display_path(graph.spec.location.file)}"
                            f" builds; fix it there (nothing was written)")
        raise
    finally:
        if validation is not None:
            validation.close()
    components = len(written) - 1
    click.echo(f"wrote {written[0]}"
               + (f" and {components} component file(s) under {written[0].parent / 'components'}"
                  if components else "")
               + (" (validated by azure-ai-ml)" if validate else ""))
    for note in export.notes:
        click.echo(f"note: {note}")
    click.echo(f"submit with: az ml job create --file {written[0]}")


@main.command("environment")
@click.argument("name")
@click.option("--version", "version", required=True, help="The environment's version.")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write environment.yml and its build context into.")
@click.option("--pipeline", "target", default=None, metavar=TARGET,
              help="Install what the steps of this pipeline that run in NAME:VERSION need "
                   "(their contracts' validators, the frameworks they import; a GPU image "
                   "when one runs on a GPU size).")
@click.option("--image", default=None, metavar="IMAGE",
              help="The base image [default: Azure ML's openmpi4.1.0-ubuntu22.04, or its "
                   "CUDA image for steps on GPU sizes].")
@click.option("--wheel", type=click.Path(exists=True, dir_okay=False), default=None,
              help="An mlpipe wheel to install (else built from this checkout).")
def environment(name: str, version: str, out_dir: str, target: str | None, image: str | None,
                wheel: str | None) -> None:
    """Write an Azure ML environment with this exact mlpipe runtime (a Docker build context
    installing the wheel built from this checkout, what the pipeline's steps need, and an
    MLflow client the tracking server accepts); register it with
    `az ml environment create --file OUT/environment.yml`."""
    from mlpipe.backends.azure.runtime_env import (
        DEFAULT_IMAGE,
        steps_need,
        validate_inputs,
        write_runtime_environment,
    )

    validate_inputs(name, version, image or DEFAULT_IMAGE)
    need = None
    if target is not None:
        from mlpipe.loader import load_spec

        need = steps_need(load_spec(target)[0], name, version)
    path = write_runtime_environment(out_dir, name, version, image=image, wheel=wheel,
                                     need=need)
    click.echo(f"wrote {path} and its build context {path.parent / 'context'}")
    if need is not None:
        click.echo(f"for steps {', '.join(need.steps)} ({'GPU' if need.gpu else 'CPU'}): "
                   f"{' '.join(need.packages)}")
    click.echo(f"register it with: az ml environment create --file {path}")
    click.echo(f'then use it: Environment("{name}", version="{version}")')


_workspace_options = workspace_options


def workspace_preflight(spec, values: dict[str, str], *, default_compute: str | None,
                        workspace_name: str | None, resource_group: str | None,
                        subscription_id: str | None, config: str | None):
    """``mlpipe check --workspace``: the pre-flight of ``spec`` against the workspace (its
    ``Preflight``: diagnostics, resolved references, requests)."""
    from mlpipe.backends.azure.preflight import run_preflight
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.workspace import resolve_workspace

    workspace = resolve_workspace(subscription_id=subscription_id, resource_group=resource_group,
                                  workspace_name=workspace_name, config=config)
    service = service_for(MLClientService, workspace)
    return run_preflight(spec, workspace, service.client, inputs=values,
                         default_compute=default_compute)


def submit_to_workspace(target: str, values: dict[str, str], *, experiment: str | None,
                        default_compute: str | None, workspace_name: str | None,
                        resource_group: str | None, subscription_id: str | None,
                        config: str | None, wait: bool = False, poll_interval: float = 15.0,
                        fmt: str = "text", ignore: set[str] | None = None,
                        offline: bool = False, fail_on: str = "error",
                        commitment: dict | None = None) -> None:
    """``mlpipe submit --target azure``: check, pre-flight against the workspace (unless
    ``offline``), record, submit; print the run, job and URL.
    With ``wait``, follow the job until Azure ML ends it, sync it into the store, and exit 0
    (completed) or 1 (failed or canceled, naming the steps). ``ignore``: codes not reported."""
    from mlpipe.backends.azure.preflight import run_preflight
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.submit import ChecksFailed, submit_to_azure
    from mlpipe.backends.azure.workspace import resolve_workspace
    from mlpipe.diagnostics import render_text
    from mlpipe.evidence import open_store
    from mlpipe.loader import load_spec

    store = None
    try:
        spec, found = load_spec(target)
        workspace = resolve_workspace(subscription_id=subscription_id,
                                      resource_group=resource_group,
                                      workspace_name=workspace_name, config=config)
        service = service_for(MLClientService, workspace)
        preflight = None
        if not offline:
            preflight = run_preflight(spec, workspace, service.client, inputs=values,
                                      default_compute=default_compute)
            found = [*found, *preflight.diagnostics]
        store = open_store()
        run = submit_to_azure(spec, workspace, service, inputs=values, experiment=experiment,
                              default_compute=default_compute, extra_diagnostics=found,
                              store=store, ignore=ignore or (), preflight=preflight,
                              commitment=commitment)
    except ChecksFailed as err:
        click.echo(render_text(err.diagnostics), err=True)
        raise
    finally:
        if store is not None:
            store.close()
    out = sys.stdout if fmt == "text" else sys.stderr
    click.echo(f"submitted run {run.run_id} as Azure ML job {run.job_name} ({run.status})",
               file=out)
    if run.studio_url:
        click.echo(f"studio: {run.studio_url}", file=out)
    document = {"format": "mlpipe.submit/1", "run_id": run.run_id, "target": "azure",
                "pipeline": run.pipeline, "pipeline_digest": run.pipeline_digest,
                "status": "submitted", "job_name": run.job_name, "studio_url": run.studio_url,
                "azure_status": run.status, "experiment": run.experiment,
                "workspace": run.workspace.arm_id, "candidate_id": None, "failed_steps": [],
                "ci": run.ci}
    from mlpipe.cli.running import gate, gate_document, show_outcome
    from mlpipe.evidence.qualification.gate import run_report
    from mlpipe.evidence.storage.config import locate

    if not wait:
        click.echo(f"follow it with: mlpipe sync {run.run_id}  (submitted, not completed)",
                   file=out)
        report = run_report(locate().url, run.run_id, None)  # its compile-time checks
        document.update(gate_document(report, fail_on))
        show_outcome(report, fmt, document, target)
        gate(report, fail_on)
        return
    outcome, failed = _wait(run, service, poll_interval, out)
    document.update(status=outcome.status, azure_status=outcome.azure_status,
                    candidate_id=outcome.candidate_id,
                    failed_steps=[f.to_dict() for f in failed])
    report = run_report(locate().url, run.run_id, outcome.candidate_id)
    document.update(gate_document(report, fail_on))
    show_outcome(report, fmt, document, target)
    if outcome.azure_status != "Completed":
        sys.exit(EXIT_PROBLEMS)
    gate(report, fail_on)


def _wait(run, service, poll_interval: float, out):
    """Follow the job, sync it, say how it ended; return the sync outcome and the failures."""
    from mlpipe.backends.azure.follow import failures, follow
    from mlpipe.backends.azure.ingest import record_sync
    from mlpipe.cli.progress import progress_view
    from mlpipe.errors import AzureError
    from mlpipe.evidence import open_store

    view = progress_view(out, title=f"run {run.run_id}")
    try:
        last = follow(run.job_name, service, interval=poll_interval, on_update=view)
    except KeyboardInterrupt:
        view.close()
        click.echo(f"stopped waiting; Azure ML job {run.job_name} goes on: follow it with "
                   f"mlpipe sync {run.run_id}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except AzureError as err:
        view.close()
        raise AzureError(f"{err.message}; Azure ML job {run.job_name} goes on",
                         hint=f"follow it with `mlpipe sync {run.run_id}` once Azure ML is "
                              f"reachable") from err
    view.close()
    store = open_store()
    try:
        outcome = record_sync(store, run.run_id, _fetch(store, run.run_id, run.job_name, service))
    finally:
        store.close()
    failed = failures(last)
    p = last.pipeline
    click.echo(f"run {run.run_id} {outcome.status}  (Azure ML job {p.name}: {p.status})",
               file=out)
    for f in failed:
        click.echo(f"  step {f.step} {f.status}: {f.message or 'no status message'}"
                   + (f"\n    logs: {f.log_url}" if f.log_url else ""), file=out)
    if p.status != "Completed" and not failed:
        click.echo(f"  the pipeline job ended {p.status} with no failed step", file=out)
    if outcome.candidate_id:
        click.echo(f"candidate {outcome.candidate_id}", file=out)
    return outcome, failed


def _fetch(store, run_id: str, job_name: str, service):
    """What ``sync`` records for run ``run_id``: its job, child jobs, metrics, step records,
    and the outputs the run's plan needs downloaded (the evaluation report)."""
    from mlpipe.backends.azure.ingest import outputs_to_fetch
    from mlpipe.backends.azure.sync import sync_run
    from mlpipe.evidence.records.queries import find_run
    from mlpipe.evidence.storage.config import locate

    with store.session() as s:
        options = dict(find_run(s, run_id).options or {})
    return sync_run(job_name, service, fetch=outputs_to_fetch(options),
                    into=locate().home / "downloads" / run_id)


@contextlib.contextmanager
def output_fetcher():
    """``mlpipe evidence --verify --fetch``'s downloads: Azure ML outputs brought into a
    temporary folder (removed afterwards) through the workspace each run was submitted to."""
    import tempfile

    from mlpipe.backends.azure.download import OutputFetcher
    from mlpipe.backends.azure.service import MLClientService

    with tempfile.TemporaryDirectory(prefix="mlpipe-fetch-") as folder:
        yield OutputFetcher(lambda ws: service_for(MLClientService, ws), Path(folder))


def _credential():
    # None: azure-identity's DefaultAzureCredential. The tests put a static token credential
    # here for the loopback Azure ML service (nothing else of the service is replaced).
    return None


def service_for(factory, workspace):
    """The Azure ML service ``factory`` makes for ``workspace``, with the one credential."""
    return factory(workspace, credential=_credential())


def _recorded_workspace(options: dict, flags: dict[str, str | None], config: str | None):
    from mlpipe.backends.azure.workspace import Workspace, resolve_workspace

    given = {k: v for k, v in flags.items() if v}
    stored = options.get("workspace") or {}
    if not given and config is None and all(stored.get(k) for k in flags):
        return Workspace(**{k: stored[k] for k in flags}, source="the evidence store")
    return resolve_workspace(**{**{k: stored.get(k) for k in flags}, **given}, config=config)


@main.command()
@click.argument("run", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@_workspace_options
def sync(run: str, fmt: str, workspace_name: str | None, resource_group: str | None,
         subscription_id: str | None, config: str | None) -> None:
    """Fetch an Azure run's pipeline job and child jobs and record them in the evidence store.

    RUN is an mlpipe run id (or a unique prefix), or the Azure ML job name it was submitted
    as. The workspace is the one the run was submitted to, unless flags name another.
    """
    from mlpipe.backends.azure.ingest import find_azure_run, record_sync
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.evidence import open_store

    flags = {"subscription_id": subscription_id, "resource_group": resource_group,
             "workspace_name": workspace_name}
    store = open_store()
    try:
        with store.session() as s:
            found = find_azure_run(s, run)
            run_id, job_name, options = found.id, found.options["job_name"], dict(found.options)
        workspace = _recorded_workspace(options, flags, config)
        synced = _fetch(store, run_id, job_name, service_for(MLClientService, workspace))
        outcome = record_sync(store, run_id, synced)
    finally:
        store.close()
    if fmt == "json":
        click.echo(json.dumps({"format": "mlpipe.sync/1", **synced.to_dict(), "run_id": run_id,
                               "recorded": {
            "status": outcome.status, "steps": outcome.steps,
            "candidate": outcome.candidate_id, "notes": outcome.notes}},
            indent=2, sort_keys=True))
        return
    p = synced.pipeline
    click.echo(f"run {run_id} {outcome.status}  (Azure ML job {p.name}: {p.status})")
    if p.studio_url:
        click.echo(f"studio: {p.studio_url}")
    for step in synced.steps:
        recorded = outcome.steps.get(step.node or "", "not recorded")
        how = f"reused {step.reused_from}" if step.reused else recorded
        metrics = ", ".join(f"{k}={v:g}" + ("(partial)" if (step.metric_info.get(k) or {})
                                             .get("scope") == "partial" else "")
                            for k, v in step.metrics.items())
        click.echo(f"  {step.node or step.name:<16} {step.status or '?':<10} {how}"
                   + (f"  [{metrics}]" if metrics else ""))
    for note in outcome.notes:
        click.echo(f"note: {note}")
    if outcome.candidate_id:
        click.echo(f"candidate {outcome.candidate_id}")


#: submit's Azure-only options, by parameter name (with the value that means "not given").
AZURE_FLAGS = {"experiment": "--experiment", "default_compute": "--compute",
               "workspace_name": "--workspace", "resource_group": "--resource-group",
               "subscription_id": "--subscription", "config": "--config", "wait": "--wait",
               "poll_interval": "--poll-interval", "offline": "--offline"}


def azure_options(fn):
    """submit's Azure-only options: the experiment, default compute, the workspace, --wait."""
    fn = click.option("--poll-interval", type=click.FloatRange(min=0), default=None,
                      metavar="SECONDS",
                      help="Azure, with --wait: seconds between two looks at the job "
                           "[default: 15].")(fn)
    fn = click.option("--wait", is_flag=True, default=None,
                      help="Azure: follow the job until Azure ML ends it (a live view of its "
                           "steps), sync it, exit 0 if it completed, 1 if it failed or was "
                           "canceled.")(fn)
    fn = click.option("--offline", is_flag=True, default=None,
                      help="Azure: skip the pre-flight against the workspace (computes, "
                           "quota, asset versions, environments: docs/azure.md).")(fn)
    fn = _workspace_options(fn)
    fn = click.option("--compute", "default_compute", metavar="NAME",
                      help="Azure: the default compute.")(fn)
    return click.option("--experiment", metavar="NAME",
                        help="Azure: the experiment (the pipeline's name).")(fn)

