"""The ``mlpipe`` command line: parse, call the library, render. No logic lives here.

Exit codes: 0 clean, 1 problems found, 2 a file that cannot be loaded or a usage error.
Heavy imports (azure-ai-ml, SQLAlchemy, torch) happen only inside the commands that need them.
"""
from __future__ import annotations

import sys

import click

from mlpipe import __version__
from mlpipe.errors import MlpipeError

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_LOAD = 0, 1, 2


def _fail(err: MlpipeError) -> None:
    click.echo(f"error: {err.render()}", err=True)
    sys.exit(err.exit_code)


def _load_graph(target: str):
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_pipeline

    try:
        spec = load_pipeline(target).spec
        return check_pipeline(spec)
    except MlpipeError as err:
        _fail(err)


def _codes(value: str | None) -> set[str]:
    from mlpipe.checks import published_codes

    if not value:
        return set()
    wanted = {c.strip().upper() for c in value.split(",") if c.strip()}
    known = {c.code for c in published_codes()}
    unknown = sorted(wanted - known)
    if unknown:
        raise click.BadParameter(f"unknown code(s) {', '.join(unknown)}; codes are listed in "
                                 f"docs/checks.md")
    return wanted


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mlpipe")
def main() -> None:
    """Pipeline-as-code for Azure Machine Learning, with a lineage and evidence store."""


@main.command()
@click.argument("target", metavar="FILE.py[:function]")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="How to print the diagnostics.")
@click.option("--select", metavar="CODES", help="Report only these codes (comma-separated).")
@click.option("--ignore", metavar="CODES", help="Do not report these codes (comma-separated).")
def check(target: str, fmt: str, select: str | None, ignore: str | None) -> None:
    """Compile a pipeline and run every check; exit 1 if any error is found."""
    from mlpipe.diagnostics import has_errors, render_json, render_text

    selected, ignored = _codes(select), _codes(ignore)
    _, diagnostics = _load_graph(target)
    diagnostics = [d for d in diagnostics if (not selected or d.code in selected)
                   and d.code not in ignored]
    click.echo(render_json(diagnostics) if fmt == "json" else render_text(diagnostics))
    sys.exit(EXIT_PROBLEMS if has_errors(diagnostics) else EXIT_CLEAN)


@main.command()
@click.argument("target", metavar="FILE.py[:function]")
@click.option("--format", "fmt", type=click.Choice(["text", "dot", "mermaid"]), default="text",
              show_default=True, help="Plain text, Graphviz DOT or a Mermaid flowchart.")
def graph(target: str, fmt: str) -> None:
    """Print a pipeline's DAG."""
    from mlpipe.drawing import RENDERERS

    compiled, _ = _load_graph(target)
    click.echo(RENDERERS[fmt](compiled))


@main.command()
@click.argument("contract", metavar="CONTRACT")
@click.argument("path", type=click.Path(exists=True))
def validate(contract: str, path: str) -> None:
    """Check the file or folder PATH against CONTRACT; exit 1 if it does not match.

    CONTRACT is MODULE:NAME (components.defect:LABELS), FILE.py:NAME, MODULE:component.port
    (components.defect:prepare.labels), or a contract kind (label-map) for its form only.
    """
    from mlpipe.contracts import contract_label, validate as check_artifact
    from mlpipe.errors import ContractError
    from mlpipe.loader import load_contract

    try:
        found = load_contract(contract)
        check_artifact(found, path)
    except ContractError as err:
        click.echo(f"error: {err.render()}", err=True)
        sys.exit(EXIT_PROBLEMS)
    except MlpipeError as err:
        _fail(err)
    click.echo(f"{path}: matches {contract_label(found)}")


# --- running and the evidence store (SQLAlchemy is imported inside each command) ---------

EXIT_INTERRUPTED = 130


def _store():
    from mlpipe.evidence import open_store

    try:
        return open_store()
    except MlpipeError as err:
        _fail(err)


