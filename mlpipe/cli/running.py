"""Commands that run pipelines and read the evidence store: submit, runs, show, logs, diff,
store, gc.

SQLAlchemy (and the executor) are imported inside each command, so ``mlpipe --help`` stays light.
"""
from __future__ import annotations

import sys
from typing import Any

import click

from mlpipe.cli.azure import AZURE_FLAGS, azure_options, submit_to_workspace
from mlpipe.cli.base import (
    EXIT_INTERRUPTED,
    EXIT_PROBLEMS,
    TARGET,
    assignments,
    code_set,
    ignore_option,
    main,
    open_evidence_reader,
)
from mlpipe.errors import UsageError


@main.command()
@click.argument("target", metavar=TARGET)
@click.option("--input", "inputs", multiple=True, metavar="NAME=PATH",
              help="A pipeline input: a file or folder (snapshotted by content), or on Azure "
                   "a data path/URI. Locally, STEP.PORT=PATH replaces a path a job writes.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A pipeline parameter.")
@click.option("--secret", "secrets", multiple=True, metavar="NAME=ENV_VAR",
              help="Local: a Param[Secret] pipeline parameter, read from the environment "
                   "variable ENV_VAR; handed to the step and recorded only as a keyed hash.")
@click.option("--target", "run_target", type=click.Choice(["local", "azure"]), default="local",
              show_default=True, help="Run here, or submit to an Azure ML workspace.")
@click.option("--no-reuse", is_flag=True, help="Local: run every step, reusing nothing.")
@click.option("--max-parallel", type=int, default=None, metavar="N",
              help="Local: steps at a time (default: the number of cores).")
@click.option("--local-scale", "local_scale", multiple=True, metavar="STEP=NODESxPROCS",
              help="Local: launch a distributed step with fewer nodes/processes than declared "
                   "(recorded with its topology); e.g. train_cnn=2x2, or train_cnn=fit for as "
                   "many as this machine's GPUs (or cores) allow.")
@click.option("--isolate", is_flag=True,
              help="Local: run each step in a virtual environment built from its declared "
                   "environment's conda file (cached by its digest), not on mlpipe's own "
                   "interpreter; the evidence records the interpreter and packages either way.")
@ignore_option
@click.option("--policy", "policy_file", default=None, metavar="FILE",
              help="Commit to this qualification policy before anything runs: its digest and "
                   "text are recorded with the run and sealed into the candidate's bundle; "
                   "qualify and review judge against it (docs/review.md).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error",
              show_default=True,
              help="Exit 1 when the run's candidate carries a finding (compile-time, run-time "
                   "or evidence) of this severity or a worse one, as `check --fail-on`.")
@azure_options
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github", "sarif"]),
              default="text", show_default=True,
              help="json: one JSON document on stdout for scripts (docs/json.md); github: the "
                   "findings as GitHub Actions annotations; sarif: as a SARIF 2.1.0 log for "
                   "code scanning (docs/ci.md). Progress goes to stderr.")
def submit(target: str, inputs: tuple[str, ...], params: tuple[str, ...],
           secrets: tuple[str, ...], run_target: str, no_reuse: bool, max_parallel: int | None,
           local_scale: tuple[str, ...], fmt: str, ignore: str | None, isolate: bool,
           fail_on: str, policy_file: str | None, **azure: Any) -> None:
    """Check a pipeline, run it (here, or on Azure ML), and record everything; then print
    the compile-time diagnostics it ran with and the findings its candidate's evidence will
    carry, and exit 1 when one is of --fail-on severity or worse."""
    ignored = code_set(ignore)
    commitment = None
    if policy_file is not None:
        from mlpipe.evidence.qualification.commitment import commit

        commitment = commit(policy_file)   # a bad policy is refused before anything runs
    if run_target == "azure":
        from mlpipe.backends.azure import options

        options.no_secrets_to_azure(bool(secrets))
        _warn_credentials(assignments(params, "--param"), ignored=ignored)
        azure["poll_interval"] = options.azure_poll_interval(
            no_reuse=no_reuse, max_parallel=max_parallel, local_scale=bool(local_scale),
            isolate=isolate, wait=bool(azure.get("wait")),
            poll_interval=azure.get("poll_interval"))
        azure["wait"] = bool(azure.get("wait"))
        azure["offline"] = bool(azure.get("offline"))
        submit_to_workspace(target, {**assignments(inputs, "--input"),
                                     **assignments(params, "--param")}, fmt=fmt,
                            ignore=ignored, fail_on=fail_on, commitment=commitment, **azure)
        return
    from mlpipe.backends.local import options as local
    from mlpipe.secret import from_environment

    local.check_local([AZURE_FLAGS[k] for k, v in azure.items() if v not in (None, False)])
    given = local.local_params(assignments(params, "--param"),
                                 from_environment(assignments(secrets, "--secret")))
    _submit_local(target, assignments(inputs, "--input"), given, no_reuse, max_parallel,
                  local.local_scales(assignments(local_scale, "--local-scale")), fmt, ignored,
                  isolate, fail_on, commitment)


