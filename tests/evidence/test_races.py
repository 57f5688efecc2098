"""Reviews that race: N `mlpipe review`s of one candidate started together record exactly one
decision per bundle (the others refused as stale, MP715), with no deadlock and nothing said
about reachability; the store's uniqueness rule makes a second decision on one bundle
impossible, and `--verify` reports two decisions citing one bundle (MP715) where a store
recorded them before the rule. Real submits, real SQLite and PostgreSQL, the CLI as processes."""
from __future__ import annotations

import hashlib
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from bundle_project import BundleProject

pytestmark = pytest.mark.slow

REVIEWERS = 4
POLICY = "name: p\nmetrics:\n  - {name: accuracy, population: test, at_least: 0.8}\n"


def _rows(proj: BundleProject, query: str) -> list[tuple]:
    import sqlalchemy as sa

    url = proj.store_url or f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.text(query))]
    engine.dispose()
    return rows


@pytest.fixture
def sealed(store_url, tmp_path):
    proj = BundleProject(tmp_path / "proj", store_url)
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    (proj.root / "policy.yml").write_text(POLICY)
    return proj, cand


@pytest.mark.parametrize("verdicts", ["accept", "mixed"])
def test_concurrent_reviews_record_one_decision_per_bundle(sealed, verdicts):
    proj, cand = sealed
    flags = ["--accept" if verdicts == "accept" or i % 2 else "--reject"
             for i in range(REVIEWERS)]

    shown = proj.evidence(cand, "--format", "json").stdout   # what every reviewer read
    read = "sha256:" + hashlib.sha256(shown.encode()).hexdigest()

    def review(i: int):
        return proj.cli("review", cand, flags[i], "--by", f"reviewer-{i}", "--note", "raced",
                        "--policy", "policy.yml", "--bundle", read)

    with ThreadPoolExecutor(REVIEWERS) as pool:
        done = list(pool.map(review, range(REVIEWERS)))
    won = [d for d in done if d.returncode == 0]
    lost = [d for d in done if d.returncode != 0]
    assert len(won) == 1, [d.stderr for d in done]
    for d in lost:   # refused as stale, never a deadlock or "reachable"
        assert d.returncode == 1, d.stderr
        assert d.stderr.startswith("error: [MP715 decision-on-stale-bundle] "), d.stderr
        assert not re.search(r"deadlock|reachable|Traceback", d.stderr), d.stderr
    decisions = _rows(proj, "SELECT bundle_digest FROM decisions")
    assert len(decisions) == 1
    assert decisions == [(read,)]
    verified = proj.evidence(cand, "--verify")
    assert verified.returncode == 0, verified.stdout


def test_a_second_decision_on_one_bundle_is_refused_by_the_store(sealed):
    import sqlalchemy as sa

    proj, cand = sealed
    assert proj.cli("review", cand, "--reject", "--by", "lee", "--note", "n").returncode == 0
    [(digest, at)] = _rows(proj, "SELECT bundle_digest, decided_at FROM decisions")
    with pytest.raises(sa.exc.IntegrityError, match=r"(?i)unique|duplicate"):
        proj.sql(f"INSERT INTO decisions (candidate_id, bundle_digest, verdict, reviewer, note, "
                 f"decided_at) VALUES ('{cand}', '{digest}', 'accepted', 'kim', 'again', "
                 f"'{at}')")


@pytest.mark.parametrize("doubled", [True, False], ids=["two-on-one-bundle", "one-each"])
def test_verify_reports_two_decisions_citing_one_bundle(sealed, doubled):
    proj, cand = sealed
    assert proj.cli("review", cand, "--reject", "--by", "lee", "--note", "n").returncode == 0
    [(digest, at)] = _rows(proj, "SELECT bundle_digest, decided_at FROM decisions")
    # a store from before schema 0012: the rule was not there, and two reviewers raced
    proj.sql("DROP INDEX uq_decisions_bundle")
    if doubled:
        proj.sql(f"INSERT INTO decisions (candidate_id, bundle_digest, verdict, reviewer, note, "
                 f"decided_at) VALUES ('{cand}', '{digest}', 'accepted', 'kim', 'raced', "
                 f"'{at}')")
    done = proj.evidence(cand, "--verify")
    codes = re.findall(r"^error\[(MP\d+)\]", done.stdout, re.M)
    if doubled:
        assert done.returncode == 1
        assert "MP715" in codes, done.stdout
        assert re.search(rf"error\[MP715\] decision-on-stale-bundle: 2 decisions recorded in the "
                         rf"store cite bundle {digest} \(rejected by lee, accepted by kim\)",
                         done.stdout), done.stdout
    else:
        assert "MP715" not in codes, done.stdout


