"""MP529 only for a write that replaces what the launcher injected: a write that fills the
variable in where it is unset, or sets it to its own value, keeps it (issue 39)."""
from __future__ import annotations

import textwrap

import pytest

from mlpipe.checks.envkeep import keeps_injected


@pytest.mark.parametrize(("code", "keeps"), [
    ('os.environ["RANK"] = "0"', False),
    ('os.environ["RANK"] = os.environ["LOCAL_RANK"]', False),
    ('if "RANK" not in os.environ:\n    os.environ["RANK"] = "0"', True),
    ('if "RANK" in os.environ:\n    os.environ["RANK"] = "0"', False),
    ('if os.environ.get("RANK") is None:\n    os.environ["RANK"] = "0"', True),
    ('if not os.getenv("RANK"):\n    os.environ["RANK"] = "0"', True),
    ('if not os.getenv("WORLD_SIZE"):\n    os.environ["RANK"] = "0"', False),
    ('if "RANK" not in os.environ:\n    pass\nelse:\n    os.environ["RANK"] = "0"', False),
    ('os.environ["RANK"] = os.environ.get("RANK", "0")', True),
    ('os.environ["RANK"] = str(int(os.getenv("RANK") or 0))', True),
    ('os.environ["RANK"] = str(int(os.environ.get("OMPI_COMM_WORLD_RANK", 0)))', False),
])
def test_a_write_keeps_the_injected_value_only_where_it_is_unset_or_its_own(tmp_path, code,
                                                                              keeps):
    path = tmp_path / "train.py"
    path.write_text("import os\n" + textwrap.dedent(code) + "\n")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if text.strip().startswith('os.environ["RANK"] ='))
    assert keeps_injected(str(path), line, "RANK") is keeps
    assert keeps_injected(str(path), line, "WORLD_SIZE") is False  # not written there


def test_a_file_that_cannot_be_read_keeps_nothing(tmp_path):
    assert keeps_injected(str(tmp_path / "missing.py"), 1, "RANK") is False
