"""The trust policy and authenticated decisions: `--verify --trust` judges every signature of a
candidate's chain and of its decisions; `review --key` signs a decision (a VSA) as the key's
identity; `review` and `qualify` refuse evidence that does not verify under the policy; each
forgery by a store writer is caught with its own code. Real keys generated per test, real
submits, the CLI as a process, SQLite and PostgreSQL."""
from __future__ import annotations

import getpass
import json
import re
from pathlib import Path

import pytest

from bundle_project import BundleProject
from dsse_check import sslib_verify
from mlpipe.errors import UsageError
from mlpipe.evidence.signatures import keys
from mlpipe.evidence.signatures.trust import load_trust

pytestmark = pytest.mark.slow


def _project(tmp_path: Path, store_url: str | None = None, *,
             sam_accounts: str = "[nobody-here]") -> BundleProject:
    """A project sealed by `ci`, with reviewers `dana` and `sam` (sam's accounts as given)."""
    proj = BundleProject(tmp_path / "proj", store_url)
    for name in ("ci", "dana", "sam", "mallory"):
        keys.generate(proj.root / f"{name}.pem")
    (proj.root / "mlpipe.toml").write_text('[signing]\nkey = "ci.pem"\n')
    (proj.root / "trust.yml").write_text(
        "identities:\n"
        "  ci: {public_key: ci.pub, may: [seal]}\n"
        "  dana: {public_key: dana.pub, may: [decide], accounts: [dana]}\n"
        f"  sam: {{public_key: sam.pub, may: [decide], accounts: {sam_accounts}}}\n")
    return proj


def _verify(proj: BundleProject, cand: str, *extra: str) -> tuple[int, list[str], str]:
    done = proj.evidence(cand, "--verify", *extra)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, re.findall(r"^error\[(MP\d+)\]", done.stdout, re.M), done.stdout


def _sql(proj: BundleProject, *statements: str) -> None:
    """A store writer's edits, in one transaction (PostgreSQL: foreign keys not enforced, as a
    writer who owns the tables can arrange)."""
    import sqlalchemy as sa

    url = proj.store_url or f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("SET session_replication_role = replica"))
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


def test_a_signed_chain_and_a_signed_decision_verify_and_each_forgery_is_caught(
        store_url, tmp_path, monkeypatch):
    proj = _project(tmp_path, store_url)
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    rc, codes, out = _verify(proj, cand, "--trust", "trust.yml")
    assert (rc, codes) == (0, []), out
    assert "signatures checked against the trust policy trust.yml, nothing changed" in out
    shown = proj.cli("candidates", "--trust", "trust.yml").stdout.splitlines()
    assert shown[0].endswith("SIGNED") and shown[1].endswith("  signed by ci")
    assert proj.cli("candidates").stdout.splitlines()[1].endswith(
        "  key " + keys.load_private(proj.root / "ci.pem").keyid[:8])
    done = proj.cli("review", cand, "--accept", "--key", "dana.pem", "--trust", "trust.yml",
                    "--note", "meets the policy")
    assert done.returncode == 0, done.stderr
    dana = keys.load_private(proj.root / "dana.pem")
    assert done.stdout.startswith(f"accepted candidate {cand} by dana (signed, key "
                                  f"{dana.keyid[:16]}), citing bundle sha256:")
    # the bundle the decision sealed is signed by dana, who may decide: it changes only review
    assert _verify(proj, cand, "--trust", "trust.yml")[:2] == (0, [])
    bundle = proj.bundle(cand)
    [decision] = bundle["predicate"]["review"]["decisions"]
    assert decision["by"] == "dana"

    # 1. a metric row edited and the chain resealed with a key of the forger's own
    _sql(proj, "UPDATE metrics SET value = 0.99 WHERE name = 'accuracy'")
    with monkeypatch.context() as env:
        env.setenv("MLPIPE_SIGNING_KEY", str(proj.root / "mallory.pem"))
        assert proj.evidence(cand, "--rebuild").returncode == 0
    rc, codes, out = _verify(proj, cand, "--trust", "trust.yml")
    assert (rc, codes) == (1, ["MP732"]), out
    [listed] = json.loads(proj.cli("candidates", "--trust", "trust.yml", "--format",
                                   "json").stdout)["candidates"]
    mallory = keys.load_private(proj.root / "mallory.pem").keyid
    assert listed["signature"] == {"state": "untrusted", "keyid": mallory, "identity": None}
    assert "which the trust policy trust.yml does not name" in out
    assert _verify(proj, cand)[:2] == (0, [])   # without the policy, every hash still holds

    # 2. the resealed bundle given the trusted first bundle's envelope instead
    newest = re.findall(r"sha256:[0-9a-f]{64}", out)[0]
    _sql(proj, "UPDATE bundle_signatures SET envelope = (SELECT envelope FROM bundle_signatures "
               "s2 WHERE s2.bundle_digest = (SELECT MIN(b.digest) FROM bundles b WHERE "
               f"b.previous_digest IS NULL)) WHERE bundle_digest = '{newest}'")
    rc, codes, out = _verify(proj, cand, "--trust", "trust.yml")
    assert (rc, codes) == (1, ["MP731"]), out
    assert "its envelope signs other bytes than the bundle's" in out

    # 3. the signed acceptance turned into a rejection in the store
    _sql(proj, "UPDATE decisions SET verdict = 'rejected'")
    rc, codes, out = _verify(proj, cand, "--trust", "trust.yml")
    assert "MP734" in codes and "its signed statement says accepted on bundle" in out

    # 4. signed or not: the chain deleted and resealed after the decision
    _sql(proj, "UPDATE decisions SET verdict = 'accepted'", "DELETE FROM bundle_signatures",
         "DELETE FROM bundles")
    assert proj.evidence(cand).returncode == 0
    rc, codes, out = _verify(proj, cand)
    assert (rc, codes) == (1, ["MP737"]), out
    assert (f"the accepted decision (recorded in the store) cites bundle "
            f"{decision['bundle']}, which is not in candidate {cand}'s sealed chain") in out


