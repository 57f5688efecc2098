"""The command group and what every command shares: failing cleanly, loading a pipeline.

Every ``MlpipeError`` a command lets through is turned into its message and exit code in one
place (``Commands.invoke``); commands catch only what they render differently.
"""
from __future__ import annotations

import importlib
import sys
from typing import NoReturn

import click

from mlpipe.errors import MlpipeError
from mlpipe.version import __version__

EXIT_CLEAN, EXIT_PROBLEMS = 0, 1
#: The top-level modules of the authoring extra's distributions (pyproject.toml; a test holds
#: the two equal): a command missing one was run where only the step runtime is installed.
AUTHORING_MODULES = frozenset({"networkx", "sqlalchemy", "alembic", "jsonschema", "psycopg",
                               "pint", "azure", "rich", "packaging", "cryptography"})
EXIT_INTERRUPTED = 130
TARGET = "FILE.py[:function]|pipeline.yml"


def fail(err: MlpipeError, exit_code: int | None = None) -> NoReturn:
    """Print ``err`` as one located message with its hint, and exit with its code (or
    ``exit_code``, for a command that gives the error another meaning). The configured store
    URL's password never reaches the terminal, whoever wrote the message."""
    from mlpipe.evidence.storage.config import locate, scrub

    try:
        url = locate().url
    except MlpipeError:  # a config file that cannot be read names no password
        url = None
    click.echo(f"error: {scrub(err.render(), url)}", err=True)
    sys.exit(err.exit_code if exit_code is None else exit_code)


#: The module (``mlpipe.cli.NAME``) that defines each command. It is imported when its
#: command is asked for, so a command pays for no other family's imports (``mlpipe runs``
#: never imports the review or promotion commands); ``tests/test_cli.py`` holds this table
#: equal to what the modules define.
FAMILIES = {
    "check": "checking", "graph": "checking", "validate": "checking",
    "submit": "running", "runs": "running", "show": "running", "logs": "running",
    "diff": "running", "store": "running", "gc": "running",
    "candidates": "evidence", "evidence": "evidence",
    "qualify": "review", "review": "review",
    "keys": "keys",
    "promote": "promotion", "trace": "promotion",
    "compile": "azure", "environment": "azure", "sync": "azure",
    "rehearse": "rehearsing",
}


class Commands(click.Group):
    """The ``mlpipe`` group: runs a command and fails cleanly on any ``MlpipeError`` from it
    (a located message with its hint on stderr, the error's exit code), never a traceback.
    Each command's module is imported when the command is asked for (``FAMILIES``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*FAMILIES, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in FAMILIES:
            importlib.import_module(f"mlpipe.cli.{FAMILIES[cmd_name]}")
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except MlpipeError as err:
            fail(err)
        except ModuleNotFoundError as err:
            top = (err.name or "").split(".")[0]
            if top not in AUTHORING_MODULES:
                raise
            from mlpipe.errors import UsageError
            from mlpipe.version import DISTRIBUTION

            fail(UsageError(f"this command needs {top}, which is not installed: this is the "
                            f"step runtime alone ({DISTRIBUTION} without its authoring side)",
                            hint=f"pip install '{DISTRIBUTION}[authoring]=={__version__}' to "
                                 f"check, run and export pipelines here"))


def load_graph(target: str):
    """Load ``target`` (a Python file or a pipeline YAML), compile it and run every check."""
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    spec, found = load_spec(target)
    graph, diagnostics = check_pipeline(spec)
    return graph, found + diagnostics


def code_set(value: str | None) -> set[str]:
    """``"mp513, MP107"`` -> ``{"MP513", "MP107"}``; an unknown code is a usage error."""
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


def ignore_option(fn):
    """``--ignore CODES``: as for ``check``, the findings with these codes are neither shown
    nor allowed to stop the command (a team proceeds past a finding it has reviewed)."""
    return click.option("--ignore", "ignore", metavar="CODES", default=None,
                        help="Do not report (or stop for) these codes (comma-separated).")(fn)


def open_evidence_reader():
    """The configured evidence store, open for the commands that only read (``Reader``: plain
    SQL, no ORM); a store that does not exist is reported, not made."""
    from mlpipe.evidence.records.reader import Reader
    from mlpipe.evidence.storage.config import locate

    return Reader.open(locate().url)


def assignments(values: tuple[str, ...], flag: str) -> dict[str, str]:
    """``("a=1", "b=x")`` -> ``{"a": "1", "b": "x"}``; a malformed pair is a UsageError."""
    from mlpipe.backends.local.inputs import split_assignments

    return split_assignments(values, flag)


def workspace_options(fn):
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


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mlpipe")
def main() -> None:
    """Pipeline-as-code for Azure Machine Learning, with a lineage and evidence store."""
