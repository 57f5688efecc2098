"""`mlpipe gc` on real runs, real step processes and a real store (SQLite and PostgreSQL):
it frees what no candidate needs, keeps every file a protected candidate's --verify re-hashes,
removes no store row, never runs under a running run, and a step whose outputs it removed
re-runs instead of reusing them."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from executor_project import Project

pytestmark = pytest.mark.slow


def _ids(result) -> tuple[str, str | None]:
    run = re.search(r"^run (r-[0-9a-f]+) \w+$", result.stdout, re.M)
    cand = re.search(r"^candidate (c-[0-9a-f]+)$", result.stdout, re.M)
    assert run, result.stdout + result.stderr
    return run.group(1), cand.group(1) if cand else None


def _rows(url: str) -> dict[str, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                    for t in ("runs", "step_runs", "artifacts", "step_artifacts", "candidates",
                              "bundles")}
    finally:
        engine.dispose()


def _statuses(proj: Project, rid: str) -> dict[str, str]:
    shown = json.loads(proj.cli("show", rid, "--format", "json").stdout)
    return {s["step"]: s["status"] for s in shown["steps"]}


def _gc(proj: Project, *args: str) -> dict:
    done = proj.cli("gc", *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_gc_frees_what_no_candidate_needs_and_the_candidate_still_verifies(tmp_path, store_url):
    proj = Project(tmp_path / "proj", store_url=store_url)
    rid, cand = _ids(proj.submit("chain"))
    assert cand is not None
    assert proj.cli("evidence", cand, "--format", "json").returncode in (0, 1)  # sealed
    spare, _ = _ids(proj.cli("submit", "diagnosed.py:spare", "--input", "left=left.txt"))
    arts = proj.root / "evidence" / "artifacts"
    work = proj.root / "evidence" / "work" / "r-killed00000"   # a killed executor's scratch
    (work / "step").mkdir(parents=True)
    (work / "step" / "half.bin").write_bytes(b"x" * 1000)
    before = sorted(p for p in arts.rglob("*") if p.is_file())
    rows = _rows(store_url)

    dry = _gc(proj, "--dry-run")
    assert dry["dry_run"] and dry["protected_candidates"] == [cand]
    assert len(dry["artifacts"]) == 1 and dry["kept_protected"] == 3
    # the killed run's scratch, and the emptied scratch folders of the finished runs
    assert sorted(s["path"] for s in dry["scratch"]) == sorted(
        str(p) for p in work.parent.iterdir())
    assert str(work) in {s["path"] for s in dry["scratch"]}
    assert dry["freed_bytes"] == dry["artifacts"][0]["size"] + 1000 == 2 + 1000
    assert sorted(p for p in arts.rglob("*") if p.is_file()) == before and work.exists()

    done = _gc(proj)
    assert not done["dry_run"] and done["artifacts"] == dry["artifacts"]
    assert not Path(done["artifacts"][0]["path"]).exists() and list(work.parent.iterdir()) == []
    assert _rows(store_url) == rows                       # no store row removed
    verified = proj.cli("evidence", cand, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    again, _ = _ids(proj.cli("submit", "diagnosed.py:spare", "--input", "left=left.txt"))
    assert _statuses(proj, again) == {"double": "executed"}   # its output was removed: re-run
    assert _statuses(proj, _ids(proj.submit("chain"))[0]) == {
        "double": "reused", "double_2": "reused", "add": "reused"}
    assert spare != again and rid


def test_older_than_keeps_what_was_used_recently(tmp_path, store_url):
    proj = Project(tmp_path / "proj", store_url=store_url)
    _ids(proj.cli("submit", "diagnosed.py:spare", "--input", "left=left.txt"))
    recent = _gc(proj, "--older-than", "1")
    assert (recent["artifacts"], recent["kept_recent"]) == ([], 1)
    text = proj.cli("gc", "--dry-run", "--older-than", "1")
    assert text.stdout == ("would remove 0 artifacts (0 B) and 0 scratch folders (0 B): 0 B to "
                           "free\nkept 0 artifacts needed by 0 candidates under review or "
                           "accepted\nkept 1 artifact used in the last 1 day\n")
    assert len(_gc(proj, "--older-than", "0")["artifacts"]) == 1


def test_gc_refuses_to_remove_while_a_run_is_running(tmp_path, store_url):
    proj = Project(tmp_path / "proj", store_url=store_url)
    gate = tmp_path / "gate"
    run = proj.popen("submit", "hold.py", "--input", "left=left.txt", "--param", f"gate={gate}")
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{gate}.started").exists():
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.05)
        busy = proj.cli("gc")
        assert busy.returncode == 2
        assert busy.stderr == (
            f"error: a run is using the artifact store {proj.root / 'evidence' / 'artifacts'}; "
            f"nothing was removed\n  help: run `mlpipe gc` again when no run is running "
            f"(`mlpipe gc --dry-run` shows what it would free meanwhile)\n")
        dry = _gc(proj, "--dry-run")
        assert len(dry["running_runs"]) == 1 and dry["artifacts"] == []
        assert dry["kept_protected"] == 1      # the running run's first output
        gate.write_text("")
        assert run.wait(60) == 0
    finally:
        if run.poll() is None:
            run.kill()


def test_a_negative_age_is_a_usage_error(tmp_path):
    proj = Project(tmp_path / "proj")
    done = proj.cli("gc", "--older-than", "-1")
    assert done.returncode == 2
    assert done.stderr == ("error: --older-than -1 is not a number of days of 0 or more\n"
                           "  help: give --older-than 30 to keep what was used in 30 days\n")


def test_gc_frees_this_homes_artifact_root_and_leaves_the_shared_one(tmp_path):
    proj = Project(tmp_path / "proj")
    own, shared = tmp_path / "roots" / "own", tmp_path / "shared"
    env = {"MLPIPE_ARTIFACT_ROOT": str(own), "MLPIPE_SHARED_ARTIFACTS": str(shared)}
    first = proj.cli("submit", "diagnosed.py:spare", "--input", "left=left.txt", env_extra=env)
    assert first.returncode == 0, first.stderr
    in_shared = sorted(p.relative_to(shared) for p in shared.rglob("*") if p.is_file())
    assert in_shared
    done = proj.cli("gc", "--format", "json", env_extra=env)
    assert done.returncode == 0, done.stderr
    removed = json.loads(done.stdout)["artifacts"]
    assert len(removed) == 1 and removed[0]["path"].startswith(str(own))
    assert not Path(removed[0]["path"]).exists()
    assert sorted(p.relative_to(shared) for p in shared.rglob("*") if p.is_file()) == in_shared
    # the shared root still has it: the next run fetches it (verified) instead of re-running
    again = proj.cli("submit", "diagnosed.py:spare", "--input", "left=left.txt", env_extra=env)
    assert _statuses_env(proj, _ids(again)[0], env) == {"double": "reused"}


def _statuses_env(proj: Project, rid: str, env: dict[str, str]) -> dict[str, str]:
    shown = json.loads(proj.cli("show", rid, "--format", "json", env_extra=env).stdout)
    return {s["step"]: s["status"] for s in shown["steps"]}


def test_a_rejected_candidate_is_not_protected(tmp_path, store_url):
    proj = Project(tmp_path / "proj", store_url=store_url)
    _, cand = _ids(proj.submit("chain"))
    proj.cli("evidence", cand)   # sealed (it has an error finding: no evaluation)
    review = proj.cli("review", cand, "--reject", "--by", "lee", "--note", "not evaluated")
    assert review.returncode == 0, review.stderr
    dry = _gc(proj, "--dry-run")
    assert (dry["protected_candidates"], dry["rejected_candidates"]) == ([], [cand])
    assert (len(dry["artifacts"]), dry["kept_protected"]) == (3, 0)
    text = proj.cli("gc", "--dry-run").stdout
    assert text.endswith("kept 0 artifacts needed by 0 candidates under review or accepted\n"
                         "not protected: 1 rejected candidate\n")
    _gc(proj)
    verified = proj.cli("evidence", cand, "--verify")
    assert verified.returncode == 1 and "MP712" in verified.stdout
    again, _ = _ids(proj.submit("chain"))
    assert _statuses(proj, again) == {"double": "executed", "double_2": "executed",
                                      "add": "executed"}
