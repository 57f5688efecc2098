"""Content digests, in one place: canonical JSON and its SHA-256 (``digest_of``), the digest of
bytes and of lines of text, of one file (SHA-256 and BLAKE3 in one read), of a step's output
(``output_digests``: both manifests and the file list), of a script component's code folder,
and the one folder manifest line every folder digest is taken over.

The bottom layer: imports nothing from mlpipe. File and folder snapshots with the stat cache
(BLAKE3, what runs, reuse and verification compare) are ``mlpipe.digests.snapshot``. The fields
that go into each spec digest are listed in docs/digests.md.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20
#: The first bytes of every folder manifest (``mlpipe-folder-v1``), then one
#: ``manifest_line`` a file, sorted by relative path.
FOLDER_HEADER = b"mlpipe-folder-v1\n"


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
    return "sha256:" + sha256_hex(content)


def digest_chunks(chunks: Iterable[bytes]) -> str:
    """``sha256:<hex>`` of the chunks' concatenation, read one at a time (a model's parameter
    tensors, without joining them).

    Example:
        >>> digest_chunks([b"a", b"b"]) == digest_bytes(b"ab")
        True
    """
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def sha256_hex(content: bytes) -> str:
    """The bare SHA-256 hex digest of ``content`` (no ``sha256:`` prefix): a public key's id,
    as OpenSSF Model Signing writes it.

    Example:
        >>> sha256_hex(b"")[:12]
        'e3b0c44298fc'
    """
    return hashlib.sha256(content).hexdigest()


def digest_lines(lines: Iterable[str]) -> str:
    """``sha256:<hex>`` of ``lines`` as text, one a line (each followed by a newline), in the
    order given: what the record keeps for the example ids a step consumed and the files it
    opened (sorted first by the caller).

    Example:
        >>> digest_lines(["a", "b"]) == digest_bytes(b"a\\nb\\n")
        True
    """
    return digest_bytes("".join(f"{line}\n" for line in lines).encode("utf-8"))


def manifest_line(rel: str, size: int, digest: str) -> str:
    """One file's line of a folder manifest: relative path, size and file digest (hex), NUL
    separated. Every folder digest (``snapshot``, ``output_digests``) is taken over
    ``FOLDER_HEADER`` and these lines, sorted by path.

    Example:
        >>> manifest_line("a/b.txt", 3, "c1f0")
        'a/b.txt\\x003\\x00c1f0\\n'
    """
    return f"{rel}\0{size}\0{digest}\n"


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


def files_under(root: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every file in folder ``root``, at any depth: (relative posix path, its entry), in the
    order the file system lists them (not sorted). The one walk over a folder's content that
    its digests read (here and in ``digests.snapshot``).

    Raises:
        OSError: a folder cannot be listed, or a linked folder leads back to one above it.
    """
    stack = _top(root)
    while stack:
        rel, folder, dev, above = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if entry.is_dir():
                    stack.append(_below(rel, entry, dev, above))
                elif entry.is_file():
                    yield rel + entry.name, entry


# a folder still to list: (relative posix path, path, device, the folders above it)
_Pending = tuple[str, str, int, tuple[tuple[int, int], ...]]


def _top(root: str) -> list[_Pending]:
    st = os.stat(root)
    return [("", root, st.st_dev, ((st.st_dev, st.st_ino),))]


def _below(rel: str, entry: os.DirEntry, dev: int, above: tuple[tuple[int, int], ...]
           ) -> _Pending:
    """The folder ``entry`` to list next. A linked folder is followed (its files are part of
    the content) unless it leads back to a folder above it: that cycle would never end.

    Raises:
        OSError: ELOOP, naming the link.
    """
    if entry.is_symlink():
        st = entry.stat()
        key = (st.st_dev, st.st_ino)
        if key in above:
            raise OSError(errno.ELOOP, f"the link {rel}{entry.name} leads back to a folder "
                                       f"that holds it (a symlink cycle)", entry.path)
        return f"{rel}{entry.name}/", entry.path, st.st_dev, (*above, key)
    return f"{rel}{entry.name}/", entry.path, dev, (*above, (dev, entry.inode()))


