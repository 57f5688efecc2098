"""A step output's digests (``mlpipe.digests.output_digests``) against the folder manifest as
docs/digests.md defines it, written out here independently (literal header, literal line), and
against ``snapshot``: one definition of a folder digest, whichever code reads the folder."""
from __future__ import annotations

import hashlib
import os

import blake3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe.digests import output_digests
from mlpipe.digests.snapshot import snapshot


def _reference(root, algo) -> str:
    lines = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as fh:
                data = fh.read()
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            lines.append((rel, len(data), algo(data).hexdigest()))
    manifest = algo(b"mlpipe-folder-v1\n")
    for rel, size, digest in sorted(lines):
        manifest.update(f"{rel}\0{size}\0{digest}\n".encode())
    return manifest.hexdigest()


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(
    st.lists(st.from_regex(r"[a-z0-9_.-]{1,8}", fullmatch=True).filter(
        lambda n: n not in (".", "..")), min_size=1, max_size=3).map("/".join),
    st.binary(max_size=3000), min_size=1, max_size=10))
def test_a_folder_output_has_the_documented_manifest_digests(tmp_path_factory, files):
    root = tmp_path_factory.mktemp("out")
    written = {}
    for rel, data in files.items():
        path = root / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written[rel] = data
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue  # a name that is both a file and a folder: not a tree
    got = output_digests(str(root), max_files=3)
    assert got["digest"] == "blake3:" + _reference(root, blake3.blake3)
    assert got["digest"] == snapshot(root).digest
    assert got["sha256"] == "sha256:" + _reference(root, hashlib.sha256)
    count = sum(1 for _ in root.rglob("*") if _.is_file())
    assert got["file_count"] == count
    assert len(got["files"]) == min(3, count) and got["files_omitted"] == count - min(3, count)
    assert got["size"] == sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_a_file_output_is_its_own_digests(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"weights")
    got = output_digests(str(path), max_files=10)
    assert got["digest"] == "blake3:" + blake3.blake3(b"weights").hexdigest()
    assert got["sha256"] == "sha256:" + hashlib.sha256(b"weights").hexdigest()
    assert got["digest"] == snapshot(path).digest
    assert (got["file_count"], got["size"], got["files_omitted"]) == (1, 7, 0)
    assert got["files"][0]["name"] == "model.bin"


def test_the_golden_folder_digest_never_changes(tmp_path):
    # pinned value: stored records, reuse keys and artifact store keys depend on it
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_bytes(b"hello\n")
    (tmp_path / "b.bin").write_bytes(b"")
    got = output_digests(str(tmp_path), max_files=10)
    assert got["digest"] == ("blake3:7a5a7bab72513ba90a6ae620dcba16abc758a9e7142a8b4c46b7ae11"
                             "64af5b97") == snapshot(tmp_path).digest
    assert got["sha256"] == ("sha256:616792094dae5961711b9090908a926297f0f06cbfb0a019ffb252ab"
                             "dfefd5c4")


def test_a_linked_folder_that_leads_back_up_is_refused_as_snapshot_refuses_it(tmp_path):
    # one walk (digests.files_under) for both: a link is followed, a cycle is an ELOOP error
    (tmp_path / "out" / "sub").mkdir(parents=True)
    (tmp_path / "out" / "sub" / "a.txt").write_text("a")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.txt").write_text("b")
    (tmp_path / "out" / "linked").symlink_to(tmp_path / "elsewhere")
    got = output_digests(str(tmp_path / "out"), 10)
    assert [f["name"] for f in got["files"]] == ["linked/b.txt", "sub/a.txt"]
    assert got["digest"] == snapshot(tmp_path / "out").digest
    (tmp_path / "out" / "sub" / "up").symlink_to(tmp_path / "out")
    with pytest.raises(OSError, match="leads back to a folder that holds it"):
        output_digests(str(tmp_path / "out"), 10)
    with pytest.raises(OSError, match="leads back to a folder that holds it"):
        snapshot(tmp_path / "out")
