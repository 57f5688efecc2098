"""Content digests, in one place: canonical JSON and its SHA-256 (``digest_of``), the digest of
bytes, of one file (SHA-256 and BLAKE3 in one read), and of a script component's code folder.

The bottom layer: imports nothing from mlpipe. File and folder snapshots with the stat cache
(BLAKE3, what runs, reuse and verification compare) are ``mlpipe.digests.snapshot``. The fields
that go into each spec digest are listed in docs/digests.md.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the one serialisation every digest is taken over.

    Example:
        >>> canonical_json({"b": 1, "a": [1.5, None]})
        '{"a":[1.5,null],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def digest_of(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``.

    Example:
        >>> digest_of({"a": 1})[:7]
        'sha256:'
    """
    return digest_bytes(canonical_json(value).encode("utf-8"))


def digest_bytes(content: bytes) -> str:
    """``sha256:<hex>`` of ``content``."""
    return "sha256:" + hashlib.sha256(content).hexdigest()


#: Digests of references (an Azure ML data asset, an output's URI) start with this: they name
#: the reference, never the content behind it.
REFERENCE = "ref:"


def reference_digest(reference: str) -> str:
    """A digest that names a reference, never its content: ``ref:sha256:`` over the text.

    Example:
        >>> reference_digest("azureml:images:1")[:11]
        'ref:sha256:'
    """
    return REFERENCE + digest_bytes(reference.encode("utf-8"))


def is_reference(digest: str | None) -> bool:
    """Whether ``digest`` names a reference (``ref:...``) rather than content."""
    return isinstance(digest, str) and digest.startswith(REFERENCE)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 hex digest of one file's bytes, read in chunks.

    Raises:
        OSError: the file cannot be read (FileNotFoundError when it is gone).
    """
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def file_digests(path: str | os.PathLike[str]) -> dict[str, str]:
    """``{"sha256": hex, "blake3": hex}`` of one file's bytes, read once (the in-toto subject).

    Raises:
        OSError: the file cannot be read.
    """
    import blake3

    sha, b3 = hashlib.sha256(), blake3.blake3()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha.update(chunk)
            b3.update(chunk)
    return {"sha256": sha.hexdigest(), "blake3": b3.hexdigest()}


def script_code_digest(code: str | None, command: str, base: Path) -> str:
    """The code digest of a script component: ``sha256:`` over its command and every file of
    its local code folder (relative paths and bytes, sorted; dot files and ``__pycache__``
    skipped). A code reference that is not a local path is digested as its text.

    Example:
        >>> script_code_digest("src", "python train.py", Path("components"))[:7]
        'sha256:'
    """
    h = hashlib.sha256(command.encode("utf-8"))
    if code is not None and not isinstance(code, str):
        code = str(code)  # not a path (the YAML reader reports it); digested as its text
        folder = None
    else:
        folder = None if code is None else (base / code).resolve()
    if folder is not None and folder.parent == folder:
        folder = None  # the file system's root is refused where the code is read; never walked
    if folder is not None and folder.is_dir():
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not any(p.startswith(".") or p == "__pycache__"
                                          for p in path.relative_to(folder).parts):
                h.update(path.relative_to(folder).as_posix().encode("utf-8"))
                h.update(path.read_bytes())
    elif folder is not None and folder.is_file():
        h.update(folder.read_bytes())
    elif code is not None:
        h.update(code.encode("utf-8"))
    return "sha256:" + h.hexdigest()


__all__ = ["REFERENCE", "canonical_json", "digest_bytes", "digest_of", "file_digests",
           "is_reference", "reference_digest", "script_code_digest",
           "sha256_file"]