def test_a_decision_by_the_submitter_is_refused_and_caught(tmp_path):
    me = getpass.getuser()
    proj = _project(tmp_path, sam_accounts=f"[{me}]")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    done = proj.cli("review", cand, "--accept", "--key", "sam.pem", "--trust", "trust.yml",
                    "--note", "my own model")
    assert done.returncode == 1 and done.stdout == ""
    assert (f"[MP736 decider-is-submitter] 'sam' submitted the run of candidate {cand} (as "
            f"{me!r}): the decider is not the submitter") in done.stderr
    # recorded under a policy that did not know sam's accounts: --verify catches it later
    (proj.root / "lax.yml").write_text((proj.root / "trust.yml").read_text()
                                       .replace(f"accounts: [{me}]", "accounts: []"))
    assert proj.cli("review", cand, "--accept", "--key", "sam.pem", "--trust", "lax.yml",
                    "--note", "my own model").returncode == 0
    rc, codes, out = _verify(proj, cand, "--trust", "trust.yml")
    assert (rc, codes) == (1, ["MP736"]), out
    # a key that may seal but not decide is refused before anything is recorded
    done = proj.cli("review", cand, "--reject", "--key", "ci.pem", "--trust", "trust.yml",
                    "--note", "no")
    assert done.returncode == 1
    assert "[MP735 decision-signer-untrusted] the key " in done.stderr
    assert "is 'ci', who may seal but not decide" in done.stderr
    # and review refuses a candidate whose evidence does not verify under the policy
    done = proj.cli("review", cand, "--reject", "--key", "dana.pem", "--trust", "trust.yml",
                    "--note", "no")
    assert done.returncode == 1
    assert (f"[MP736 decider-is-submitter] candidate {cand}'s evidence does not verify under "
            f"the trust policy trust.yml (1 finding, first: ") in done.stderr


