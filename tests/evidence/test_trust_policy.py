"""The trust policy judged in-process, fast: who may seal a bundle (MP732, bundle-signer-untrusted:
its triggering and clean cases, with real keys and real DSSE envelopes over real statement
bytes), and the user's parse cache of policy files (never trusted when another could have
written it, never stale for edited bytes)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mlpipe.errors import UsageError
from mlpipe.evidence.signatures import dsse, keys
from mlpipe.evidence.signatures.trust import cache_folder, judge_bundles, load_trust


def _bundle(metric: float, review: str = "unreviewed", previous: str | None = None) -> bytes:
    return json.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": [],
                       "predicate": {"metrics": {"accuracy": metric},
                                     "review": {"status": review}, "previous_bundle": previous,
                                     "sealed_at": f"2026-12-02T0{len(review)}:00:00"}}).encode()


@pytest.fixture
def policy(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    signers = {n: keys.generate(tmp_path / f"{n}.pem") for n in ("ci", "dana", "mallory")}
    (tmp_path / "trust.yml").write_text("identities:\n"
                                        "  ci: {public_key: ci.pub, may: [seal]}\n"
                                        "  dana: {public_key: dana.pub, may: [decide]}\n")
    return load_trust(tmp_path / "trust.yml"), signers


def _codes(trust, chain) -> list[str]:
    return [f["code"] for f in judge_bundles(trust, chain)]


def test_mp732_a_bundle_sealed_by_a_key_the_policy_does_not_name(policy):
    trust, key = policy
    first = _bundle(0.71)
    forged = _bundle(0.99)
    chain = [("sha256:1", first, dsse.sign(first, key["ci"])),
             ("sha256:2", forged, dsse.sign(forged, key["mallory"]))]
    [finding] = judge_bundles(trust, chain)
    assert finding["code"] == "MP732"
    assert finding["message"] == (
        f"sealed bundle sha256:2: it is signed by key {key['mallory'].keyid[:16]}, which the "
        f"trust policy {trust.file} does not name")
    assert "someone resealed the evidence with their own key" in finding["hint"]


def test_mp732_a_reviewer_key_sealing_more_than_the_review(policy):
    trust, key = policy
    first, edited = _bundle(0.71), _bundle(0.99, "accepted")
    chain = [("sha256:1", first, dsse.sign(first, key["ci"])),
             ("sha256:2", edited, dsse.sign(edited, key["dana"]))]
    [finding] = judge_bundles(trust, chain)
    assert finding["code"] == "MP732"
    assert finding["message"] == ("sealed bundle sha256:2 is signed by 'dana', who may decide "
                                  "but not seal, and it changes more than the review")
    # a reviewer's key sealing the first bundle of a chain changes more than a review too
    assert _codes(trust, [("sha256:1", first, dsse.sign(first, key["dana"]))]) == ["MP732"]


def test_mp732_clean_a_sealer_and_the_review_bundle_a_reviewer_seals(policy):
    trust, key = policy
    first = _bundle(0.71)
    reviewed = _bundle(0.71, "accepted", previous="sha256:1")
    resealed = _bundle(0.72)
    assert _codes(trust, [("sha256:1", first, dsse.sign(first, key["ci"])),
                          ("sha256:2", reviewed, dsse.sign(reviewed, key["dana"])),
                          ("sha256:3", resealed, dsse.sign(resealed, key["ci"]))]) == []


def test_the_policy_is_parsed_once_per_content_and_cached_only_for_this_user(policy, tmp_path):
    trust, key = policy
    [cached] = cache_folder().glob("*.json")
    assert cached.name == trust.digest.removeprefix("sha256:") + ".json"
    assert oct(cached.stat().st_mode & 0o777) == "0o600"
    assert oct(cached.parent.stat().st_mode & 0o777) == "0o700"
    # a cached parse is used for these bytes: say another identity there, and it is read
    entry = json.loads(cached.read_text())
    entry["data"]["identities"]["mallory"] = {"public_key": "mallory.pub", "may": ["seal"]}
    cached.write_text(json.dumps(entry))
    assert sorted(i.name for i in load_trust(tmp_path / "trust.yml").identities.values()) == [
        "ci", "dana", "mallory"]
    # ... but not when another user (or group) could have written it: the file is parsed again
    os.chmod(cached, 0o620)
    assert sorted(i.name for i in load_trust(tmp_path / "trust.yml").identities.values()) == [
        "ci", "dana"]
    os.chmod(cached, 0o600)
    os.chmod(cached.parent, 0o777)
    assert len(load_trust(tmp_path / "trust.yml").identities) == 2
    os.chmod(cached.parent, 0o700)
    # edited bytes are another digest: parsed anew, however the old entry reads
    (tmp_path / "trust.yml").write_text("identities:\n  ci: {public_key: ci.pub, may: [seal]}\n")
    edited = load_trust(tmp_path / "trust.yml")
    assert [i.name for i in edited.identities.values()] == ["ci"] and edited.digest != trust.digest
    # the keys are read from their files each time, cached parse or not
    (tmp_path / "ci.pub").write_bytes((tmp_path / "dana.pub").read_bytes())
    assert [i.keyid for i in load_trust(tmp_path / "trust.yml").identities.values()] == [
        key["dana"].keyid]


def test_a_policy_json_cannot_hold_exactly_is_parsed_each_time(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    keys.generate(tmp_path / "a.pem")
    (tmp_path / "t.yml").write_text("identities:\n  a: {public_key: a.pub, may: [seal]}\n"
                                    "reviewed: 2026-12-02\n")
    with pytest.raises(UsageError, match=r"unknown top-level key 'reviewed'"):
        load_trust(tmp_path / "t.yml")
    assert not list(cache_folder().glob("*.json"))   # a date: JSON would make it a string
    # an unwritable cache is no cache: the policy still loads
    monkeypatch.setenv("XDG_CACHE_HOME", str(Path("/proc/no-cache-here")))
    (tmp_path / "t.yml").write_text("identities:\n  a: {public_key: a.pub, may: [seal]}\n")
    assert [i.name for i in load_trust(tmp_path / "t.yml").identities.values()] == ["a"]
