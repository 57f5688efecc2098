"""Writers found from what the ranks' audit hooks saw, for distributed steps that never call
mlpipe's helpers: real `mlpipe submit` processes, two real ranks, plain file writes."""
from __future__ import annotations

import pytest

from executor_project import Project

pytestmark = pytest.mark.slow


@pytest.fixture
def proj(tmp_path):
    return Project(tmp_path / "proj")


def test_a_rank0_save_without_mark_written_coordinates(proj):
    done = proj.submit("observed", inputs=("left=left.txt",))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("params", "expected"), [
    (("--param", "mode=every"),
     "error[MP524] multiple-writers: output 'model' was written by 2 ranks (0, 1); its writer "
     "policy is 'rank0' (observed: rank 1 wrote 'weights.json')"),
    (("--param", "mode=nobody"),
     "error[MP527] declared-writer-never-wrote: output 'model' is empty: its declared writer, "
     "rank 0 (policy 'rank0'), wrote nothing there, and neither did any other rank"),
    (("--param", "shards=one"),
     "error[MP527] declared-writer-never-wrote: output 'parts' is sharded (every rank writes "
     "its own part), but 1 of 2 ranks wrote nothing there (rank 1)"),
])
def test_writers_are_judged_from_what_the_ranks_wrote(proj, params, expected):
    done = proj.submit("observed", *params, inputs=("left=left.txt",))
    assert done.returncode == 1
    assert "step 'plain_train' did not coordinate" in done.stderr + done.stdout
    assert expected in done.stderr + done.stdout
