"""Commands that run pipelines and read the evidence store: submit, runs, show, logs, diff,
store, gc.

SQLAlchemy (and the executor) are imported inside each command, so ``mlpipe --help`` stays light.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from mlpipe.cli.azure import azure_options
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
    import signal

    from mlpipe.commands.request import Interrupted, SubmitHooks, SubmitRequest
    from mlpipe.commands.submission import submit as submit_pipeline
    from mlpipe.diagnostics import ChecksFailed, render_text
    from mlpipe.errors import StepFailed

    request = SubmitRequest(
        target, run_target, assignments(inputs, "--input"), assignments(params, "--param"),
        assignments(secrets, "--secret"), no_reuse, max_parallel,
        assignments(local_scale, "--local-scale"), isolate, frozenset(code_set(ignore)),
        policy_file, azure)
    out = sys.stdout if fmt == "text" or run_target == "local" else sys.stderr

    def submitted(run: Any) -> None:
        click.echo(f"submitted run {run.run_id} as Azure ML job {run.job_name} ({run.status})",
                   file=out)
        if run.studio_url:
            click.echo(f"studio: {run.studio_url}", file=out)

    def failed(report: Any) -> None:
        with contextlib.redirect_stdout(sys.stderr):   # the failure is stderr's story
            show_report(report)

    def progress(run: Any) -> Any:
        from mlpipe.cli.progress import progress_view

        return progress_view(out, title=f"run {run.run_id}")

    def _stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    if run_target == "local":
        signal.signal(signal.SIGTERM, _stop)
    try:
        done = submit_pipeline(request, hooks=SubmitHooks(
            warn=lambda text: click.echo(text, err=True), submitted=submitted,
            progress=progress, failed=failed), azure_service=_workspace_service)
    except ChecksFailed as err:
        click.echo(render_text(err.diagnostics), err=True)
        raise
    except (StepFailed, Interrupted) as err:
        if isinstance(err, Interrupted):
            click.echo(("error: " if run_target == "local" else "") + err.message, err=True)
            sys.exit(EXIT_INTERRUPTED)
        raise
    _show_submitted(done, fmt, fail_on, target, out)


def _workspace_service(workspace: Any) -> Any:
    from mlpipe.cli.azure import workspace_service

    return workspace_service(workspace)


def _show_submitted(done: Any, fmt: str, fail_on: str, target: str, out: Any) -> None:
    """A submit's outcome in ``fmt``, then its exit: 1 when an Azure job did not complete
    or a finding is of ``fail_on`` severity or worse."""
    report = done.report
    if done.azure is not None and done.waited is None:
        click.echo(f"follow it with: mlpipe sync {done.run_id}  (submitted, not completed)",
                   file=out)
    waited = done.waited
    if waited is not None:
        click.echo(f"run {done.run_id} {done.status}  (Azure ML job {waited.job_name}: "
                   f"{waited.job_status})", file=out)
        for f in waited.failed:
            click.echo(f"  step {f.step} {f.status}: {f.message or 'no status message'}"
                       + (f"\n    logs: {f.log_url}" if f.log_url else ""), file=out)
        if waited.job_status != "Completed" and not waited.failed:
            click.echo(f"  the pipeline job ended {waited.job_status} with no failed step",
                       file=out)
        if done.candidate_id:
            click.echo(f"candidate {done.candidate_id}", file=out)
    if fmt == "json":
        import json

        click.echo(json.dumps(done.document(fail_on), indent=2, sort_keys=True))
    elif fmt in ("github", "sarif"):
        from mlpipe.cli.checking import pipeline_place

        if done.azure is None:
            click.echo(f"run {done.run_id} {done.status}"
                       + (f", candidate {done.candidate_id}" if done.candidate_id else ""),
                       err=True)
        show_codescan(report, fmt, done.store_url, pipeline_place(done.spec, target))
    else:
        if done.azure is None:
            click.echo(f"run {done.run_id} {done.status}")
            if done.candidate_id:
                click.echo(f"candidate {done.candidate_id}")
        show_report(report)
    if waited is not None and waited.outcome.azure_status != "Completed":
        sys.exit(EXIT_PROBLEMS)
    gate(report, fail_on)


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