def _warn_credentials(params: dict[str, Any], spec: Any = None, *,
                      ignored: set[str] | frozenset[str] = frozenset()) -> None:
    """The ``--param`` values recorded in clear that look like credentials (MP961), through
    the diagnostics renderer; and a Param[Secret] given with --param (not recorded, but the
    command line shows it). Nothing when ``--ignore`` names MP961."""
    from mlpipe.checks.credentials import secrets_on_command_line, submitted_credentials
    from mlpipe.codes import CREDENTIAL_IN_RECORDED_VALUE

    if CREDENTIAL_IN_RECORDED_VALUE.code in ignored:
        return

    for name in secrets_on_command_line(params, spec):
        click.echo(f"warning: --param {name} gives a secret on the command line, where "
                   f"other users of this machine (ps) and your shell history see it\n"
                   f"  help: pass it with --secret {name}=ENV_VAR", err=True)
    for diagnostic in submitted_credentials(params, spec):
        click.echo(diagnostic.render(), err=True)


def _submit_local(target: str, inputs: dict[str, str], params: dict[str, Any], no_reuse: bool,
                  max_parallel: int | None, scale: dict[str, tuple[int, int] | str],
                  fmt: str = "text", ignored: set[str] | frozenset[str] = frozenset(),
                  isolate: bool = False, fail_on: str = "error",
                  commitment: dict[str, Any] | None = None) -> None:
    import contextlib
    import signal

    from mlpipe.backends.local.executor import LocalExecutor
    from mlpipe.diagnostics import ChecksFailed, render_text
    from mlpipe.errors import StepFailed
    from mlpipe.evidence.qualification.gate import run_report
    from mlpipe.graph import compile_pipeline
    from mlpipe.loader import load_spec

    def _stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _stop)
    executor = None
    try:
        spec, found = load_spec(target)
        _warn_credentials(params, spec, ignored=ignored)
        graph = compile_pipeline(spec)
        executor = LocalExecutor(max_parallel=max_parallel, reuse=not no_reuse,
                                 local_scale=scale, isolate=isolate, commitment=commitment)
        result = executor.submit(graph, inputs=inputs, params=params, diagnostics=found,
                                 ignore=ignored)
    except ChecksFailed as err:
        click.echo(render_text(err.diagnostics), err=True)
        raise
    except StepFailed:
        if executor is not None and executor.run_id is not None:
            with contextlib.redirect_stdout(sys.stderr):   # the failure is stderr's story
                show_report(run_report(executor.location.url, executor.run_id, None))
        raise
    except KeyboardInterrupt:
        begun = executor.run_id if executor is not None else None
        click.echo(f"error: interrupted; run {begun} is recorded as interrupted" if begun else
                   "error: interrupted before a run was recorded; nothing was recorded",
                   err=True)
        sys.exit(EXIT_INTERRUPTED)
    report = run_report(executor.location.url, result.run_id, result.candidate_id)
    if fmt == "json":
        import json

        from mlpipe.evidence.storage.ci import ci_provenance

        click.echo(json.dumps({
            "format": "mlpipe.submit/1", "run_id": result.run_id, "target": "local",
            "pipeline": graph.spec.name, "pipeline_digest": graph.spec.digest,
            "status": result.status, "job_name": None, "studio_url": None,
            "azure_status": None, "experiment": None, "workspace": None,
            "candidate_id": result.candidate_id, "failed_steps": [], "ci": ci_provenance(),
            **gate_document(report, fail_on)}, indent=2, sort_keys=True))
    elif fmt in ("github", "sarif"):
        from mlpipe.cli.checking import pipeline_place

        click.echo(f"run {result.run_id} {result.status}"
                   + (f", candidate {result.candidate_id}" if result.candidate_id else ""),
                   err=True)
        show_codescan(report, fmt, executor.location.url, pipeline_place(graph.spec, target))
    else:
        click.echo(f"run {result.run_id} {result.status}")
        if result.candidate_id:
            click.echo(f"candidate {result.candidate_id}")
        show_report(report)
    gate(report, fail_on)