def _files_below(root: str) -> list[tuple[str, str, os.stat_result]]:
    """Every file below ``root``: (relative posix path, path, stat), sorted by relative path."""
    return sorted((rel, entry.path, entry.stat()) for rel, entry in files_under(root))


def output_digests(path: str, max_files: int) -> dict[str, Any]:
    """The content digests of one file or folder, read once: ``digest`` (``blake3:``, the same
    value ``snapshot.snapshot`` gives, under which the local artifact store files it),
    ``sha256`` (the same manifest over SHA-256), size, file count and, for the first
    ``max_files`` files, each one's name, size, sha256, blake3 and mtime (``files_omitted``
    counts the others).

    Raises:
        OSError: the path, or a file in it, cannot be read.

    Example:
        >>> output_digests("out/model", 10_000)["digest"][:7]
        'blake3:'
    """
    import blake3

    if not os.path.isdir(path):
        st = os.stat(path)
        one = file_digests(path)
        files = [{"name": os.path.basename(path), "size": st.st_size, "sha256": one["sha256"],
                  "blake3": one["blake3"], "mtime_ns": st.st_mtime_ns}]
        return {"digest": f"blake3:{one['blake3']}", "sha256": f"sha256:{one['sha256']}",
                "size": st.st_size, "file_count": 1, "files": files, "files_omitted": 0}
    b3_manifest, sha_manifest = blake3.blake3(FOLDER_HEADER), hashlib.sha256(FOLDER_HEADER)
    files, size = [], 0
    found = _files_below(path)
    for rel, full, st in found:
        one = file_digests(full)
        sha, b3 = one["sha256"], one["blake3"]
        b3_manifest.update(manifest_line(rel, st.st_size, b3).encode())
        sha_manifest.update(manifest_line(rel, st.st_size, sha).encode())
        size += st.st_size
        if len(files) < max_files:
            files.append({"name": rel, "size": st.st_size, "sha256": sha, "blake3": b3,
                          "mtime_ns": st.st_mtime_ns})
    return {"digest": f"blake3:{b3_manifest.hexdigest()}",
            "sha256": f"sha256:{sha_manifest.hexdigest()}", "size": size,
            "file_count": len(found), "files": files, "files_omitted": len(found) - len(files)}


def listed_folder_digest(files: list[dict[str, Any]]) -> str:
    """The folder digest (``blake3:``, as ``snapshot`` and ``output_digests`` take it) of a
    folder holding exactly ``files`` (``output_digests``' ``{"name", "size", "blake3"}`` rows):
    the digest a folder would have with only these of its files (``trace`` weighs a registered
    model's sealed files apart from those a registry added).

    Example:
        >>> listed_folder_digest(output_digests("out/model", 10_000)["files"])[:7]
        'blake3:'
    """
    import blake3

    manifest = blake3.blake3(FOLDER_HEADER)
    for f in sorted(files, key=lambda f: f["name"]):
        manifest.update(manifest_line(f["name"], f["size"], f["blake3"]).encode())
    return f"blake3:{manifest.hexdigest()}"


def preload() -> None:
    """Import the BLAKE3 library now rather than on the first file digest (the step runtime's
    fork server calls it once, so that each step forked from it does not pay it again)."""
    import blake3  # noqa: F401


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


__all__ = ["FOLDER_HEADER", "REFERENCE", "canonical_json", "digest_bytes", "digest_lines",
           "digest_of", "file_digests", "files_under", "is_reference", "listed_folder_digest",
           "manifest_line", "output_digests", "preload", "reference_digest",
           "script_code_digest", "sha256_file", "sha256_hex"]
