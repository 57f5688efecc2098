"""Azure ML commands: compile (CLI v2 YAML), sync into the evidence store, and the Azure
target of submit.

azure-ai-ml is imported inside the commands. ``_credential`` is the one seam the tests replace:
they hand the real ``MLClientService`` a static token credential for the loopback Azure ML
service instead of azure-identity's DefaultAzureCredential.
"""
from __future__ import annotations

import sys

import click

from mlpipe.cli.base import EXIT_PROBLEMS, TARGET, assignments, load_graph, main


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
def compile_(target: str, out_dir: str, inputs: tuple[str, ...], default_compute: str | None,
             code_root: str | None, validate: bool) -> None:
    """Check a pipeline, then write it as Azure ML CLI v2 YAML (pipeline job + components)."""
    from mlpipe.backends.azure.export import export_pipeline
    from mlpipe.diagnostics import has_errors, render_text

    graph, diagnostics = load_graph(target)
    if has_errors(diagnostics):
        click.echo(render_text(diagnostics), err=True)
        click.echo("error: nothing written; fix the errors above first", err=True)
        sys.exit(EXIT_PROBLEMS)
    export = export_pipeline(graph.spec, out_dir=out_dir, inputs=assignments(inputs, "--input"),
                             default_compute=default_compute, code_root=code_root,
                             check=False)  # checked and reported above
    written = export.write(out_dir)
    if validate:
        from mlpipe.backends.azure.validate import validate_export

        validate_export(out_dir)
    click.echo(f"wrote {written[0]} and {len(written) - 1} component file(s) under "
               f"{written[0].parent / 'components'}"
               + (" (validated by azure-ai-ml)" if validate else ""))
    for note in export.notes:
        click.echo(f"note: {note}")
    click.echo(f"submit with: az ml job create --file {written[0]}")


def _workspace_options(fn):
    """The options that name an Azure ML workspace (flags, a config.json, or the environment)."""
    for option in reversed([
        click.option("--workspace", "workspace_name", metavar="NAME", help="Azure ML workspace."),
        click.option("--resource-group", metavar="NAME", help="Its resource group."),
        click.option("--subscription", "subscription_id", metavar="ID", help="Its subscription."),
        click.option("--config", "config", type=click.Path(dir_okay=False),
                     help="A config.json as Azure ML writes it (else searched upwards)."),
    ]):
        fn = option(fn)
    return fn


def submit_to_workspace(target: str, values: dict[str, str], *, experiment: str | None,
                        default_compute: str | None, workspace_name: str | None,
                        resource_group: str | None, subscription_id: str | None,
                        config: str | None) -> None:
    """``mlpipe submit --target azure``: check, record, submit; print the run, job and URL."""
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
        store = open_store()
        run = submit_to_azure(spec, workspace, _service(MLClientService, workspace),
                              inputs=values, experiment=experiment,
                              default_compute=default_compute, extra_diagnostics=found,
                              store=store)
    except ChecksFailed as err:
        click.echo(render_text(err.diagnostics), err=True)
        raise
    finally:
        if store is not None:
            store.close()
    click.echo(f"submitted run {run.run_id} as Azure ML job {run.job_name} ({run.status})")
    if run.studio_url:
        click.echo(f"studio: {run.studio_url}")
    click.echo(f"follow it with: mlpipe sync {run.run_id}")


def _credential():
    # None: azure-identity's DefaultAzureCredential. The tests put a static token credential
    # here for the loopback Azure ML service (nothing else of the service is replaced).
    return None


def _service(factory, workspace):
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
    import json

    from mlpipe.backends.azure.ingest import find_azure_run, record_sync
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.sync import sync_run
    from mlpipe.evidence import open_store

    flags = {"subscription_id": subscription_id, "resource_group": resource_group,
             "workspace_name": workspace_name}
    store = open_store()
    try:
        with store.session() as s:
            found = find_azure_run(s, run)
            run_id, job_name, options = found.id, found.options["job_name"], dict(found.options)
        workspace = _recorded_workspace(options, flags, config)
        synced = sync_run(job_name, _service(MLClientService, workspace))
        outcome = record_sync(store, run_id, synced)
    finally:
        store.close()
    if fmt == "json":
        click.echo(json.dumps({**synced.to_dict(), "run_id": run_id, "recorded": {
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


#: submit's Azure-only options, by parameter name.
AZURE_FLAGS = {"experiment": "--experiment", "default_compute": "--compute",
               "workspace_name": "--workspace", "resource_group": "--resource-group",
               "subscription_id": "--subscription", "config": "--config"}


def azure_options(fn):
    """submit's Azure-only options: the experiment, default compute and the workspace."""
    fn = _workspace_options(fn)
    fn = click.option("--compute", "default_compute", metavar="NAME",
                      help="Azure: the default compute.")(fn)
    return click.option("--experiment", metavar="NAME",
                        help="Azure: the experiment (the pipeline's name).")(fn)