def gate_document(report: Any, fail_on: str) -> dict[str, Any]:
    """The keys ``submit --format json`` adds for the findings (docs/json.md)."""
    return {"findings": report.findings, "fail_on": fail_on,
            "failing_findings": len(report.failing(fail_on))}


def show_outcome(report: Any, fmt: str, document: dict[str, Any], target: str) -> None:
    """An Azure submit's findings in ``fmt``: the JSON document, annotations or SARIF, or the
    text report."""
    if fmt == "json":
        import json

        click.echo(json.dumps(document, indent=2, sort_keys=True))
    elif fmt in ("github", "sarif"):
        from mlpipe.cli.checking import pipeline_place
        from mlpipe.evidence.storage.config import locate

        show_codescan(report, fmt, locate().url, pipeline_place(None, target))
    else:
        show_report(report)


def show_codescan(report: Any, fmt: str, url: str, where: tuple[str, int]) -> None:
    """The findings a run's candidate carries as GitHub annotations or a SARIF log (stdout),
    each compile-time one at the place its diagnostic gave (the run's stored checks)."""
    from mlpipe.cli.codescan import render
    from mlpipe.evidence.qualification.gate import run_report

    known = {(d["code"], d["message"]): (d["file"], d.get("line"))
             for d in run_report(url, report.run, None).findings if d.get("file")}
    click.echo(render(fmt, report.findings, where, known), nl=False)


def show_report(report: Any) -> None:
    """The findings a run's candidate carries, after its ids (stdout)."""
    from mlpipe.evidence.qualification.gate import finding_line
    from mlpipe.evidence.records.findings import severities

    if not report.findings:
        if report.candidate:
            click.echo("no findings: no compile-time, run-time or evidence finding")
        return
    counts = severities(report.findings)
    said = ", ".join(f"{n} {sev}{'' if n == 1 else 's'}" for sev, n in counts.items() if n)
    click.echo(f"the candidate's evidence will carry {said} (mlpipe evidence "
               f"{report.candidate}):" if report.candidate else
               f"the compile-time checks it ran with found {said}:")
    for f in report.findings:
        click.echo("  " + finding_line(f, report.run).replace("\n", "\n  "))


def gate(report: Any, fail_on: str) -> None:
    """Exit 1 when a finding is of ``fail_on`` severity or worse (as ``check --fail-on``)."""
    failing = report.failing(fail_on)
    if not failing:
        return
    what = f"candidate {report.candidate}" if report.candidate else f"run {report.run}"
    codes = ", ".join(sorted({f["code"] for f in failing}))
    click.echo(f"error: {what} carries {len(failing)} finding{'' if len(failing) == 1 else 's'}"
               f" of severity {fail_on} or worse ({codes}): it is not ready for review "
               f"(--fail-on {fail_on})", err=True)
    sys.exit(EXIT_PROBLEMS)


FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                      show_default=True, help="json: for scripts (docs/json.md).")


def _json(document: dict[str, Any]) -> None:
    import json

    click.echo(json.dumps(document, indent=2, sort_keys=True))


@main.command()
@click.option("--pipeline", default=None, help="Only the runs of this pipeline.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0),
              help="How many runs, newest first.")
@FORMAT
def runs(pipeline: str | None, limit: int, fmt: str) -> None:
    """List recorded runs, newest first."""
    from mlpipe.evidence.records.summaries import runs_document
    from mlpipe.evidence.records.views import runs_table
    from mlpipe.evidence.reports.terminal import escape

    with open_evidence_reader() as s:
        found = s.pipeline_runs(pipeline, limit=limit)
        if fmt == "json":
            _json(runs_document(found))
        else:
            click.echo(escape(runs_table(found)))


@main.command()
@click.argument("run")
@click.option("--why", "why_step", default=None, metavar="STEP",
              help="Explain why STEP was reused or re-run.")
@FORMAT
def show(run: str, why_step: str | None, fmt: str) -> None:
    """Show a run: its steps with status, reused-from and duration."""
    from mlpipe.evidence.records.summaries import run_document
    from mlpipe.evidence.records.views import get_run, show_run, why
    from mlpipe.evidence.reports.terminal import escape

    if why_step and fmt == "json":
        raise UsageError("--why has no JSON form", hint="drop --format json, or --why")
    with open_evidence_reader() as s:
        found = get_run(s, run)
        if fmt == "json":
            _json(run_document(s, found))
        else:
            click.echo(escape(why(s, found, why_step) if why_step else show_run(s, found)))


@main.command()
@click.argument("run")
@click.argument("step")
@click.option("--rank", type=click.IntRange(min=0), default=None, metavar="N",
              help="The log of rank N of a distributed step.")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing as the step writes, until it ends.")
