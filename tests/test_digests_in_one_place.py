"""Every content digest is computed in ``mlpipe/digests/`` (docs/digests.md, "Where digests
are computed"): no other module of mlpipe/ imports a hashing library, calls a hash
constructor, or writes a folder manifest line (``path\\0size\\0digest``) or its header. A
keyed hash that is no content digest (an HMAC over a secret, a signature) is allowed only
where ``ALLOWED`` names the module and says why.
"""
from __future__ import annotations

import ast
import hashlib
import pathlib
import textwrap

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "mlpipe"
DIGESTS = PACKAGE / "digests"

#: The libraries whose import means hashing bytes (``zlib`` and ``binascii`` also compress
#: and decode: only their checksum calls count, ``CHECKSUMS``).
HASH_MODULES = {"hashlib", "blake3", "hmac", "xxhash", "mmh3"}
CHECKSUMS = {"crc32", "adler32", "crc_hqx"}
#: The names of hash constructors (``hashlib.sha256(...)``, ``blake3.blake3(...)``,
#: ``hashlib.new("sha256")``, ``hashlib.file_digest(...)``, ``hmac.new(...)``).
HASH_CALLS = ({name.replace("-", "_") for name in hashlib.algorithms_available}
              | {"blake3", "new", "file_digest", "digest", "compare_digest", "crc32",
                 "xxh64", "xxh3_64", "xxh128"})
#: The folder manifest's header: only mlpipe.digests writes it.
HEADER = "mlpipe-folder-v1"

#: module file (relative to mlpipe/) -> why it may hash outside mlpipe.digests.
ALLOWED: dict[str, str] = {
    "secret.py": "an HMAC-SHA256 keyed by the store's secret key over a secret's value "
                 "(secret:hmac-sha256:): a keyed hash that stands for a secret, no content "
                 "digest; it must never be computable without the key",
    "evidence/signatures/keyvault.py": "the ES256 pre-hash: Key Vault's sign() takes the SHA-256 of the "
                            "message, not the message, so it is part of the signature "
                            "algorithm (as cryptography hashes inside sign() for a local key), "
                            "no content digest mlpipe stores or compares",
}


def _module_of(call: ast.Call) -> str | None:
    """``hashlib`` for ``hashlib.sha256(...)``; None for a bare name."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id
    return None


def problems(source: str, filename: str) -> list[str]:
    """What in ``source`` hashes or writes a folder manifest: ``file:line: what`` each."""
    tree = ast.parse(source, filename=filename)
    imported: set[str] = set()  # local names bound to a hashing module or one of its names
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in HASH_MODULES:
                    imported.add(alias.asname or alias.name.split(".")[0])
                    found.append(f"{filename}:{node.lineno}: imports {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in HASH_MODULES:
                imported.update(a.asname or a.name for a in node.names)
                found.append(f"{filename}:{node.lineno}: imports from {node.module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            owner = _module_of(node)
            if (isinstance(func, ast.Name) and func.id in imported) or (
                    isinstance(func, ast.Attribute)
                    and (owner in imported or owner in HASH_MODULES
                         or (owner in {"zlib", "binascii"} and func.attr in CHECKSUMS)
                         or (owner is None and func.attr in HASH_CALLS - {"new", "digest"}))):
                found.append(f"{filename}:{node.lineno}: calls {ast.unparse(func)}()")
        elif isinstance(node, ast.JoinedStr):
            literal = "".join(v.value for v in node.values
                              if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if literal.count("\0") >= 2:
                found.append(f"{filename}:{node.lineno}: writes a NUL-separated folder "
                             f"manifest line (use mlpipe.digests.manifest_line)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            if HEADER in text:
                found.append(f"{filename}:{node.lineno}: writes the folder manifest header "
                             f"(use mlpipe.digests.FOLDER_HEADER)")
    return found


def _scan() -> dict[str, list[str]]:
    """module file (relative to mlpipe/) -> its problems, for every module outside digests."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if DIGESTS in path.parents:
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        out[rel] = problems(path.read_text(encoding="utf-8"), f"mlpipe/{rel}")
    return out


def test_no_module_outside_mlpipe_digests_hashes_or_writes_a_manifest():
    found = [p for rel, listed in _scan().items() if rel not in ALLOWED for p in listed]
    assert not found, ("content digests are computed in mlpipe/digests/ only (call or add a "
                       "function there; a keyed hash that is no content digest goes in "
                       "ALLOWED with its reason):\n" + "\n".join(found))


def test_every_allowed_module_exists_and_still_hashes():
    scanned = _scan()
    stale = [rel for rel in ALLOWED if not scanned.get(rel)]
    assert not stale, f"no longer hash (remove them from ALLOWED): {stale}"


def test_the_scan_sees_every_way_of_hashing():
    source = textwrap.dedent('''
        import hashlib
        import blake3 as b
        from hashlib import sha256
        def f(data, rel, size, digest):
            hashlib.sha256(data)
            hashlib.new("md5")
            b.blake3(data)
            sha256(data)
            line = f"{rel}\\0{size}\\0{digest}\\n"
            head = b"mlpipe-folder-v1\\n"
        def g():
            import hmac
            return hmac.new(b"k", b"v", "sha256")
        import zlib
        check = zlib.crc32(b"x")
    ''')
    found = problems(source, "m.py")
    assert sorted(found) == sorted([
        "m.py:2: imports hashlib", "m.py:3: imports blake3", "m.py:4: imports from hashlib",
        "m.py:6: calls hashlib.sha256()", "m.py:7: calls hashlib.new()",
        "m.py:8: calls b.blake3()", "m.py:9: calls sha256()",
        "m.py:10: writes a NUL-separated folder manifest line (use "
        "mlpipe.digests.manifest_line)",
        "m.py:11: writes the folder manifest header (use mlpipe.digests.FOLDER_HEADER)",
        "m.py:13: imports hmac", "m.py:14: calls hmac.new()",
        "m.py:16: calls zlib.crc32()"])


def test_the_scan_leaves_digest_calls_and_other_strings_alone():
    source = textwrap.dedent('''
        from mlpipe.digests import digest_bytes, manifest_line, sha256_file
        def f(data, path, i, k):
            slot = f"\\0{i}.{k}"
            magic = b"II*\\x00"
            import binascii, zlib
            packed = zlib.compress(data)
            try:
                binascii.a2b_base64(data)
            except binascii.Error:
                pass
            text = "pin the image by digest: NAME@sha256:<digest>"
            return digest_bytes(data), sha256_file(path), manifest_line("a", 1, "00")
    ''')
    assert problems(source, "m.py") == []
