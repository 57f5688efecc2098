"""Commands that read a pipeline or an artifact without running anything: check, graph, validate."""
from __future__ import annotations

import sys

import click

from mlpipe.cli.base import (
    EXIT_CLEAN,
    EXIT_PROBLEMS,
    TARGET,
    assignments,
    code_set,
    load_graph,
    main,
    workspace_options,
)
from mlpipe.errors import UsageError


@main.command()
@click.argument("target", metavar=TARGET, required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github", "sarif"]),
              default="text", show_default=True,
              help="How to print the diagnostics: github writes GitHub Actions annotations, "
                   "sarif a SARIF 2.1.0 log for code scanning (docs/ci.md).")
@click.option("--select", metavar="CODES", help="Report only these codes (comma-separated).")
@click.option("--ignore", metavar="CODES", help="Do not report these codes (comma-separated).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error",
              show_default=True,
              help="Exit 1 when a diagnostic of this severity or a worse one is reported.")
@click.option("--explain", metavar="CODE",
              help="Print what a code checks, why it matters, an example and the fix "
                   "(MP301 or artifact-kind-mismatch), and check nothing.")
@click.option("--input", "inputs", multiple=True, metavar="NAME=VALUE",
              help="With --workspace: a pipeline input's value (azureml:NAME:VERSION is "
                   "looked up); repeatable.")
@click.option("--compute", "default_compute", metavar="NAME",
              help="With --workspace: the default compute.")
@workspace_options
def check(target: str | None, fmt: str, select: str | None, ignore: str | None,
          fail_on: str, explain: str | None, inputs: tuple[str, ...],
          default_compute: str | None, workspace_name: str | None, resource_group: str | None,
          subscription_id: str | None, config: str | None) -> None:
    """Compile a pipeline and run every check; exit 1 if any error (or, with --fail-on, any
    warning or info) is found. With --workspace (or --resource-group, --subscription,
    --config), also the pre-flight against that Azure ML workspace."""
    from mlpipe.diagnostics import render_json, render_text

    if explain is not None:
        click.echo(_explain(explain), nl=False)
        return
    if target is None:
        raise UsageError("check needs a TARGET (FILE.py[:function] or pipeline.yml)",
                         hint="give the pipeline to check, or --explain CODE")
    selected, ignored = code_set(select), code_set(ignore)
    graph, diagnostics = load_graph(target)
    diagnostics = [*diagnostics, *_recorded_versions(graph)]
    if workspace_name or resource_group or subscription_id or config:
        from mlpipe.cli.azure import workspace_preflight

        diagnostics = [*diagnostics, *workspace_preflight(
            graph.spec, assignments(inputs, "--input"), default_compute=default_compute,
            workspace_name=workspace_name, resource_group=resource_group,
            subscription_id=subscription_id, config=config).diagnostics]
    elif inputs or default_compute:
        raise UsageError("--input and --compute apply to the pre-flight only",
                         hint="add --workspace NAME (with --resource-group and --subscription, "
                              "or --config), or drop them")
    diagnostics = [d for d in diagnostics if (not selected or d.code in selected)
                   and d.code not in ignored]
    if fmt in ("github", "sarif"):
        from mlpipe.cli.codescan import render
        from mlpipe.diagnostics import sort_key

        click.echo(render(fmt, [d.to_json() for d in sorted(diagnostics, key=sort_key)],
                          pipeline_place(graph.spec, target)), nl=False)
    else:
        click.echo(render_json(diagnostics) if fmt == "json" else render_text(diagnostics))
    from mlpipe.evidence.qualification.gate import FAILING  # the --fail-on rule submit gates on too

    failing = FAILING[fail_on]
    sys.exit(EXIT_PROBLEMS if any(d.severity.value in failing for d in diagnostics)
             else EXIT_CLEAN)


def pipeline_place(spec, target: str) -> tuple[str, int]:
    """Where a finding with no place of its own is shown: the pipeline's definition, else the
    first line of the file the target names."""
    if spec is not None and spec.location is not None:
        return spec.location.file, spec.location.line
    if spec is not None and spec.origin is not None:
        return spec.origin.file, 1
    return target.split(":", 1)[0] if target.count(":") == 1 else target, 1


def _recorded_versions(graph) -> list:
    """MP805 from what the configured evidence store holds (nothing when there is none)."""
    from mlpipe.checks.versions import component_names, reused_versions
    from mlpipe.errors import MlpipeError
    from mlpipe.evidence.records.versions import recorded_code_digests
    from mlpipe.evidence.storage.config import locate

    try:
        url = locate().url
    except MlpipeError:
        return []  # a store configuration that cannot be read: the run commands say why
    return reused_versions(graph, recorded_code_digests(url, component_names(graph)))


def _explain(code: str) -> str:
    import difflib

    from mlpipe.codes import CODES, explain

    try:
        return explain(code)
    except KeyError:
        names = [*CODES, *(c.name for c in CODES.values())]
        close = ([] if code.strip().upper().startswith("MP")
                 else difflib.get_close_matches(code.strip(), names, n=3))
        raise UsageError(f"no published code {code!r}",
                         hint=(f"did you mean {', '.join(close)}? " if close else "")
                         + "codes are listed in docs/checks.md") from None


@main.command()
@click.argument("target", metavar=TARGET)
@click.option("--format", "fmt", type=click.Choice(["text", "dot", "mermaid"]), default="text",
              show_default=True, help="Plain text, Graphviz DOT or a Mermaid flowchart.")
def graph(target: str, fmt: str) -> None:
    """Print a pipeline's DAG."""
    from mlpipe.drawing import RENDERERS

    compiled, _ = load_graph(target)
    click.echo(RENDERERS[fmt](compiled))


@main.command()
@click.argument("contract", metavar="CONTRACT")
@click.argument("path", type=click.Path(exists=True))
def validate(contract: str, path: str) -> None:
    """Check the file or folder PATH against CONTRACT; exit 1 if it does not match.

    CONTRACT is MODULE:NAME (components.defect:LABELS), FILE.py:NAME, MODULE:component.port
    (components.defect:prepare.labels), or a contract kind (label-map) for its form only.
    """
    from mlpipe.contracts import contract_label
    from mlpipe.contracts import validate as check_artifact
    from mlpipe.loader import load_contract

    found = load_contract(contract)
    check_artifact(found, path)  # a ContractError exits 1, as a finding
    click.echo(f"{path}: matches {contract_label(found)}")
