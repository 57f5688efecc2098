"""A model card bound to the evidence (``mlpipe evidence C --format model-card``): a Markdown
card and a CycloneDX 1.7 ML-BOM, both written from one sealed bundle and citing its digest.

Reads the bundle only (and the policy file the decision cites, for its description); judges
nothing: its findings are ``findings.every_finding``'s, as every other view's are. The ML-BOM
is built with cyclonedx-python-lib; that library (11.x) does not model a component's
``modelCard`` yet, so the card's object is added to the library's JSON and the whole document
is checked with the library's own CycloneDX 1.7 schema validator. How each statement is known
(``tiers``) is the card's last table and the ML-BOM's ``citations`` (``cardtiers``).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mlpipe.errors import StoreError, UsageError
from mlpipe.evidence.records.findings import every_finding, where_from
from mlpipe.evidence.reports.render import bar_text, decision_text

#: The CycloneDX property namespace mlpipe's facts go under.
NS = "mlpipe"


@dataclass(slots=True)
class Card:
    """The files a model card was written to, and the bundle they cite."""

    bundle: str
    markdown: Path
    bom: Path


def _policy_description(decision: dict[str, Any] | None) -> str | None:
    policy = (decision or {}).get("policy") or {}
    from mlpipe.userfiles import load_yaml, read_text

    try:   # a policy file gone, hostile or no longer parsing says nothing here
        doc = load_yaml(read_text(policy["file"], what="policy", hint=""),
                        file=policy["file"], hint="")
    except (KeyError, TypeError, UsageError):
        return None
    text = doc.get("description") if isinstance(doc, dict) else None
    return str(text) if text else None


def _facts(url: str, ref: str) -> tuple[str, dict[str, Any], str | None]:
    from mlpipe.evidence.bundles.seal import sealed_bundle
    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.store import Store

    sealed = sealed_bundle(url, ref)
    statement = sealed.statement
    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            row = s.get(m.PipelineSpecRow, statement["predicate"]["pipeline"]["digest"])
            description = None if row is None else (row.spec or {}).get("description")
    finally:
        store.close()
    return sealed.digest, statement, description


def _metrics(p: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(p["evaluation"]["metrics"])
    if not found and p["evaluation"].get("report"):
        found = list(p["evaluation"]["report"].get("metrics") or [])
    return found


def markdown(digest: str, statement: dict[str, Any], pipeline_description: str | None) -> str:
    """The Markdown model card of the sealed bundle ``digest``."""
    p = statement["predicate"]
    cand = p["candidate"]
    decisions = p["review"]["decisions"]
    last = decisions[-1] if decisions else None
    policy_text = _policy_description(last)
    lines = [f"# Model card: {cand['name'] or p['pipeline']['name']} ({cand['id']})", "",
             f"Bound to evidence bundle `{digest}` (`mlpipe evidence {cand['id']} --verify` "
             f"checks it and every file it names). Model `{cand['model']}`.", "",
             "## Intended use", ""]
    lines.append(f"- Pipeline `{p['pipeline']['name']}` (`{p['pipeline']['digest']}`)"
                 + (f": {pipeline_description}" if pipeline_description else
                    ": the pipeline states no description"))
    lines.append(f"- Qualification bar: {bar_text(p)}.")
    if last is not None and last.get("policy"):
        pol = last["policy"]
        lines.append(f"- Qualified against policy `{pol['name']}` (`{pol['digest']}`)"
                     + (f": {policy_text}" if policy_text else ""))
        said = decision_text(pol)
        if said:
            lines.append(f"- {'**' + said + '**' if pol.get('deviation') else said}.")
    else:
        lines.append("- No qualification policy is cited by a decision.")
    lines += ["", "## Training and evaluation data", "",
              "| input | reference | digest | files | bytes |", "|---|---|---|---|---|"]
    for snap in p["snapshots"]:
        lines.append(f"| {snap['input']} | `{snap['reference']}` | `{snap['digest']}` | "
                     f"{snap['file_count'] if snap['file_count'] is not None else 'unknown'} | "
                     f"{snap['size'] if snap['size'] is not None else 'unknown'} |")
    if not p["snapshots"]:
        lines.append("| (none recorded) | | | | |")
    lines += ["", f"Trained by step `{p['training']['step']}`, evaluated by step "
                  f"`{p['evaluation']['step']}` of run `{p['run']['id']}` ({p['run']['target']}).",
              "", "## Metrics", "", "| metric | value | scope | population |", "|---|---|---|---|"]
    for x in _metrics(p):
        lines.append(f"| {x['name']} | {x['value']:g} | {x.get('scope') or 'unknown'} | "
                     f"{x.get('population') or 'unknown'} |")
    if not _metrics(p):
        lines.append("| (no evaluation metric recorded) | | | |")
    lines += ["", "## Limitations (the bundle's findings)", ""]
    found = every_finding(p)
    for f in found:
        lines.append(f"- **{f['severity']} {f['code']} {f['name']}** "
                     f"({where_from(f, p['run']['id'])}): {f['message']}")
    if not found:
        lines.append("- No finding: no compile-time, run-time or evidence finding.")
    lines += ["", "## Decision", ""]
    if last is None:
        lines.append("- Unreviewed: no decision is recorded.")
    else:
        lines.append(f"- **{last['verdict']}** by {last['by']} at {last['decided_at']}, citing "
                     f"bundle `{last['bundle']}`: {last['note']}")
    code = p.get("code") or {}
    lines += ["", "## Provenance", "",
              f"- Code revision: `{code.get('commit') or 'unknown'}`"
              + (" (uncommitted changes)" if code.get("dirty") else ""),
              f"- Sealed {p.get('sealed_at')} by {p['generator']}.", ""]
    from mlpipe.evidence.reports.cardtiers import card_lines

    return "\n".join(lines + card_lines(statement))


def ml_bom(digest: str, statement: dict[str, Any], pipeline_description: str | None) -> str:
    """The CycloneDX 1.7 ML-BOM (JSON) of the sealed bundle ``digest``: the model as the BOM's
    subject with its files' hashes and its ``modelCard``, the data snapshots as data components.

    Raises:
        UsageError: cyclonedx-python-lib is not installed.
    """
    import importlib

    try:
        # Any: the library's serialisation decorators hide its constructors from type checkers
        model_mod: Any = importlib.import_module("cyclonedx.model")
        bom_mod: Any = importlib.import_module("cyclonedx.model.bom")
        comp_mod: Any = importlib.import_module("cyclonedx.model.component")
        JsonV1Dot7: Any = importlib.import_module("cyclonedx.output.json").JsonV1Dot7
    except ImportError:
        raise UsageError("the ML-BOM needs cyclonedx-python-lib, which is not installed here",
                         hint="pip install 'mlpipe[models]'") from None
    HashAlgorithm, HashType, Property = (model_mod.HashAlgorithm, model_mod.HashType,
                                         model_mod.Property)
    Bom, BomMetaData = bom_mod.Bom, bom_mod.BomMetaData
    Component, ComponentType = comp_mod.Component, comp_mod.ComponentType
    p = statement["predicate"]
    cand = p["candidate"]
    model_ref = f"model-{cand['id']}"
    files = [Component(type=ComponentType.FILE, name=f["name"], bom_ref=f"file-{f['name']}",
                       hashes=[HashType(alg=HashAlgorithm.SHA_256,
                                        content=f["digest"]["sha256"].removeprefix("sha256:")),
                               HashType(alg=HashAlgorithm.BLAKE3,
                                        content=f["digest"]["blake3"].removeprefix("blake3:"))])
             for f in statement["subject"]]
    model = Component(type=ComponentType.MACHINE_LEARNING_MODEL,
                      name=cand["name"] or p["pipeline"]["name"], version=cand["id"],
                      bom_ref=model_ref, description=pipeline_description,
                      components=files,
                      properties=[Property(name=f"{NS}:model-digest", value=cand["model"]),
                                  Property(name=f"{NS}:bundle", value=digest),
                                  Property(name=f"{NS}:run", value=p["run"]["id"])])
    data = [Component(type=ComponentType.DATA, name=snap["input"],
                      bom_ref=f"data-{snap['input']}",
                      properties=[Property(name=f"{NS}:digest", value=str(snap["digest"])),
                                  Property(name=f"{NS}:reference", value=str(snap["reference"]))])
            for snap in p["snapshots"]]
    sealed_at = p.get("sealed_at")
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"mlpipe:{digest}"),
              metadata=BomMetaData(component=model, timestamp=datetime.fromisoformat(sealed_at)
                                   if sealed_at else None,
                                   properties=[Property(name=f"{NS}:bundle", value=digest)]),
              components=data)
    bom.register_dependency(model, data)   # the model was trained and evaluated on them
    doc = json.loads(JsonV1Dot7(bom).output_as_string())
    decisions = p["review"]["decisions"]
    last = decisions[-1] if decisions else None
    use = [f"pipeline {p['pipeline']['name']}: {pipeline_description or 'no description'}"]
    use.append(f"qualification bar: {bar_text(p)}")
    if last and last.get("policy"):
        use.append(f"qualified against policy {last['policy']['name']}"
                   + (f": {_policy_description(last)}" if _policy_description(last) else ""))
        if decision_text(last["policy"]):
            use.append(str(decision_text(last["policy"])))
    doc["metadata"]["component"]["modelCard"] = {
        "bom-ref": f"card-{cand['id']}",
        "modelParameters": {
            "datasets": [{"ref": f"data-{snap['input']}"} for snap in p["snapshots"]]},
        "quantitativeAnalysis": {"performanceMetrics": [
            {"type": x["name"], "value": f"{x['value']:g}",
             "slice": f"{x.get('scope') or 'unknown'} on {x.get('population') or 'unknown'}"}
            for x in _metrics(p)]},
        "considerations": {
            "useCases": use,
            "technicalLimitations": [
                f"{f['severity']} {f['code']} {f['name']} ({where_from(f, p['run']['id'])}): "
                f"{f['message']}" for f in every_finding(p)]},
        "properties": [{"name": f"{NS}:bundle", "value": digest},
                       {"name": f"{NS}:decision",
                        "value": "unreviewed" if last is None else
                        f"{last['verdict']} by {last['by']} citing {last['bundle']}"}]}
    from mlpipe.evidence.reports.cardtiers import cite

    return json.dumps(cite(doc, statement), indent=2, sort_keys=True) + "\n"


def validate_bom(text: str) -> None:
    """Check an ML-BOM against CycloneDX's own 1.7 JSON schema (the library's validator).

    Raises:
        StoreError: the document does not match the schema (a defect of mlpipe).
    """
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_7).validate_str(text)
    if error is not None:
        raise StoreError(f"the ML-BOM does not match the CycloneDX 1.7 schema: {error}",
                         hint="report this as an mlpipe defect")


def write_card(url: str, ref: str, path: str | Path) -> Card:
    """Write the Markdown card of the candidate's newest sealed bundle to ``path`` and its
    ML-BOM beside it (``NAME.cdx.json``), the ML-BOM validated against CycloneDX 1.7 first, so
    nothing is written when it does not match. Both are written to temporary files beside
    their places, then renamed, the ML-BOM first: a card is never left without its ML-BOM.

    Raises:
        UsageError: no such candidate; cyclonedx-python-lib is missing; a file not writable.

    Example:
        >>> write_card(url, "c-3f9a", "build/model-card.md").bom
        PosixPath('build/model-card.cdx.json')
    """
    digest, statement, description = _facts(url, ref)
    card = Path(path)
    bom_path = card.with_name(card.name.removesuffix(".md") + ".cdx.json")
    bom = ml_bom(digest, statement, description)
    validate_bom(bom)
    try:
        card.parent.mkdir(parents=True, exist_ok=True)
        _write_together({bom_path: bom, card: markdown(digest, statement, description)})
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or card}: {exc.strerror or exc}",
                         hint="choose another path") from None
    return Card(digest, card, bom_path)


def _write_together(files: dict[Path, str]) -> None:
    """Write every file or none: each to a temporary file beside it (synced), then all renamed
    in order; a rename that fails removes what this call had put in place of a missing file."""
    import os
    import tempfile

    temps: dict[Path, str] = {}
    placed: list[Path] = []
    existed: dict[Path, bool] = {}
    try:
        for path, text in files.items():
            fd, temps[path] = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(temps[path], 0o644)
        existed = {path: path.exists() for path in files}
        for path in files:
            try:
                os.replace(temps[path], path)
            except OSError as exc:   # named by its place, not the temporary file
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            del temps[path]
            placed.append(path)
    except BaseException:
        for tmp in temps.values():
            Path(tmp).unlink(missing_ok=True)
        for path in placed:
            if not existed.get(path, True):
                path.unlink(missing_ok=True)
        raise


__all__ = ["Card", "markdown", "ml_bom", "validate_bom", "write_card"]
