"""Building a candidate's evidence bundle from the store: an in-toto Statement v1 whose subject
is the model's files and whose predicate holds everything else a reviewer decides on.

Reads the store and hashes the model's files (for the subject); writes nothing, seals nothing
(``seal`` does), judges nothing (``findings`` does).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from mlpipe.digests import file_digests, is_reference
from mlpipe.errors import UsageError
from mlpipe.evidence.records.checkresults import stored_checks
from mlpipe.evidence.records.findings import find, own_findings
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.located import (
    artifact_path,
    remote,
    roots_or_configured,
)
from mlpipe.evidence.storage.roots import ArtifactRoots
from mlpipe.version import __version__

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://mlpipe.dev/evidence-bundle/v1"


def find_candidate(s: Session, ref: str) -> m.CandidateRow:
    """The candidate ``ref`` names: its id or an unambiguous prefix of it.

    Raises:
        UsageError: no candidate, or more than one, has that id or prefix.

    Example:
        >>> find_candidate(s, "c-3f9a").id
        'c-3f9a0c1b22'
    """
    found = s.get(m.CandidateRow, ref)
    if found is not None:
        return found
    matches = list(s.scalars(select(m.CandidateRow.id)
                             .where(m.CandidateRow.id.startswith(ref, autoescape=True))
                             .order_by(m.CandidateRow.id).limit(4)))
    if not matches:
        raise UsageError(f"no candidate {ref!r} in the evidence store (list them with "
                         f"`mlpipe candidates`)")
    if len(matches) > 1:
        shown = ", ".join(matches[:3]) + (" ..." if len(matches) > 3 else "")
        raise UsageError(f"candidate prefix {ref!r} is ambiguous ({shown}); give more of the id")
    found = s.get(m.CandidateRow, matches[0])
    assert found is not None  # its id was just selected in this session
    return found


def files_of(location: str) -> list[tuple[str, str]]:
    """(relative name, absolute path) of every file at ``location`` (a file or a folder)."""
    root = Path(location)
    if not root.is_dir():
        return [(root.name, str(root))]
    found = [(p.relative_to(root).as_posix(), str(p)) for p in root.rglob("*") if p.is_file()]
    return sorted(found)


#: Who took an artifact's content digest (the bundle's ``artifacts[].digest_by``).
BY_MLPIPE, BY_STEP_RUNTIME = "mlpipe", "step-runtime"


def subject(model: m.Artifact, label: str, roots: ArtifactRoots | None = None
            ) -> list[dict[str, Any]]:
    """The in-toto subject: every file of the model artifact with its sha256 and blake3,
    hashed here, or as its step record gave them where the files are not here (an Azure ML
    output: ``Artifact.files``). Empty when the model's files are unknown (only a reference to
    them was recorded: finding MP660 says so). A model in an artifact root is read from this
    home's own root (``roots``, default: the configured ones), fetched from the shared root
    when the own root lacks it.

    Raises:
        UsageError: no root holds the model's files any more.
    """
    here = model.location if remote(model.location) else artifact_path(model, roots)
    if (here is None or not os.path.exists(here)) and model.files:
        return [{"name": f"{label}/{f['name']}",
                 "digest": {"sha256": f["sha256"], "blake3": f["blake3"]}}
                for f in sorted(model.files, key=lambda f: f["name"])]
    if is_reference(model.digest) or (remote(model.location) and model.files is None):
        return []  # nothing here to hash, and no file digests recorded: unknown
    if here is None or not os.path.exists(here):
        key = roots_or_configured(roots).key_for(model.location, model.digest)
        where = model.location if key is None else roots_or_configured(roots).where(key)
        raise UsageError(f"the model artifact {model.digest} is no longer at {where}, "
                         f"so its files cannot be named in a new bundle",
                         hint="restore the artifact store, or verify the sealed bundle with "
                              "`mlpipe evidence CANDIDATE --verify`")
    return [{"name": f"{label}/{rel}", "digest": file_digests(path)}
            for rel, path in files_of(here)]


def _artifact(a: m.Artifact) -> dict[str, Any]:
    """An artifact as the bundle names it. ``remote``: its bytes live only in the backend's
    storage (an Azure ML output); ``digest_by``: who hashed them (``mlpipe``, here, as it stored
    or downloaded them; ``step-runtime``, the step's own runtime where it wrote them) or null
    when only a reference is known, and then ``size`` and ``file_count`` are unknown (null)."""
    unknown = is_reference(a.digest)
    far = remote(a.location) and not getattr(a, "key", None)
    return {"digest": a.digest, "kind": a.kind, "size": None if unknown else a.size,
            "file_count": None if unknown else a.file_count, "location": a.location,
            "remote": far,
            "digest_by": None if unknown else BY_STEP_RUNTIME if far else BY_MLPIPE}


def _metric(x: m.Metric, origin: m.StepRun) -> dict[str, Any]:
    return {"name": x.name, "value": x.value, "scope": x.scope, "rank": x.rank,
            "population": x.population, "reduced_over": x.reduced_over,
            "recorded_by": origin.id}


def _load_steps(s: Session, run_id: str) -> list[m.StepRun]:
    query = (select(m.StepRun).where(m.StepRun.run_id == run_id)
             .options(selectinload(m.StepRun.component), selectinload(m.StepRun.environment),
                      selectinload(m.StepRun.artifacts).selectinload(m.StepArtifact.artifact),
                      selectinload(m.StepRun.metrics),
                      selectinload(m.StepRun.reused_from).selectinload(m.StepRun.metrics))
             .order_by(m.StepRun.started_at, m.StepRun.step))
    return list(s.scalars(query))


def _origin(s: Session, sr: m.StepRun) -> tuple[m.StepRun | None, list[str]]:
    """The executed step run behind a reused one (following reuse of reuse), and the chain."""
    chain: list[str] = []
    current = sr
    while current is not None and current.status == m.REUSED and current.reused_from_id:
        chain.append(current.reused_from_id)
        if len(chain) > 100 or current.reused_from_id in chain[:-1]:
            return None, chain
        current = s.get(m.StepRun, current.reused_from_id)
    if current is None or current.status != m.EXECUTED or current is sr:
        return None, chain
    return current, chain


def _step(s: Session, sr: m.StepRun, artifacts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    origin, chain = (sr, []) if sr.status != m.REUSED else _origin(s, sr)
    ports: dict[str, list[dict[str, str]]] = {"input": [], "output": []}
    for link in sorted(sr.artifacts, key=lambda a: (a.direction, a.port)):
        artifacts.setdefault(link.artifact.digest, _artifact(link.artifact))
        ports[link.direction].append({"port": link.port, "digest": link.artifact.digest})
    reused = None
    if sr.status == m.REUSED:
        first = sr.reused_from
        reused = {"step_run": sr.reused_from_id,
                  "run": None if first is None else first.run_id,
                  "step": None if first is None else first.step,
                  "executed_step_run": None if origin is None else origin.id,
                  "executed_run": None if origin is None else origin.run_id,
                  "chain": chain}
    material = sr.key_material or {}
    recorded = sr.record is not None or (origin is not None and origin.record is not None)
    record = sr.record if sr.record is not None else None if origin is None else origin.record
    hidden = ((record or {}).get("step") or {}).get("hidden_inputs") \
        if isinstance(record, dict) else None
    return {
        "step": sr.step, "step_run": sr.id, "status": sr.status, "reused_from": reused,
        "component": {"name": sr.component.name, "version": sr.component.version,
                      "spec_digest": sr.component.spec_digest,
                      "code_digest": sr.component.code_digest},
        "environment": None if sr.environment is None else {
            "name": sr.environment.name, "version": sr.environment.version,
            "digest": sr.environment.digest, "mutable": sr.environment.mutable},
        "compute": sr.compute, "topology": sr.topology,
        "params": material.get("params", {}), "cache_key": sr.cache_key,
        "inputs": ports["input"], "outputs": ports["output"],
        "metrics": [] if origin is None else [_metric(x, origin) for x in
                                              sorted(origin.metrics, key=lambda x: x.id)],
        "message": sr.message,
        "step_record": True if recorded else None if (sr.status == m.REUSED and origin is None)
        else False,
        "hidden_inputs": hidden,
        "interpreter": None if origin is None else origin.interpreter,
    }


def _report(location: str | None) -> dict[str, Any]:
    """Population and metrics read from a metrics-report file (JSON), when it is one."""
    try:
        data = json.loads(Path(location or "").read_text()) if location else None
    except (OSError, ValueError, UnicodeDecodeError):
        data = None
    if data is None:
        return {"readable": False, "population": None, "metrics": []}
    if not isinstance(data, dict):
        return {"readable": False, "population": None, "metrics": []}
    metrics = []
    for name, value in sorted((data.get("metrics") or {}).items()):
        entry = value if isinstance(value, dict) else {"value": value}
        if isinstance(entry.get("value"), (int, float)) and not isinstance(entry["value"], bool):
            metrics.append({"name": name, "value": float(entry["value"]),
                            "scope": entry.get("scope", "global"),
                            "population": entry.get("population")})
    population = data.get("population")
    return {"readable": True, "population": population if isinstance(population, (dict, str))
            else None, "metrics": metrics}


def _graph(steps: list[dict[str, Any]], snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """The data flow as recorded: an edge wherever a step consumed a digest another produced."""
    producers: dict[str, list[str]] = {}
    for st in steps:
        for out in st["outputs"]:
            producers.setdefault(out["digest"], []).append(f"{st['step']}.{out['port']}")
    for snap in snapshots:
        producers.setdefault(snap["digest"], []).append(f"input:{snap['input']}")
    edges = []
    for st in steps:
        for inp in st["inputs"]:
            for source in producers.get(inp["digest"], ["input:(unrecorded)"]):
                if not source.startswith(f"{st['step']}."):
                    edges.append({"from": source, "to": f"{st['step']}.{inp['port']}",
                                  "digest": inp["digest"]})
    return {"steps": [st["step"] for st in steps],
            "inputs": [snap["input"] for snap in snapshots], "edges": edges}


def _code(run: m.Run) -> dict[str, Any] | None:
    """The run's code revision; with the state of each file the pipeline loaded, and whether
    all of it was committed (``clean``), where the run recorded them."""
    if run.code_revision is None:
        return None
    code: dict[str, Any] = {"commit": run.code_revision.commit, "dirty": run.code_revision.dirty}
    files = (run.options or {}).get("code_files")
    if isinstance(files, list):
        code["files"] = files
        code["clean"] = bool(code["commit"]) and not code["dirty"] and all(
            f.get("state") == "committed" for f in files)
    return code


def decision_entry(d: m.Decision) -> dict[str, Any]:
    """A recorded decision as the bundle (and ``mlpipe candidates --format json``) names it."""
    return {"verdict": d.verdict, "by": d.reviewer, "note": d.note,
            "decided_at": d.decided_at.isoformat(), "bundle": d.bundle_digest,
            "policy": d.policy}


def _review(s: Session, candidate: m.CandidateRow) -> dict[str, Any]:
    decisions = list(s.scalars(select(m.Decision).where(m.Decision.candidate_id == candidate.id)
                               .order_by(m.Decision.decided_at, m.Decision.id)))
    return {"status": decisions[-1].verdict if decisions else "unreviewed",
            "decisions": [decision_entry(d) for d in decisions]}


def _productions(s: Session, candidate: m.CandidateRow, roots: ArtifactRoots | None
                 ) -> list[dict[str, Any]]:
    """The other runs that produced the candidate, oldest first, each with its pipeline and
    its own findings (``findings.own_findings`` of that run's predicate, judged by the same
    code as the candidate's): a finding of one production is not hidden behind another's
    clean bundle."""
    runs = list(s.scalars(select(m.Run).join(m.Production, m.Production.run_id == m.Run.id)
                          .where(m.Production.candidate_id == candidate.id)
                          .order_by(m.Run.started_at, m.Run.id)))
    return [{"run": run.id, "status": run.status, "started_at": run.started_at.isoformat(),
             "pipeline": {"name": run.pipeline_name, "digest": run.pipeline_digest},
             "findings": [{k: v for k, v in f.items() if k != "run"}
                          for f in own_findings(_predicate(s, candidate, run, roots))]}
            for run in runs]


def promotion_entry(p: m.Promotion) -> dict[str, Any]:
    """A recorded promotion as the bundle (and ``mlpipe trace``) names it."""
    return {"registry": p.registry_kind, "target": p.target, "name": p.name, "version": p.version,
            "alias": p.alias, "uri": p.uri, "bundle": p.bundle_digest, "model": p.model_digest,
            "by": p.promoted_by, "promoted_at": p.promoted_at.isoformat(),
            "tags": dict(sorted(p.tags.items()))}


def _promotions(s: Session, candidate: m.CandidateRow) -> list[dict[str, Any]]:
    return [promotion_entry(p) for p in s.scalars(
        select(m.Promotion).where(m.Promotion.candidate_id == candidate.id)
        .order_by(m.Promotion.promoted_at, m.Promotion.id))]


def _predicate(s: Session, candidate: m.CandidateRow, run: m.Run,
               roots: ArtifactRoots | None) -> dict[str, Any]:
    """The predicate of ``candidate`` as ``run`` produced it (its own run, or another
    production), findings judged, without ``productions`` and ``review``."""
    inputs = s.execute(select(m.RunInput.name, m.Snapshot)
                       .join(m.Snapshot, m.Snapshot.id == m.RunInput.snapshot_id)
                       .where(m.RunInput.run_id == run.id).order_by(m.RunInput.name)).all()
    snapshots = [{"input": name, "reference": snap.reference, "digest": snap.digest,
                  "size": None if is_reference(snap.digest) else snap.size,
                  "file_count": None if is_reference(snap.digest) else snap.file_count,
                  "mutable": snap.mutable}
                 for name, snap in inputs]
    artifacts: dict[str, dict[str, Any]] = {}
    steps = [_step(s, sr, artifacts) for sr in _load_steps(s, run.id)]
    model, evaluation = candidate.model, candidate.evaluation
    artifacts.setdefault(model.digest, _artifact(model))
    if evaluation is not None:
        artifacts.setdefault(evaluation.digest, _artifact(evaluation))
    producer = {o["digest"]: st["step"] for st in steps for o in st["outputs"]}
    eval_step = producer.get(evaluation.digest) if evaluation is not None else None
    eval_entry = next((st for st in steps if st["step"] == eval_step), None)
    report = None
    if evaluation is not None:
        here = (None if remote(evaluation.location) or is_reference(evaluation.digest)
                else artifact_path(evaluation, roots))
        report = {"digest": evaluation.digest, "location": evaluation.location,
                  **_report(here)}
    checks = stored_checks(s, run.id)
    recorded = "checks" in (run.options or {})
    predicate: dict[str, Any] = {
        "generator": f"mlpipe {__version__}",
        "candidate": {"id": candidate.id, "name": candidate.name,
                      "created_at": candidate.created_at.isoformat(),
                      "model": model.digest,
                      "evaluation": None if evaluation is None else evaluation.digest},
        "findings": [],
        "run": {"id": run.id, "status": run.status, "target": run.target,
                "started_at": run.started_at.isoformat(),
                "finished_at": None if run.finished_at is None else run.finished_at.isoformat(),
                "user": run.user, "host": run.host, "params": run.params,
                "options": run.options or {}},
        "pipeline": {"name": run.pipeline_name, "digest": run.pipeline_digest},
        "code": _code(run),
        "ci": (run.options or {}).get("ci"),
        "snapshots": snapshots,
        "steps": steps,
        "artifacts": [artifacts[d] for d in sorted(artifacts)],
        "graph": _graph(steps, snapshots),
        "training": {"step": producer.get(model.digest)},
        "evaluation": {
            "step": eval_step,
            "reads_model": bool(eval_entry and any(i["digest"] == model.digest
                                                   for i in eval_entry["inputs"])),
            "metrics": [] if eval_entry is None else eval_entry["metrics"],
            "report": report,
        },
        "checks": {"recorded": recorded,
                   "errors": sum(1 for d in checks if d["severity"] == "error"),
                   "error_results": [d for d in checks if d["severity"] == "error"],
                   "warnings": [d for d in checks if d["severity"] == "warning"],
                   "info": [d for d in checks if d["severity"] == "info"]},
        "coordination": [{"step": st["step"], **st["topology"]["coordination"]}
                         for st in steps if isinstance(st["topology"], dict)
                         and st["topology"].get("coordination")],
    }
    signed = s.get(m.ModelSignature, candidate.id)
    if signed is not None:   # absent, not null, for a model never signed (older bundles too)
        from mlpipe.evidence.signatures.modelsig import FORMAT

        predicate["model_signature"] = {"digest": signed.digest, "keyid": signed.keyid,
                                        "format": FORMAT}
    promotions = _promotions(s, candidate)
    if promotions:  # absent when none: bundles sealed before promotions existed still match
        predicate["promotions"] = promotions
    predicate["findings"] = find(s, predicate)
    return predicate


def build(s: Session, candidate: m.CandidateRow, *, hash_model: bool = True,
          roots: ArtifactRoots | None = None) -> dict[str, Any]:
    """The unsealed bundle of ``candidate``: the Statement with its predicate, without the
    ``sealed_at``/``previous_bundle`` fields that sealing adds.

    Args:
        s: an open session.
        candidate: the candidate row (see :func:`find_candidate`).
        hash_model: False leaves the subject empty (verification re-hashes it itself).
        roots: where artifacts in a root are read here (default: the configured roots).

    Returns:
        A JSON-ready dict; ``predicate.findings`` is filled in.

    Example:
        >>> statement = build(s, find_candidate(s, "c-3f9a"))
        >>> statement["subject"][0]["name"]
        'model/MLmodel'
    """
    predicate = _predicate(s, candidate, candidate.run, roots)
    predicate["productions"] = _productions(s, candidate, roots)
    predicate["review"] = _review(s, candidate)
    # a name of its own labels the files; the default one (the pipeline's) keeps "model"
    label = ("model" if not candidate.name or candidate.name == candidate.run.pipeline_name
             else candidate.name)
    return {"_type": STATEMENT_TYPE,
            "subject": subject(candidate.model, label, roots) if hash_model else [],
            "predicateType": PREDICATE_TYPE, "predicate": predicate}


__all__ = ["PREDICATE_TYPE", "STATEMENT_TYPE", "build", "decision_entry", "file_digests",
           "files_of", "find_candidate", "promotion_entry", "subject"]
