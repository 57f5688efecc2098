"""The ``mlpipe`` command line: parse, call the library, render. No logic lives here.

Exit codes: 0 clean, 1 problems found, 2 a file that cannot be loaded or a usage error.
Heavy imports (azure-ai-ml, SQLAlchemy, torch) happen only inside the commands that need them.
"""
from __future__ import annotations

import sys

import click

from mlpipe import __version__
from mlpipe.errors import MlpipeError, UsageError

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_LOAD = 0, 1, 2
TARGET = "FILE.py[:function]|pipeline.yml"


def _fail(err: MlpipeError) -> None:
    click.echo(f"error: {err.render()}", err=True)
    sys.exit(err.exit_code)


def _load_graph(target: str):
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    try:
        spec, found = load_spec(target)
        graph, diagnostics = check_pipeline(spec)
        return graph, found + diagnostics
    except MlpipeError as err:
        _fail(err)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mlpipe")
def main() -> None:
    """Pipeline-as-code for Azure Machine Learning, with a lineage and evidence store."""


@main.command()
@click.argument("target", metavar=TARGET)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="How to print the diagnostics.")
def check(target: str, fmt: str) -> None:
    """Compile a pipeline and run every check; exit 1 if any error is found."""
    from mlpipe.diagnostics import has_errors, render_json, render_text

    _, diagnostics = _load_graph(target)
    click.echo(render_json(diagnostics) if fmt == "json" else render_text(diagnostics))
    sys.exit(EXIT_PROBLEMS if has_errors(diagnostics) else EXIT_CLEAN)


@main.command()
@click.argument("target", metavar=TARGET)
@click.option("--format", "fmt", type=click.Choice(["text", "dot", "mermaid"]), default="text",
              show_default=True, help="Plain text, Graphviz DOT or a Mermaid flowchart.")
def graph(target: str, fmt: str) -> None:
    """Print a pipeline's DAG."""
    from mlpipe.drawing import RENDERERS

    compiled, _ = _load_graph(target)
    click.echo(RENDERERS[fmt](compiled))


# --- Azure ML (issue 6) ---------------------------------------------------------------------

def _pairs(values: tuple[str, ...], flag: str) -> dict[str, str]:
    out = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            _fail(UsageError(f"{flag} {item!r} is not NAME=VALUE", hint=f"write {flag} raw=data/images"))
        out[name] = value
    return out


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

    graph, diagnostics = _load_graph(target)
    if has_errors(diagnostics):
        click.echo(render_text(diagnostics), err=True)
        click.echo("error: nothing written; fix the errors above first", err=True)
        sys.exit(EXIT_PROBLEMS)
    try:
        export = export_pipeline(graph.spec, out_dir=out_dir, inputs=_pairs(inputs, "--input"),
                                 default_compute=default_compute, code_root=code_root)
        written = export.write(out_dir)
        if validate:
            from mlpipe.backends.azure.validate import validate_export

            validate_export(out_dir)
    except MlpipeError as err:
        _fail(err)
    click.echo(f"wrote {written[0]} and {len(written) - 1} component file(s) under "
               f"{written[0].parent / 'components'}" + (" (validated by azure-ai-ml)" if validate else ""))
    for note in export.notes:
        click.echo(f"note: {note}")
    click.echo(f"submit with: az ml job create --file {written[0]}")


def _workspace_options(fn):
    for option in reversed([
        click.option("--workspace", "workspace_name", metavar="NAME", help="Azure ML workspace."),
        click.option("--resource-group", metavar="NAME", help="Its resource group."),
        click.option("--subscription", "subscription_id", metavar="ID", help="Its subscription."),
        click.option("--config", "config", type=click.Path(dir_okay=False),
                     help="A config.json as Azure ML writes it (else searched upwards)."),
    ]):
        fn = option(fn)
    return fn


@main.command()
@click.argument("target", metavar=TARGET)
@click.option("--target", "backend", type=click.Choice(["azure"]), required=True,
              help="Where to run it (the local executor adds 'local').")
@click.option("--input", "inputs", multiple=True, metavar="NAME=VALUE",
              help="A pipeline input's value; repeatable.")
@click.option("--experiment", metavar="NAME", help="Azure ML experiment (the pipeline's name).")
@click.option("--compute", "default_compute", metavar="NAME", help="Default compute.")
@_workspace_options
def submit(target: str, backend: str, inputs: tuple[str, ...], experiment: str | None,
           default_compute: str | None, workspace_name: str | None, resource_group: str | None,
           subscription_id: str | None, config: str | None) -> None:
    """Check a pipeline and submit it to an Azure ML workspace; print the job and its URL."""
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.submit import ChecksFailed, submit_to_azure
    from mlpipe.backends.azure.workspace import resolve_workspace
    from mlpipe.diagnostics import render_text
    from mlpipe.loader import load_spec

    try:
        spec, found = load_spec(target)
        workspace = resolve_workspace(subscription_id=subscription_id,
                                      resource_group=resource_group,
                                      workspace_name=workspace_name, config=config)
        run = submit_to_azure(spec, workspace, _service(MLClientService, workspace),
                              inputs=_pairs(inputs, "--input"), experiment=experiment,
                              default_compute=default_compute, extra_diagnostics=found)
    except ChecksFailed as err:
        click.echo(render_text(err.diagnostics), err=True)
        _fail(err)
    except MlpipeError as err:
        _fail(err)
    click.echo(f"submitted run {run.run_id} as Azure ML job {run.job_name} ({run.status})")
    if run.studio_url:
        click.echo(f"studio: {run.studio_url}")


def _service(factory, workspace):
    # The one seam the CLI tests replace with a named fake of the Azure service.
    return factory(workspace)


@main.command()
@click.argument("run", metavar="JOB_NAME")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@_workspace_options
def sync(run: str, fmt: str, workspace_name: str | None, resource_group: str | None,
         subscription_id: str | None, config: str | None) -> None:
    """Fetch an Azure ML pipeline job's status, child jobs, reuse, outputs and metrics."""
    import json

    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.sync import sync_run
    from mlpipe.backends.azure.workspace import resolve_workspace

    try:
        workspace = resolve_workspace(subscription_id=subscription_id,
                                      resource_group=resource_group,
                                      workspace_name=workspace_name, config=config)
        synced = sync_run(run, _service(MLClientService, workspace))
    except MlpipeError as err:
        _fail(err)
    if fmt == "json":
        click.echo(json.dumps(synced.to_dict(), indent=2, sort_keys=True))
        return
    p = synced.pipeline
    click.echo(f"{p.name}  {p.status}  run {synced.run_id or '-'}  {p.studio_url or ''}".rstrip())
    for step in synced.steps:
        how = f"reused from {step.reused_from}" if step.reused else "executed"
        metrics = ", ".join(f"{k}={v:g}" for k, v in step.metrics.items())
        click.echo(f"  {step.node or step.name:<16} {step.status or '?':<10} {how}"
                   + (f"  [{metrics}]" if metrics else ""))


if __name__ == "__main__":  # pragma: no cover
    main()
