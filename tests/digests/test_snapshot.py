"""Content snapshots: digests of files and folders, and the stat cache that skips re-reading."""
from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe.backends.local.cas import ArtifactStore
from mlpipe.digests import snapshot as snap_mod
from mlpipe.digests.snapshot import StatCache, snapshot


def _age(path, seconds=10):
    old = time.time() - seconds
    for root, _dirs, files in os.walk(path):
        for f in files:
            os.utime(os.path.join(root, f), (old, old))


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "data"
    (d / "a").mkdir(parents=True)
    (d / "a" / "x.bin").write_bytes(b"x" * 100)
    (d / "y.txt").write_text("hello")
    (d / "big.bin").write_bytes(os.urandom(3 << 20))
    _age(d)
    return d


def test_folder_digest_is_content_not_location(folder, tmp_path):
    first = snapshot(folder)
    moved = tmp_path / "elsewhere"
    folder.rename(moved)
    assert snapshot(moved) == first
    assert first.kind == "folder" and first.file_count == 3
    assert first.digest.startswith("blake3:")


def test_one_changed_byte_or_name_changes_the_digest(folder):
    before = snapshot(folder).digest
    data = bytearray((folder / "big.bin").read_bytes())
    data[12345] ^= 1
    (folder / "big.bin").write_bytes(bytes(data))
    changed = snapshot(folder).digest
    assert changed != before
    (folder / "y.txt").rename(folder / "z.txt")
    assert snapshot(folder).digest != changed


def test_file_digest_is_blake3_of_the_bytes(tmp_path):
    import blake3
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert snapshot(f).digest == "blake3:" + blake3.blake3(b"abc").hexdigest()
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    assert snapshot(empty).size == 0


def test_stat_cache_skips_unchanged_files_and_rereads_changed_ones(folder, tmp_path,
                                                                  monkeypatch):
    # utime() just set every ctime to now: let "settled" mean "before now" for this test
    monkeypatch.setattr(snap_mod, "_RACY_SECONDS", -1.0)
    cache = StatCache(tmp_path / "cache.sqlite")
    first = snapshot(folder, cache)
    cache.flush()
    read = []
    real = snap_mod.hash_file
    monkeypatch.setattr(snap_mod, "hash_file", lambda p, s: read.append(p) or real(p, s))
    again = StatCache(tmp_path / "cache.sqlite")
    assert snapshot(folder, again) == first
    assert read == []
    (folder / "y.txt").write_text("hellO")  # same size, new content
    assert snapshot(folder, again) != first
    assert read == [str(folder / "y.txt")]


def test_a_just_written_file_is_not_cached(tmp_path):
    cache = StatCache(None)
    f = tmp_path / "fresh"
    f.write_text("1")
    snapshot(f, cache)
    assert cache.tree(str(f)) == {}


def test_artifact_store_files_whole_outputs_and_detects_damage(tmp_path, folder):
    cas = ArtifactStore(tmp_path / "cas")
    snap = snapshot(folder)
    location = cas.put(folder, snap)
    assert not folder.exists() and location.name == "data"
    assert cas.verify(location, snap.digest)
    (location / "y.txt").write_text("tampered")
    assert not cas.verify(location, snap.digest)
    assert not cas.verify(tmp_path / "nowhere", snap.digest)


def test_an_unchanged_folder_is_answered_from_its_stat_listing(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(snap_mod, "_RACY_SECONDS", -1.0)
    cache = StatCache(tmp_path / "cache.sqlite")
    first = snapshot(folder, cache)
    cache.close()
    again = StatCache(tmp_path / "cache.sqlite")
    per_file = StatCache.tree
    monkeypatch.setattr(StatCache, "tree", lambda self, root: pytest.fail("per-file lookup"))
    assert snapshot(folder, again) == first
    monkeypatch.setattr(StatCache, "tree", per_file)
    (folder / "a" / "new.txt").write_text("n")  # a new name changes the listing
    grown = snapshot(folder, again)
    assert grown.file_count == 4 and grown.digest != first.digest
    assert grown == snapshot(folder)  # the same digest as without any cache


def test_a_folder_with_a_just_written_file_is_not_remembered_whole(folder, tmp_path):
    cache = StatCache(None)
    (folder / "fresh.txt").write_text("now")
    snapshot(folder, cache)
    assert cache.folder(str(folder)) is None


def _reference(root) -> str:
    # the folder digest as documented: a sorted manifest of path, size and file digest
    import blake3

    lines = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as fh:
                data = fh.read()
            lines.append((rel, len(data), blake3.blake3(data).hexdigest()))
    manifest = blake3.blake3(b"mlpipe-folder-v1\n")
    for rel, size, digest in sorted(lines):
        manifest.update(f"{rel}\0{size}\0{digest}\n".encode())
    return "blake3:" + manifest.hexdigest()


SIZES = [0, 1, 4096, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, 200_000, (1 << 20) + 3]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(
    st.lists(st.from_regex(r"[a-z0-9_.-]{1,8}", fullmatch=True).filter(
        lambda n: n not in (".", "..")), min_size=1, max_size=3).map("/".join),
    st.sampled_from(SIZES), min_size=1, max_size=12))
def test_every_route_gives_the_documented_digest(tmp_path_factory, files):
    # no cache (verify, outputs), a cold cache (a first run's inputs), a warm one (answered
    # from the stat listing) and a warm one after a change (per-file lookups)
    root = tmp_path_factory.mktemp("tree")
    written = set()
    for rel, size in sorted(files.items()):
        path = root / rel
        try:  # a name already taken by a file or a folder is left out
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(size))
        except (FileExistsError, IsADirectoryError, NotADirectoryError):
            continue
        written.add(rel)
    _age(root)
    expected = _reference(root)
    assert snapshot(root).digest == expected
    cache = StatCache(root.parent / f"{root.name}.sqlite")
    assert snapshot(root, cache).digest == expected
    cache.flush()
    assert snapshot(root, cache).digest == expected
    first = root / sorted(written)[0]
    first.write_bytes(first.read_bytes() + b"!")
    _age(root)
    expected = _reference(root)
    assert snapshot(root, cache).digest == expected == snapshot(root).digest
