"""The command group and what every command shares: failing cleanly, loading a pipeline."""
from __future__ import annotations

import sys

import click

from mlpipe import __version__
from mlpipe.errors import MlpipeError

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_LOAD = 0, 1, 2
EXIT_INTERRUPTED = 130
TARGET = "FILE.py[:function]|pipeline.yml"


def fail(err: MlpipeError) -> None:
    """Print ``err`` as one located message with its hint, and exit with its code."""
    click.echo(f"error: {err.render()}", err=True)
    sys.exit(err.exit_code)


def load_graph(target: str):
    """Load ``target`` (a Python file or a pipeline YAML), compile it and run every check."""
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    try:
        spec, found = load_spec(target)
        graph, diagnostics = check_pipeline(spec)
        return graph, found + diagnostics
    except MlpipeError as err:
        fail(err)


def open_evidence_store(*, create: bool = True):
    """The configured evidence store, opened (and migrated when needed), or a clean failure.

    Commands that only read pass ``create=False``: a store that does not exist is reported,
    not silently made empty.
    """
    from mlpipe.evidence import open_store

    try:
        return open_store(create=create)
    except MlpipeError as err:
        fail(err)


def assignments(values: tuple[str, ...], flag: str) -> dict[str, str]:
    """``("a=1", "b=x")`` -> ``{"a": "1", "b": "x"}``, failing cleanly on a malformed pair."""
    from mlpipe.backends.local.inputs import split_assignments

    try:
        return split_assignments(values, flag)
    except MlpipeError as err:
        fail(err)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mlpipe")
def main() -> None:
    """Pipeline-as-code for Azure Machine Learning, with a lineage and evidence store."""
