"""observe.Filter: what it ignores whatever the step is worked out once a process, and again
when what it depends on changes (the working folder, sys.path)."""
from __future__ import annotations

import os
import sys

from mlpipe.runtime import observe


def _code_file(folder) -> str:
    return os.path.join(str(folder), "module.py")


def test_a_relative_path_entry_follows_the_working_folder(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "src").mkdir(parents=True)
    (second / "src").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", ["src", *sys.path])
    monkeypatch.chdir(first)
    here = observe.Filter({}, {})
    assert here.is_ignored(_code_file(first / "src"))  # code imported from ./src
    assert not here.is_ignored(_code_file(second / "src"))
    monkeypatch.chdir(second)
    there = observe.Filter({}, {})
    assert there.is_ignored(_code_file(second / "src"))
    assert not there.is_ignored(_code_file(first / "src"))


def test_a_new_path_entry_is_seen_by_the_next_filter(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    before = observe.Filter({}, {})
    assert not before.is_ignored(_code_file(lib))
    monkeypatch.setattr(sys, "path", [str(lib), *sys.path])
    after = observe.Filter({}, {})
    assert after.is_ignored(_code_file(lib))
    assert str(lib) in after.path_entries


def test_the_scratch_folders_are_each_filters_own(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    first = observe.Filter({}, {}, scratch=[str(one)])
    second = observe.Filter({}, {}, scratch=[str(two)])
    assert first.is_ignored(str(one / "x.bin")) and not first.is_ignored(str(two / "x.bin"))
    assert second.is_ignored(str(two / "x.bin")) and not second.is_ignored(str(one / "x.bin"))