def test_a_store_with_doubled_decisions_upgrades_and_refuses_new_doubles(sealed):
    """0012 on a store that let reviewers race before it: the doubles stay (evidence, reported
    by --verify), and the rule holds for every decision recorded after them."""
    import sqlalchemy as sa

    proj, cand = sealed
    assert proj.cli("review", cand, "--reject", "--by", "lee", "--note", "n").returncode == 0
    [(digest, at)] = _rows(proj, "SELECT bundle_digest, decided_at FROM decisions")
    proj.sql("DROP INDEX uq_decisions_bundle")
    proj.sql("DROP TABLE promotion_claims")
    proj.sql("UPDATE alembic_version SET version_num = '0011_promotions'")
    proj.sql(f"INSERT INTO decisions (candidate_id, bundle_digest, verdict, reviewer, note, "
             f"decided_at) VALUES ('{cand}', '{digest}', 'accepted', 'kim', 'raced', '{at}')")
    done = proj.evidence(cand, "--verify")   # opening the store upgrades it to 0012
    assert done.returncode == 1 and "error[MP715]" in done.stdout, done.stdout
    assert _rows(proj, "SELECT version_num FROM alembic_version") == [("0012_i37_races",)]
    assert proj.evidence(cand, "--rebuild").returncode == 0   # seals the doubled state
    assert proj.cli("review", cand, "--reject", "--by", "lee", "--note", "again").returncode == 0
    [(newest,)] = _rows(proj, "SELECT bundle_digest FROM decisions WHERE note = 'again'")
    with pytest.raises(sa.exc.IntegrityError, match=r"(?i)unique|duplicate"):
        proj.sql(f"INSERT INTO decisions (candidate_id, bundle_digest, verdict, reviewer, note, "
                 f"decided_at) VALUES ('{cand}', '{newest}', 'accepted', 'kim', 'raced', "
                 f"'{at}')")


def test_contention_that_outlasts_the_retries_is_named_as_contention(tmp_path):
    """A real SQLite write lock held by another connection: the transaction is tried again
    (TRIES times), then named as contention, never as an unreachable database."""
    import sqlite3

    import sqlalchemy as sa

    from mlpipe.errors import StoreError
    from mlpipe.evidence.storage.contention import TRIES, transact
    from mlpipe.evidence.storage.store import Store

    path = tmp_path / "store.sqlite"
    Store.open(f"sqlite:///{path}").close()   # the schema, at head
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")   # another writer, holding the lock throughout
    store = Store(sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05}))
    tries = []

    def write(s):
        tries.append(1)
        s.execute(sa.text("INSERT INTO store_keys (name, value, created_at) VALUES "
                          "('x', 'y', '2026-01-01')"))

    try:
        with pytest.raises(StoreError, match=r"is contended, not unreachable: concurrent "
                                             r"writers held the same rows \(database is "
                                             r"locked\)") as caught:
            transact(store, write)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        store.close()
    assert len(tries) == TRIES
    assert "reachable" not in (caught.value.hint or "")


def test_a_live_promotion_claim_is_waited_for_and_a_dead_one_taken_over(sealed):
    import os
    import subprocess
    import sys

    from mlpipe.evidence.qualification.claims import PromotionBusy, take
    from mlpipe.evidence.storage.store import Store

    proj, cand = sealed
    store = Store.open(proj.store_url or f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}")
    try:
        first = take(store, cand, "mlflow", "http://registry", "m")   # held by this process
        assert first.taken_from is None
        with pytest.raises(PromotionBusy, match=rf"{cand} is being promoted to m at "
                                                rf"http://registry by process {os.getpid()} "
                                                rf"on .*, which kept it for the 1 s this "
                                                rf"promote waited"):
            take(store, cand, "mlflow", "http://registry", "m", wait=0.6)
        other = take(store, cand, "mlflow", "http://registry", "other-name", wait=0)
        assert other.id != first.id and other.taken_from is None
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        proj.sql(f"UPDATE promotion_claims SET pid = {gone.pid} WHERE id = {first.id}")
        again = take(store, cand, "mlflow", "http://registry", "m", wait=0)
        assert again.id == first.id
        assert again.taken_from is not None and again.taken_from.startswith(
            f"process {gone.pid} on ")
    finally:
        store.close()


def test_concurrent_signed_reviews_record_one_decision_and_verify_under_trust(store_url,
                                                                              tmp_path):
    """Signed decisions race as unsigned ones do (the issue's deadlocks were both kinds):
    one is recorded, the others are refused as stale, and the chain verifies under --trust."""
    from mlpipe.evidence.signatures import keys

    proj = BundleProject(tmp_path / "proj", store_url)
    for name in ("ci", "dana", "sam"):
        keys.generate(proj.root / f"{name}.pem")
    (proj.root / "mlpipe.toml").write_text('[signing]\nkey = "ci.pem"\n')
    (proj.root / "trust.yml").write_text(
        "identities:\n"
        "  ci: {public_key: ci.pub, may: [seal]}\n"
        "  dana: {public_key: dana.pub, may: [decide], accounts: [nobody-a]}\n"
        "  sam: {public_key: sam.pub, may: [decide], accounts: [nobody-b]}\n")
    cand = proj.submit()
    shown = proj.evidence(cand, "--format", "json").stdout
    read = "sha256:" + hashlib.sha256(shown.encode()).hexdigest()
    signers = ["dana.pem", "sam.pem"] * (REVIEWERS // 2)

    def review(i: int):
        return proj.cli("review", cand, "--accept" if i % 2 else "--reject", "--key",
                        signers[i], "--trust", "trust.yml", "--note", "raced", "--bundle", read)

    with ThreadPoolExecutor(REVIEWERS) as pool:
        done = list(pool.map(review, range(REVIEWERS)))
    assert sorted(d.returncode for d in done) == [0] + [1] * (REVIEWERS - 1), \
        [d.stderr for d in done]
    for d in done:
        if d.returncode:
            assert d.stderr.startswith("error: [MP715 decision-on-stale-bundle] "), d.stderr
            assert not re.search(r"deadlock|reachable|Traceback", d.stderr), d.stderr
    assert _rows(proj, "SELECT bundle_digest, signer IS NOT NULL FROM decisions") == [
        (read, True)]
    verified = proj.evidence(cand, "--verify", "--trust", "trust.yml")
    assert verified.returncode == 0, verified.stdout
