"""Commands for qualification reviewers: candidates, evidence (text, JSON, Markdown, HTML, verify).

Parse, call ``mlpipe.evidence``, render: which bundle is shown and when one is sealed is the
library's decision (``seal.sealed_bundle``, ``verify.verify_bundle``). SQLAlchemy and the
bundle modules are imported inside each command.
"""
from __future__ import annotations

import sys

import click

from mlpipe.cli.base import EXIT_PROBLEMS, fail, main, open_evidence_reader
from mlpipe.cli.keys import load_configured_trust, trust_option


@main.command()
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0),
              help="How many, newest first.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: for scripts (docs/json.md).")
@trust_option
def candidates(limit: int, fmt: str, trust_file: str | None) -> None:
    """List model candidates, newest first; SIGNED says who signed each one's newest bundle
    (judged by the trust policy when there is one; `evidence C --verify --trust` checks it)."""
    from mlpipe.evidence.records.summaries import candidates_document
    from mlpipe.evidence.records.views import candidates_table
    from mlpipe.evidence.reports.terminal import escape

    trust = load_configured_trust(trust_file)
    with open_evidence_reader() as s:
        rows = s.candidate_rows(limit=limit)
    from mlpipe.evidence.records.views import signature_label, signature_state

    local = _local_keyid()
    states = {c.id: signature_state(c.signer, c.findings is not None, trust, local)
              for c in rows}
    if fmt == "json":
        import json

        click.echo(json.dumps(candidates_document(rows, states), indent=2, sort_keys=True))
    else:
        click.echo(escape(candidates_table(rows, {k: signature_label(v)
                                                  for k, v in states.items()})))


def _local_keyid() -> str | None:
    """The key id of this home's first-use key, when it was generated (mlpipe wrote its
    ``.pub`` in normal form, so its sha256 is the id, without importing cryptography)."""
    from mlpipe.digests import sha256_file
    from mlpipe.evidence.signatures.keys import LOCAL_KEY, public_path
    from mlpipe.evidence.storage.config import locate

    try:
        return sha256_file(public_path(locate().home / LOCAL_KEY))
    except OSError:
        return None


@main.command()
@click.argument("candidate")
@click.option("--format", "fmt",
              type=click.Choice(["text", "json", "markdown", "html", "dsse", "model-card"]),
              default="text", show_default=True,
              help="json prints the exact sealed bytes (their sha256 is the bundle digest); "
                   "dsse the DSSE envelope that signs them (docs/signing.md); model-card "
                   "writes a Markdown card to -o FILE.md and a CycloneDX ML-BOM beside it, "
                   "both citing the bundle.")
@click.option("--verify", is_flag=True,
              help="Re-hash every artifact and snapshot, compare the store with the sealed "
                   "bundle, recompute its digest; exit 1 on any mismatch.")
@click.option("--fetch", is_flag=True,
              help="With --verify: download what lives only on Azure ML (the run's outputs "
                   "the bundle names, from the workspace the run was submitted to) and re-hash "
                   "it against its recorded digests.")
@click.option("--rebuild", is_flag=True,
              help="Rebuild the bundle from the store and seal a new one (recording the "
                   "previous digest) if anything changed; by default a sealed bundle is shown "
                   "as sealed.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to this file instead of stdout.")
@click.option("--export", "export_dir", default=None, metavar="DIR",
              type=click.Path(file_okay=False),
              help="Write the bundle, its DSSE envelope, each signed decision's VSA and the "
                   "model signature to the new folder DIR (docs/signing.md#exports).")
