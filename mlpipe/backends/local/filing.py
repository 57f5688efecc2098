"""A finished step's outputs, checked before they are filed: links made plain files,
contracts validated (a script component's; a function step's runtime did it), snapshots taken
from the step record where the files are unchanged, inputs that changed meanwhile, and the
record's metrics as rows."""
from __future__ import annotations

import os
import shutil
from typing import Any

from mlpipe.backends.local.stepjob import StepJob
from mlpipe.digests.snapshot import ContentDigest, StatCache, snapshot
from mlpipe.runtime import record as step_record
from mlpipe.spec import ComponentSpec


def materialize_links(port: str, path: str) -> str | None:
    """Store files, never links: a symbolic link in output ``path`` to a file of the same
    output is replaced by a copy of that file; what else is not a plain file or folder is a
    refusal. Returns why the output is refused, or None.

    A link out of the output (``etc -> /etc``) would make the artifact's digest cover files
    outside the store, which change or vanish under it; a FIFO or device is no content.
    """
    if os.path.islink(path):
        return (f"output {port!r} is a symbolic link (-> {os.readlink(path)}), not a file or "
                f"folder; write the content itself")
    if not os.path.isdir(path):
        return None
    root = os.path.realpath(path)
    stack = [path]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = os.path.relpath(entry.path, path)
                if entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    if not (target.startswith(root + os.sep) and os.path.isfile(target)):
                        where = "a folder" if os.path.isdir(target) else (
                            "outside the output" if not target.startswith(root + os.sep)
                            else "nothing")
                        return (f"output {port!r} holds a symbolic link {rel} -> "
                                f"{os.readlink(entry.path)}, which leads to {where}; mlpipe "
                                f"stores files, not links: copy the files into the output")
                    copy = f"{entry.path}.mlpipe-copy"
                    shutil.copyfile(target, copy)
                    os.replace(copy, entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    return (f"output {port!r} holds {rel}, which is not a file or folder (a "
                            f"named pipe, socket or device); write files only")
    return None


def recorded_snapshot(step: dict[str, Any], port: str, path: str) -> ContentDigest | None:
    """The output's snapshot from the record's digest when the files are still those the
    runtime hashed (the same names, sizes and modification times); else None."""
    entry = (step.get("outputs") or {}).get(port) or {}
    digest, files = entry.get("digest"), entry.get("files")
    if not digest or files is None or entry.get("files_omitted"):
        return None
    try:
        if os.path.isdir(path):
            now = sorted((rel, st.st_size, st.st_mtime_ns) for rel, st in _stats(path))
            kind = "folder"
        else:
            st = os.stat(path)
            now = [(os.path.basename(path), st.st_size, st.st_mtime_ns)]
            kind = "file"
    except OSError:
        return None
    then = sorted((f["name"], f["size"], f.get("mtime_ns")) for f in files)
    if now != then:
        return None
    return ContentDigest(digest, int(entry.get("size") or 0), int(entry.get("file_count") or 0),
                         kind)


def _stats(root: str):
    stack = [("", root)]
    while stack:
        rel, folder = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if entry.is_dir():
                    stack.append((f"{rel}{entry.name}/", entry.path))
                elif entry.is_file():
                    yield rel + entry.name, entry.stat()


def output_files(step: dict[str, Any], port: str, snap: ContentDigest
                 ) -> list[dict[str, Any]] | None:
    """The per-file sha256/blake3 list of an output, when the record's digest is the one filed."""
    entry = (step.get("outputs") or {}).get(port) or {}
    if entry.get("digest") != snap.digest or entry.get("files_omitted"):
        return None
    return [{"name": f["name"], "size": f["size"], "sha256": f["sha256"], "blake3": f["blake3"]}
            for f in entry.get("files") or []]


def validate_outputs(comp: ComponentSpec, outputs: dict[str, str]
                     ) -> tuple[str, str, str | None] | None:
    """``(port, message, mismatch)`` of the first output that does not match its contract."""
    from mlpipe.contracts import validate
    from mlpipe.errors import MlpipeError

    for port in comp.outputs:
        if port.contract is None:
            continue
        try:
            validate(port.contract, outputs[port.name])
        except MlpipeError as exc:
            return (port.name, f"output {port.name!r} does not match its contract: "
                               f"{exc.message}", getattr(exc, "mismatch", None))
    return None


def inputs_changed(job: StepJob, cache: StatCache) -> str | None:
    changed = []
    for port, path in job.inputs.items():
        try:
            now = snapshot(path, cache).digest
        except OSError:
            now = "(gone)"
        if now != job.input_digests.get(port):
            changed.append(port)
    if not changed:
        return None
    return (f"input{'s' if len(changed) > 1 else ''} {', '.join(map(repr, changed))} changed "
            f"while the step ran; its result is not cached")


def metric_rows(found: dict[str, Any] | None) -> list[dict[str, Any]]:
    rows = []
    for row in step_record.metrics(found):
        try:
            rows.append({"name": str(row["name"]), "value": float(row["value"]),
                         "scope": str(row["scope"]), "rank": row.get("rank"),
                         "population": row.get("population"),
                         "reduced_over": row.get("reduced_over")})
        except (ValueError, KeyError, TypeError):
            continue
    return rows
