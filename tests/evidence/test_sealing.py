"""Sealing is serialized and never silent: one bundle per state of the store however many
`mlpipe evidence C` callers start at once (real processes, SQLite and PostgreSQL), and
`--verify` never seals: a missing bundle chain is finding MP720."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from bundle_project import BundleProject

CALLERS = 8


def _bundles(proj: BundleProject) -> list[tuple[str, str | None]]:
    url = proj.store_url or f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT digest, previous_digest FROM bundles")).all()
    engine.dispose()
    return [tuple(r) for r in rows]


def _all_at_once(proj: BundleProject, *args: str) -> list[subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME", "MLPIPE_STORE_URL")}
    if proj.store_url:
        env["MLPIPE_STORE_URL"] = proj.store_url
    procs = [subprocess.Popen([sys.executable, "-m", "mlpipe.cli", *args], cwd=proj.root,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(CALLERS)]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


@pytest.mark.slow
def test_concurrent_first_callers_seal_one_bundle(tmp_path, store_url):
    proj = BundleProject(tmp_path / "proj", store_url)
    cand = proj.submit()
    done = _all_at_once(proj, "evidence", cand, "--format", "json")
    assert [d.returncode for d in done] == [0] * CALLERS, [d.stderr for d in done]
    assert len({d.stdout for d in done}) == 1  # every caller shows the same bytes
    [(digest, previous)] = _bundles(proj)
    assert previous is None
    assert json.loads(done[0].stdout)["predicate"]["previous_bundle"] is None
    verified = proj.evidence(cand, "--verify")
    assert verified.returncode == 0, verified.stdout
    assert f"verified bundle {digest}" in verified.stdout

    # after a change, concurrent re-sealers add exactly one bundle to the chain
    proj.sql("UPDATE candidates SET name = 'renamed'")
    again = _all_at_once(proj, "evidence", cand, "--format", "json", "--rebuild")
    assert [d.returncode for d in again] == [0] * CALLERS, [d.stderr for d in again]
    assert len({d.stdout for d in again}) == 1
    chain = _bundles(proj)
    assert len(chain) == 2 and {p for _, p in chain} == {None, digest}
    assert proj.evidence(cand, "--verify").returncode == 0


def test_verify_never_seals_a_missing_chain(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    done = proj.evidence(cand, "--verify")
    assert done.returncode == 1
    assert (f"error[MP720] bundle-chain-missing: candidate {cand} has no sealed bundle to verify "
            f"against: it was never sealed, or its bundles were removed from the store"
            in done.stdout), done.stdout
    assert _bundles(proj) == []  # nothing was sealed


def test_deleted_bundles_and_an_edited_metric_are_found_not_resealed(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    proj.sql("DELETE FROM bundles")
    proj.sql("UPDATE metrics SET value = 0.99 WHERE name = 'accuracy'")
    done = proj.evidence(cand, "--verify", "--format", "json")
    assert done.returncode == 1
    found = json.loads(done.stdout)
    assert (found["ok"], found["bundle"]) == (False, "(none)")
    assert [m["code"] for m in found["mismatches"]] == ["MP720"]
    assert _bundles(proj) == []