@main.command()
@click.argument("target", metavar="FILE.py[:function]")
@click.option("--input", "inputs", multiple=True, metavar="NAME=PATH",
              help="A pipeline input: a file or folder, snapshotted by content.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A pipeline parameter.")
@click.option("--target", "run_target", type=click.Choice(["local"]), default="local",
              show_default=True, help="Where to run.")
@click.option("--no-reuse", is_flag=True, help="Run every step, reusing nothing.")
@click.option("--max-parallel", type=int, default=None, metavar="N",
              help="Steps at a time (default: the number of cores).")
def submit(target: str, inputs: tuple[str, ...], params: tuple[str, ...], run_target: str,
           no_reuse: bool, max_parallel: int | None) -> None:
    """Run a pipeline and record everything in the evidence store."""
    import signal

    from mlpipe.backends.local.executor import LocalExecutor
    from mlpipe.backends.local.inputs import split_assignments
    from mlpipe.diagnostics import has_errors, render_text

    graph, diagnostics = _load_graph(target)
    if has_errors(diagnostics):
        click.echo(render_text(diagnostics), err=True)
        click.echo("error: the pipeline has check errors; nothing was run", err=True)
        sys.exit(EXIT_PROBLEMS)

    def _stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _stop)
    try:
        executor = LocalExecutor(max_parallel=max_parallel, reuse=not no_reuse)
        result = executor.submit(graph, inputs=split_assignments(inputs, "--input"),
                                 params=split_assignments(params, "--param"))
    except MlpipeError as err:
        _fail(err)
    except KeyboardInterrupt:
        click.echo("error: interrupted; the run is recorded as interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    click.echo(f"run {result.run_id} {result.status}")
    if result.candidate_id:
        click.echo(f"candidate {result.candidate_id}")


@main.command()
@click.option("--pipeline", default=None, help="Only the runs of this pipeline.")
@click.option("--limit", default=50, show_default=True, help="How many runs, newest first.")
def runs(pipeline: str | None, limit: int) -> None:
    """List recorded runs, newest first."""
    from mlpipe.evidence.queries import pipeline_runs
    from mlpipe.evidence.views import runs_table

    store = _store()
    try:
        with store.session() as s:
            click.echo(runs_table(pipeline_runs(s, pipeline, limit=limit)))
    except MlpipeError as err:
        _fail(err)


@main.command()
@click.argument("run")
@click.option("--why", "why_step", default=None, metavar="STEP",
              help="Explain why STEP was reused or re-run.")
def show(run: str, why_step: str | None) -> None:
    """Show a run: its steps with status, reused-from and duration."""
    from mlpipe.evidence.views import get_run, show_run, why

    store = _store()
    try:
        with store.session() as s:
            found = get_run(s, run)
            click.echo(why(s, found, why_step) if why_step else show_run(s, found))
    except MlpipeError as err:
        _fail(err)


@main.command()
@click.argument("run_a")
@click.argument("run_b")
def diff(run_a: str, run_b: str) -> None:
    """What differs between two runs: code, environment, data, parameters, reuse, metrics."""
    from mlpipe.evidence.views import diff_runs, get_run

    store = _store()
    try:
        with store.session() as s:
            click.echo(diff_runs(s, get_run(s, run_a), get_run(s, run_b)))
    except MlpipeError as err:
        _fail(err)


@main.group()
def store() -> None:
    """Manage the evidence store."""


@store.command("upgrade")
def store_upgrade() -> None:
    """Bring the configured store's schema to this mlpipe's version."""
    from mlpipe.evidence import locate
    from mlpipe.evidence.schema import HEAD
    from mlpipe.evidence.store import Store

    try:
        opened = Store.open(locate().url, auto_upgrade=True)
    except MlpipeError as err:
        _fail(err)
    click.echo(f"evidence store {opened.url} is at schema revision {HEAD}")


if __name__ == "__main__":  # pragma: no cover
    main()
