"""Artifact keys (mlpipe.evidence.storage.roots): a key is the same on every machine, an absolute
location in anyone's root maps to it, and nothing else is taken for one."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlpipe.evidence.storage.roots import ArtifactRoots, FolderRoot, key_in, key_of

hexes = st.text("0123456789abcdef", min_size=64, max_size=64)
names = st.sampled_from(["data", "model", "report", "weights.bin", ".hidden"])
folders = st.lists(st.text("abcxyz_-", min_size=1, max_size=6), min_size=0, max_size=4)


@given(hexdigest=hexes, name=names, home=folders)
def test_a_location_in_any_root_maps_to_its_key(hexdigest, name, home):
    digest = f"blake3:{hexdigest}"
    key = key_of(digest, name)
    assert key == f"blake3/{hexdigest[:2]}/{hexdigest}/{name}"
    location = "/" + "/".join([*home, "artifacts", key])
    assert key_in(location, digest) == key
    assert key_in(location, f"blake3:{'0' * 64}" if hexdigest != "0" * 64 else
                  f"blake3:{'1' * 64}") is None  # another digest's entry is not this one's


@pytest.mark.parametrize("key", ["../../etc/passwd", "blake3/ab/" + "ab" * 32 + "/..",
                                 "blake3/ab/" + "ab" * 32 + "/.", "/abs/olute", "",
                                 "blake3/cd/" + "ab" * 32])
def test_a_malformed_key_resolves_to_nothing(key, tmp_path):
    roots = ArtifactRoots(tmp_path / "own", FolderRoot(tmp_path / "shared"))
    assert roots.resolve(key, "blake3:" + "ab" * 32) is None
    assert not (tmp_path / "own").exists()


def test_an_input_path_is_not_a_key(tmp_path):
    roots = ArtifactRoots(tmp_path)
    assert roots.key_for("/data/train.csv", "blake3:" + "ab" * 32) is None
    assert roots.local("/data/train.csv", "blake3:" + "ab" * 32) == "/data/train.csv"
    assert roots.path_of(key_of("blake3:" + "ab" * 32, "m")) == Path(tmp_path) / key_of(
        "blake3:" + "ab" * 32, "m")