@trust_option
def evidence(candidate: str, fmt: str, verify: bool, fetch: bool, rebuild: bool,
             output: str | None, trust_file: str | None, export_dir: str | None) -> None:
    """The verifiable evidence bundle of CANDIDATE (an id or an unambiguous prefix).

    Exit codes: 0 the bundle has no error-severity finding; 1 it has one (the bundle is still
    shown in full), or with --verify any mismatch (with a trust policy, also a signature it does
    not accept: MP730-MP737); 2 an unknown candidate or a usage error.

    The first call builds the bundle from the store and seals it; later calls show that sealed
    bundle (--rebuild seals a new one if the store changed; --verify checks everything here,
    and with --fetch also what lives only on Azure ML).
    """
    from mlpipe.evidence.storage.config import locate

    if fmt == "model-card" and not verify:
        from mlpipe.cli.promotion import model_card

        model_card(candidate, output)
        return
    if (fetch or trust_file) and not verify:
        from mlpipe.errors import UsageError

        flag = "--fetch" if fetch else "--trust FILE"
        raise UsageError(f"{flag.split()[0]} applies to --verify only",
                         hint=f"run `mlpipe evidence {candidate} --verify {flag}`")
    if export_dir is not None:
        from mlpipe.evidence.bundles.export import export

        done = export(locate().url, candidate, export_dir)
        click.echo(f"wrote {len(done.files)} files to {done.folder}:")
        for name, what in sorted(done.files.items()):
            click.echo(f"  {name:28} {what}")
        return
    if verify:
        import contextlib
        import json

        from mlpipe.evidence.bundles.verify import verify_bundle
        from mlpipe.evidence.reports.render import render_verification

        with contextlib.ExitStack() as stack:
            fetcher = None
            if fetch:
                from mlpipe.cli.azure import output_fetcher

                fetcher = stack.enter_context(output_fetcher())
            result = verify_bundle(locate().url, candidate, fetch=fetcher,
                                   trust=load_configured_trust(trust_file)).to_dict()
        text = (json.dumps(result, indent=2, sort_keys=True) if fmt == "json"
                else render_verification(result))
        _emit(text.encode() + b"\n", output)
        sys.exit(0 if result["ok"] else EXIT_PROBLEMS)
    url = locate().url
    if not rebuild and fmt != "dsse":
        from mlpipe.evidence.records.fastpath import read_sealed

        found = read_sealed(url, candidate)  # a sealed bundle, without SQLAlchemy
        if found is not None:
            _gate(_show(fmt, *found, output))
            return
    from mlpipe.evidence.bundles.seal import sealed_bundle

    sealed = sealed_bundle(url, candidate, rebuild=rebuild)
    if fmt == "dsse":
        from mlpipe.evidence.signatures.signing import stored_envelope

        _emit(stored_envelope(url, sealed.digest), output)
        return
    if sealed.changes:
        click.echo(f"warning: the store no longer matches bundle {sealed.previous}; sealed "
                   f"{sealed.digest} recording it as previous. What changed:", err=True)
        for line in sealed.changes:
            click.echo(f"  {line}", err=True)
    _gate(_show(fmt, sealed.digest, sealed.content, output))


def _gate(shown: tuple[str, list[str]]) -> None:
    """The findings gate: exit 1, after the bundle was shown in full, when it has an
    error-severity finding (docs/evidence.md, "Exit codes")."""
    candidate, errors = shown
    if errors:
        click.echo(f"error: candidate {candidate} has "
                   f"{len(errors)} error-severity finding{'' if len(errors) == 1 else 's'} "
                   f"({', '.join(sorted(set(errors)))}): it is not ready for review", err=True)
        sys.exit(EXIT_PROBLEMS)


def _show(fmt: str, digest: str, content: bytes, output: str | None) -> tuple[str, list[str]]:
    """Show a sealed bundle; its candidate's id and the codes of its error-severity findings.

    Its integrity is its digest (bytes altered in the store are refused in every format); the
    schema was checked when it was sealed, and is checked again here only when the bytes
    cannot be read as a bundle (a digest recomputed over altered bytes), to say why."""
    from mlpipe.errors import StoreError
    from mlpipe.evidence.records.fastpath import sealed_statement
    from mlpipe.evidence.records.findings import every_finding

    try:
        statement = sealed_statement(digest, content)
        predicate = statement["predicate"]
        shown = (str(predicate["candidate"]["id"]),
                 [f["code"] for f in every_finding(predicate) if f["severity"] == "error"])
        if fmt == "json":
            _emit(content, output)
            return shown
        text = _render(fmt, statement, digest)
    except StoreError as err:  # altered bytes: a problem found, not a store out of reach
        fail(err, EXIT_PROBLEMS)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError):
        from mlpipe.evidence.bundles.seal import load_sealed

        try:
            load_sealed(digest, content)
        except StoreError as err:
            fail(err, EXIT_PROBLEMS)
        raise  # a bundle that matches its schema and still cannot be rendered: a defect
    _emit(text.rstrip("\n").encode() + b"\n", output)
    return shown


def _render(fmt: str, statement: dict, digest: str) -> str:
    from mlpipe.evidence.reports.render import render_markdown, render_text

    if fmt == "html":
        from mlpipe.evidence.reports.html import render_html
        return render_html(statement, digest)
    return (render_markdown if fmt == "markdown" else render_text)(statement, digest)


def _emit(content: bytes, output: str | None) -> None:
    if output is None:
        sys.stdout.buffer.write(content)
        sys.stdout.flush()
        return
    try:
        with open(output, "wb") as fh:
            fh.write(content)
    except OSError as exc:
        from mlpipe.errors import UsageError

        raise UsageError(f"cannot write {output}: {exc.strerror}",
                         hint="choose another path") from None
