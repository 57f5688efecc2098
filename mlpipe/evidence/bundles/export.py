"""``mlpipe evidence C --export DIR``: the candidate's signed evidence as files a GRC tool or a
deployment gate reads with the standard libraries (docs/signing.md#exports): the newest
bundle's exact bytes and DSSE envelope, each decision's VSA envelope, the model signature.

Reads the store and writes one new folder, whole or not at all; judges nothing.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mlpipe.errors import UsageError
from mlpipe.writing import staging_beside


@dataclass(slots=True)
class Exported:
    """What was written: the folder and the files in it (name -> what it is)."""

    folder: str
    files: dict[str, str] = field(default_factory=dict)


def export(url: str, ref: str, folder: str | os.PathLike[str]) -> Exported:
    """Write the candidate's newest sealed bundle and its signatures to the new ``folder``.

    Files: ``bundle.json`` (the sealed bytes; their sha256 is the bundle digest),
    ``bundle.dsse.json`` (its envelope, when signed), ``decision-N.vsa.dsse.json`` (each signed
    decision, oldest first), ``model.sig`` (the model signature, when there is one) and
    ``export.json`` (the candidate, the digests, where the model is, which files are unsigned).

    Raises:
        UsageError: ``folder`` exists and is not empty, or cannot be written; no such candidate.
        StoreError: the store cannot be opened.

    Example:
        >>> sorted(export(url, "c-3f9a", "out/c-3f9a").files)[:2]
        ['bundle.dsse.json', 'bundle.json']
    """
    from mlpipe.evidence.bundles.bundle import find_candidate
    from mlpipe.evidence.bundles.seal import seal
    from mlpipe.evidence.signatures.signing import bundle_envelopes, decisions_of, model_signature
    from mlpipe.evidence.storage.located import model_path
    from mlpipe.evidence.storage.store import Store

    target = Path(folder)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} exists and is not an empty folder: an export never "
                         f"overwrites files", hint="choose a new folder for --export")
    store = Store.open(url, create=False)
    try:
        with store.session() as s:
            cand = find_candidate(s, ref)
            sealed = seal(s, cand)
            files: dict[str, bytes] = {"bundle.json": sealed.content}
            about = {"bundle.json": f"the sealed bundle {sealed.digest} (exact bytes)"}
            envelope = bundle_envelopes(s, [sealed.digest]).get(sealed.digest)
            if envelope is not None:
                files["bundle.dsse.json"] = envelope
                about["bundle.dsse.json"] = "the bundle's DSSE envelope"
            decisions = []
            for n, d in enumerate(decisions_of(s, cand.id), start=1):
                name = f"decision-{n}.vsa.dsse.json"
                if d["envelope"] is not None:
                    files[name] = d["envelope"]
                    about[name] = f"the {d['verdict']} decision's VSA, signed"
                decisions.append({"verdict": d["verdict"], "by": d["by"], "bundle": d["bundle"],
                                  "file": name if d["envelope"] is not None else None})
            signature = model_signature(s, cand.id)
            if signature is not None:
                files["model.sig"] = bytes(signature.signature)
                about["model.sig"] = "the model signature (OpenSSF Model Signing)"
            summary = {"candidate": cand.id, "bundle": sealed.digest,
                       "model": {"digest": cand.model.digest, "here": model_path(cand),
                                 "signature": None if signature is None else signature.digest},
                       "decisions": decisions, "files": about}
    finally:
        store.close()
    files["export.json"] = json.dumps(summary, indent=2, sort_keys=True).encode() + b"\n"
    about["export.json"] = "what is in this folder"
    _write_whole(target, files)
    return Exported(str(target), about)


def _write_whole(target: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a folder beside ``target``, then rename it into place."""
    staging = staging_beside(target, f"the export to {target}")
    try:
        for name, content in files.items():
            (staging / name).write_bytes(content)
        staging.chmod(0o755)
        if target.exists():
            target.rmdir()   # empty, checked above
        staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"cannot write the export to {target}: {exc.strerror or exc}",
                         hint="choose a folder you can write to") from None


__all__ = ["Exported", "export"]
