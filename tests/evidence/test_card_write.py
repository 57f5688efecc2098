"""`evidence --format model-card` writes the card and its ML-BOM together or not at all: each
goes to a temporary file beside its place, then both are renamed, so a failure at either
leaves neither (nor a temporary file). Real submit, real store, the CLI as a process."""
from __future__ import annotations

import pytest

from bundle_project import BundleProject

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    proj = BundleProject(tmp_path_factory.mktemp("card") / "proj")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    return proj, cand


@pytest.mark.parametrize("blocked", ["model-card.md", "model-card.cdx.json", None])
def test_the_card_and_its_ml_bom_are_written_together_or_not_at_all(sealed, blocked):
    proj, cand = sealed
    out = proj.root / f"out-{blocked}"
    out.mkdir()
    if blocked is not None:   # a folder where one of the two files goes: its rename fails
        (out / blocked).mkdir()
    done = proj.cli("evidence", cand, "--format", "model-card", "-o", f"{out.name}/model-card.md")
    left = sorted(p.name for p in out.iterdir())
    if blocked is None:
        assert done.returncode == 0, done.stderr
        assert left == ["model-card.cdx.json", "model-card.md"]
        return
    assert done.returncode == 2 and "Traceback" not in done.stderr
    if blocked == "model-card.md":   # click refuses the -o folder before anything runs
        assert "model-card.md' is a directory" in done.stderr
    else:
        assert done.stderr == (f"error: cannot write {out.name}/model-card.cdx.json: Is a "
                               f"directory\n  help: choose another path\n")
    assert left == [blocked]   # only the folder that was there: no card, no ML-BOM, no temp
