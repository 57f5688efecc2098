"""Reads outside the declared inputs, end to end: real `mlpipe submit` processes whose step
reads a file beside the pipeline. Undeclared: MP804 after the step, the content recorded, and
reuse only while that content is unchanged. Declared with ``reads=``: no finding, reused."""
from __future__ import annotations

import re

import pytest

from executor_project import Project
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

pytestmark = pytest.mark.slow
LEFT = ("left=left.txt",)


@pytest.fixture
def proj(tmp_path):
    project = Project(tmp_path / "proj")
    (project.root / "scale.txt").write_text("3")
    return project


def _steps(proj, result):
    rid = re.search(r"^run (r-[0-9a-f]+) \w+$", result.stdout, re.M).group(1)
    store = Store.open(f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            return [(sr.status, sr.message, sr.record) for sr in s.get(m.Run, rid).steps]
    finally:
        store.close()


def test_an_undeclared_read_is_reported_recorded_and_reused_only_while_unchanged(proj):
    scale = str(proj.root / "scale.txt")
    first = proj.submit("hidden.py:hidden", inputs=LEFT)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (f"warning[MP804] read-outside-inputs: step 'scale_hidden' read a file outside its "
            f"declared inputs ('{scale}')") in first.stderr
    [(status, _, record)] = _steps(proj, first)
    assert status == "executed"
    [entry] = record["step"]["hidden_inputs"]
    assert entry["path"] == scale and entry["ranks"] == [0] and entry["declared"] is False
    assert entry["digest"].startswith("blake3:") and entry["size"] == 1

    second = proj.submit("hidden.py:hidden", inputs=LEFT)
    assert [s[0] for s in _steps(proj, second)] == ["reused"]

    (proj.root / "scale.txt").write_text("4")
    third = proj.submit("hidden.py:hidden", inputs=LEFT)
    [(status, message, record)] = _steps(proj, third)
    assert status == "executed"
    assert re.fullmatch(rf"step run s-[0-9a-f]+ read '{re.escape(scale)}' outside its inputs, "
                        rf"and its content has changed since: the step runs again", message)
    assert f"'scale_hidden' is not reused: {message}" in third.stderr
    assert record["step"]["hidden_inputs"][0]["digest"] != entry["digest"]

    (proj.root / "scale.txt").unlink()
    gone = proj.submit("hidden.py:hidden", inputs=LEFT)
    assert gone.returncode == 1   # it ran again (and failed: the file is gone), not reused
    assert "and it is gone now: the step runs again" in gone.stderr


def test_a_declared_read_raises_no_finding_and_is_reused_whatever_it_holds(proj):
    first = proj.submit("hidden.py:declared", inputs=LEFT)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "MP804" not in first.stderr
    [(_, _, record)] = _steps(proj, first)
    assert [e["declared"] for e in record["step"]["hidden_inputs"]] == [True]
    (proj.root / "scale.txt").write_text("4")
    again = proj.submit("hidden.py:declared", inputs=LEFT)
    assert [s[0] for s in _steps(proj, again)] == ["reused"]