def logs(run: str, step: str, rank: int | None, follow: bool) -> None:
    """Print the log of STEP in RUN (a reused step: the log of the run it reused), or one
    rank's; --follow prints a running step's log as it is written."""
    from mlpipe.evidence.records.logs import follow as follow_logs
    from mlpipe.evidence.records.logs import read_all, step_logs
    from mlpipe.evidence.records.views import get_run

    with open_evidence_reader() as s:
        found = step_logs(s, get_run(s, run), step, rank)
        if found.note:
            click.echo(f"note: {found.note}", err=True)
        if not follow:
            sys.stdout.write(read_all(found))
            sys.stdout.flush()
            return
        for text in follow_logs(s, found):
            sys.stdout.write(text)
            sys.stdout.flush()


@main.command()
@click.argument("run_a")
@click.argument("run_b")
@FORMAT
def diff(run_a: str, run_b: str, fmt: str) -> None:
    """What differs between two runs: code (a unified diff of the source), environment, data,
    parameters, reuse, metrics. Exit 0 when they do not differ, 1 when they do (as diff(1))."""
    from mlpipe.evidence.records.summaries import diff_document
    from mlpipe.evidence.records.views import diff_runs, get_run, run_differences, runs_differ
    from mlpipe.evidence.reports.terminal import escape

    with open_evidence_reader() as s:
        a, b = get_run(s, run_a), get_run(s, run_b)
        if fmt == "json":
            document = diff_document(s, a, b)
            _json(document)
            differ = not document["identical"]
        else:
            found = run_differences(s, a, b)
            click.echo(escape(diff_runs(s, a, b, found)))
            differ = runs_differ(found)
    if differ:
        sys.exit(1)


@main.group()
def store() -> None:
    """Manage the evidence store."""


@store.command("upgrade")
def store_upgrade() -> None:
    """Bring the configured store's schema to this mlpipe's version."""
    from mlpipe.evidence import locate
    from mlpipe.evidence.storage.migrate import HEAD
    from mlpipe.evidence.storage.store import Store

    opened = Store.open(locate().url, auto_upgrade=True)
    click.echo(f"evidence store {opened.url} is at schema revision {HEAD}")


@main.command()
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@click.option("--older-than", "older_than", type=float, default=None, metavar="DAYS",
              help="Keep artifacts a step used within DAYS days (default: keep only what "
                   "candidates and running runs need).")
@click.option("-v", "--verbose", is_flag=True, help="List each artifact and folder.")
@FORMAT
def gc(dry_run: bool, older_than: float | None, verbose: bool, fmt: str) -> None:
    """Free artifact-store space and scratch folders, keeping everything a candidate under
    review or accepted needs to be verified (its model, evaluation, and the inputs and
    intermediate outputs its bundle cites) and what running runs use. Removes no store row:
    a step whose outputs were removed re-runs."""
    from mlpipe.backends.local.gc import collect, human
    from mlpipe.evidence.storage.config import locate

    report = collect(locate(), older_than_days=older_than, dry_run=dry_run)
    if fmt == "json":
        _json(report.to_dict())
        return
    verb = "would remove" if dry_run else "removed"
    if verbose:
        for item in report.artifacts:
            used = item.last_used.strftime("%Y-%m-%d") if item.last_used else "never"
            click.echo(f"  {item.digest}  {human(item.size)}  last used {used}")
        for item in report.scratch:
            click.echo(f"  {item.path}  {human(item.size)}")
    count = len(report.artifacts)
    click.echo(f"{verb} {count} artifact{'' if count == 1 else 's'} "
               f"({human(sum(r.size for r in report.artifacts))}) and {len(report.scratch)} "
               f"scratch folder{'' if len(report.scratch) == 1 else 's'} "
               f"({human(sum(r.size for r in report.scratch))}): "
               f"{human(report.freed)} {'to free' if dry_run else 'freed'}")
    cands = len(report.candidates)
    click.echo(f"kept {report.kept_protected} artifact"
               f"{'' if report.kept_protected == 1 else 's'} needed by {cands} candidate"
               f"{'' if cands == 1 else 's'} under review or accepted"
               + (f" and {len(report.running)} running run"
                  f"{'' if len(report.running) == 1 else 's'}" if report.running else ""))
    if older_than is not None:
        click.echo(f"kept {report.kept_recent} artifact{'' if report.kept_recent == 1 else 's'}"
                   f" used in the last {older_than:g} day{'' if older_than == 1 else 's'}")
    if report.rejected:
        click.echo(f"not protected: {len(report.rejected)} rejected candidate"
                   f"{'' if len(report.rejected) == 1 else 's'}")