def test_unsigned_decisions_remain_possible_and_show_as_unsigned(tmp_path):
    proj = _project(tmp_path)
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    done = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "ok")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"accepted candidate {cand} by dana, citing bundle")
    rc, codes, out = _verify(proj, cand, "--trust", "trust.yml")
    assert (rc, codes) == (1, ["MP733"]), out
    assert "its reviewer ('dana', free text) is not authenticated" in out
    assert _verify(proj, cand)[:2] == (0, [])
    # qualify refuses the candidate under the policy, and judges it without one
    (proj.root / "policy.yml").write_text("name: p\nfindings_absent: [error]\n")
    done = proj.cli("qualify", cand, "--policy", "policy.yml", "--trust", "trust.yml")
    assert done.returncode == 1 and "[MP733 decision-unsigned] candidate" in done.stderr
    assert proj.cli("qualify", cand, "--policy", "policy.yml").returncode == 0
    # a signed decision whose --by disagrees with the key's identity is a usage error
    done = proj.cli("review", cand, "--reject", "--key", "dana.pem", "--by", "sam",
                    "--trust", "trust.yml", "--note", "x")
    assert done.returncode == 2
    assert "--by 'sam', but the trust policy names the key" in done.stderr


def test_the_signed_decision_is_a_vsa_that_securesystemslib_verifies(tmp_path):
    proj = _project(tmp_path)
    cand = proj.submit()
    cited = json.loads(proj.evidence(cand, "--format", "json").stdout)
    assert proj.cli("review", cand, "--reject", "--key", "dana.pem", "--trust", "trust.yml",
                    "--note", "too slow").returncode == 0
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}")
    with engine.connect() as conn:
        envelope = conn.execute(sa.text("SELECT envelope FROM decisions")).scalar_one()
    engine.dispose()
    vsa = json.loads(sslib_verify(envelope, (proj.root / "dana.pub").read_bytes()))
    p = vsa["predicate"]
    assert vsa["predicateType"] == "https://slsa.dev/verification_summary/v1"
    assert vsa["subject"][0]["name"] == f"mlpipe:candidate/{cand}"
    assert vsa["subject"][0]["digest"] == {
        "blake3": cited["predicate"]["candidate"]["model"].split(":")[1]}
    assert p["verificationResult"] == "FAILED" and p["mlpipe"]["verdict"] == "rejected"
    bundle = p["inputAttestations"][0]
    assert bundle["uri"].startswith("mlpipe:bundle/sha256:")
    dana = keys.keyid_of((proj.root / "dana.pub").read_bytes())
    assert p["verifier"]["id"] == f"mlpipe:key/{dana}"


def test_a_trust_policy_that_cannot_be_used_is_one_line(tmp_path):
    keys.generate(tmp_path / "a.pem")

    def bad(text: str, match: str) -> None:
        (tmp_path / "t.yml").write_text(text)
        with pytest.raises(UsageError, match=match):
            load_trust(tmp_path / "t.yml")

    bad("[]\n", r"it needs an 'identities' mapping")
    bad("identities:\n  a: {public_key: a.pub, may: [approve]}\n",
        r"identity 'a': 'may' is a list of seal and/or decide, not \['approve'\]")
    bad("identities:\n  a: {public_key: nope.pub, may: [seal]}\n",
        r"identity 'a': cannot read its public key .*nope\.pub")
    bad("identities:\n  a: {public_key: a.pub, may: [seal]}\n  b: {public_key: a.pub, "
        "may: [decide]}\n", r"identities 'a' and 'b' hold the same key")
    bad("identities:\n  a: {public_key: a.pem, may: [seal]}\n",
        r"identity 'a': its public key is not an ECDSA P-256 public key in PEM")
    bad("identities:\n  a: {public_key: a.pub, may: [seal]}\nrules: {anyone_decides: true}\n",
        r"rules are true/false values of decider_is_not_submitter, signed_decisions")
    bad("identities:\n  a: {may: [seal]}\n", r"identity 'a' needs one of public_key")
    with pytest.raises(UsageError, match=r"cannot read the trust policy .*absent\.yml"):
        load_trust(tmp_path / "absent.yml")
    (tmp_path / "t.yml").write_text("identities:\n  a: {public_key: a.pub, may: [seal]}\n")
    trust = load_trust(tmp_path / "t.yml")
    assert [i.name for i in trust.identities.values()] == ["a"]
    assert trust.decider_is_not_submitter and trust.signed_decisions
