"""Azure ML commands: compile (CLI v2 YAML), sync into the evidence store, and submit's
Azure-only options; each calls its one ``mlpipe.commands`` entry and renders.

azure-ai-ml is imported inside the commands. ``_credential`` is the one seam the tests replace:
they hand the real ``MLClientService`` a static token credential for the loopback Azure ML
service instead of azure-identity's DefaultAzureCredential.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import click

from mlpipe.cli.base import (
    TARGET,
    assignments,
    code_set,
    ignore_option,
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
    from mlpipe.commands.compiling import compile_pipeline_yaml
    from mlpipe.diagnostics import ChecksFailed, render_text

    try:
        compiled = compile_pipeline_yaml(target, out_dir, inputs=assignments(inputs, "--input"),
                                         default_compute=default_compute,
                                         code_root=code_root, validate=validate,
                                         ignore=code_set(ignore))
    except ChecksFailed as err:
        click.echo(render_text(err.diagnostics), err=True)
        raise
    if compiled.warnings:
        click.echo(render_text(list(compiled.warnings)), err=True)
    written = compiled.written
    components = len(written) - 1
    click.echo(f"wrote {written[0]}"
               + (f" and {components} component file(s) under {written[0].parent / 'components'}"
                  if components else "")
               + (" (validated by azure-ai-ml)" if compiled.validated else ""))
    for note in compiled.notes:
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


def workspace_service(workspace):
    """The live Azure ML service (``MLClientService``) of ``workspace``."""
    from mlpipe.backends.azure.service import MLClientService

    return service_for(MLClientService, workspace)


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
    from mlpipe.commands.azuresubmit import sync_recorded_run

    outcome, synced = sync_recorded_run(run, {"subscription_id": subscription_id,
                                             "resource_group": resource_group,
                                             "workspace_name": workspace_name}, config,
                                       workspace_service)
    run_id = outcome.run_id
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

