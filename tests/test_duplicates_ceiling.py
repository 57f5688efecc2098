"""scripts/duplicates_ceiling.py (`make duplicates`): the pairs of places in mlpipe/ that share
six or more lines, migrations left out, stay under a ceiling that only goes down."""
from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "duplicates_ceiling.py"
# the script imports its neighbour ``ceilings`` as ``python scripts/...`` finds it: beside it
sys.path.insert(0, str(SCRIPT.parent))
_spec = importlib.util.spec_from_file_location("duplicates_ceiling", SCRIPT)
assert _spec is not None and _spec.loader is not None
ceiling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ceiling)

#: the count when the ceiling was introduced (issue 41: 48 pairs outside the migrations)
FIRST_CEILING = 48

OUTPUT = """\
5 pairs of places (234 files read), each sharing runs of 6 or more identical or same-shape lines
D1 codes/pipelines.py:69-81 ~ codes/pipelines.py:200-223 shape (+53 more runs)
D2 evidence/storage/migrations/versions/0001_a.py:195-205 ~ evidence/storage/migrations/versions/0001_a.py:208-218 shape
D3 evidence/storage/migrations/versions/0002_x.py:1-9 ~ evidence/storage/store.py:10-18
D4 backends/azure/importer.py:57-66 ~ backends/azure/singlejob.py:28-37
D5 spec.py:244-253 ~ spec.py:463-472 shape boilerplate
left out: 7 runs of 6 lines that stand in more than 8 places each (too common to list)
"""


def test_the_committed_ceiling_is_a_number_never_above_where_it_started():
    assert 0 <= ceiling.CEILING.read() <= FIRST_CEILING


def test_a_pair_with_a_side_in_a_migration_is_not_counted():
    assert [r.split()[0] for r in ceiling.counted(OUTPUT)] == ["D1", "D4", "D5"]


def test_an_incomplete_reading_is_told_apart():
    assert ceiling.incomplete(OUTPUT) is None
    assert ceiling.incomplete(OUTPUT + "incomplete: time: 3 files not paired\n") == \
        "incomplete: time: 3 files not paired"


def test_the_verdict_fails_above_the_ceiling_and_asks_to_lower_below_it():
    status, line = ceiling.verdict(12, 10)
    assert status == 1 and "2 more than the ceiling of 10" in line
    status, line = ceiling.verdict(7, 10)
    assert status == 0 and "lower the ceiling to 7" in line
    assert ceiling.verdict(10, 10) == (0, "duplicates: 10 pairs in mlpipe/, at the ceiling of 10")


def test_the_ceiling_file_round_trips(tmp_path):
    path = tmp_path / "ceiling"
    file = dataclasses.replace(ceiling.CEILING, path=path)
    file.write(31)
    assert file.read() == 31
    assert path.read_text(encoding="utf-8").startswith("# pairs of places in mlpipe/")
    path.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no number"):
        file.read()


@pytest.mark.skipif(shutil.which("duplicates") is None,
                    reason="the `duplicates` command (a developer tool) is not on PATH here")
def test_mlpipe_is_at_or_under_the_ceiling():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "duplicates:" in done.stdout
