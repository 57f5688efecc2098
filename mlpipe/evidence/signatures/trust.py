"""The trust policy (``policies/trust.yml``): which identities hold which public keys and what
each may do (seal bundles, decide on candidates), and judging a candidate's signatures against
it (MP730-MP737) for ``--verify --trust``.

Reads the policy file and the signature rows; hashes no artifact and signs nothing. The format
is documented in docs/signing.md#the-trust-policy.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.codes import (
    BUNDLE_SIGNATURE_INVALID,
    BUNDLE_SIGNER_UNTRUSTED,
    BUNDLE_UNSIGNED,
    DECIDER_IS_SUBMITTER,
    DECISION_SIGNATURE_INVALID,
    DECISION_SIGNER_UNTRUSTED,
    DECISION_UNSIGNED,
)
from mlpipe.diagnostics import Code
from mlpipe.digests import digest_bytes
from mlpipe.errors import UsageError
from mlpipe.evidence.signatures import dsse
from mlpipe.evidence.signatures.keys import keyid_of, normal_pem

#: What an identity may do.
SEAL, DECIDE = "seal", "decide"
_RULES = {"decider_is_not_submitter": True, "signed_decisions": True}


@dataclass(frozen=True, slots=True)
class Identity:
    """One identity of the policy: its name, key, rights and the accounts it submits runs as."""

    name: str
    keyid: str
    public_pem: bytes
    may: frozenset[str]
    accounts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Trust:
    """A loaded trust policy: ``file``, its sha256 ``digest``, identities by key id, rules."""

    file: str
    digest: str
    identities: dict[str, Identity]
    decider_is_not_submitter: bool = True
    signed_decisions: bool = True

    def pems(self) -> dict[str, bytes]:
        return {k: i.public_pem for k, i in self.identities.items()}

    def cited(self) -> dict[str, str]:
        return {"file": self.file, "digest": self.digest}


def _fail(path: str, what: str) -> UsageError:
    return UsageError(f"trust policy {path}: {what}",
                      hint="see docs/signing.md#the-trust-policy for the format")


def load_trust(path: str | Path) -> Trust:
    """Read and check the trust policy at ``path``.

    Raises:
        UsageError: the file cannot be read, is not the format, names a key it cannot load,
            gives one key to two identities, or a right or rule mlpipe does not know.

    Example:
        >>> load_trust("policies/trust.yml").identities[keyid].name
        'ci'
    """
    from mlpipe.userfiles import read_bytes

    where = str(path)
    raw = read_bytes(path, what="the trust policy",
                     hint="give the path of a trust policy (docs/signing.md)")
    data, fresh = _parsed(where, raw)
    if not isinstance(data, dict) or not isinstance(data.get("identities"), dict) \
            or not data["identities"]:
        raise _fail(where, "it needs an 'identities' mapping of name -> {public_key, may}")
    unknown = sorted(set(data) - {"identities", "rules"})
    if unknown:
        raise _fail(where, f"unknown top-level key {unknown[0]!r} (identities, rules)")
    rules = data.get("rules") or {}
    if not isinstance(rules, dict) or set(rules) - set(_RULES) or not all(
            isinstance(v, bool) for v in rules.values()):
        raise _fail(where, f"rules are true/false values of {', '.join(_RULES)}")
    identities: dict[str, Identity] = {}
    for name, entry in data["identities"].items():
        ident = _identity(where, Path(path).parent, str(name), entry)
        if ident.keyid in identities:
            raise _fail(where, f"identities {identities[ident.keyid].name!r} and {name!r} "
                               f"hold the same key {ident.keyid[:16]}: one key is one identity")
        identities[ident.keyid] = ident
    if fresh:   # only a policy that holds is kept, so nothing unchecked is ever cached
        _cache_write(digest_bytes(raw), data)
    return Trust(where, digest_bytes(raw), identities,
                 **{k: rules.get(k, v) for k, v in _RULES.items()})


def _parsed(where: str, raw: bytes) -> tuple[Any, bool]:
    """The policy file's YAML, as PyYAML's ``safe_load`` reads it (within ``userfiles``'
    alias and depth limits), and whether it was parsed now; from this user's parse cache when
    these very bytes were read before (``--verify --trust`` runs often, and importing PyYAML
    was a third of what it added to ``--verify``: docs/performance.md#signing)."""
    from mlpipe.userfiles import load_yaml

    cached = _cache_read(digest_bytes(raw))
    if cached is not None:
        return cached[0], False
    return load_yaml(raw, file=where, hint="see docs/signing.md#the-trust-policy for the "
                                           "format"), True


def cache_folder() -> Path:
    """Where parsed trust policies are kept: ``$XDG_CACHE_HOME/mlpipe/trust`` (default
    ``~/.cache``), the user's own, never the store's home (whoever writes the store must not
    be able to say what a policy holds). Each file is named by the sha256 of the policy bytes
    it was parsed from, so an edited policy is parsed anew; the keys it names are read from
    their files each time."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mlpipe" / "trust"


def _owned(st: os.stat_result) -> bool:
    """Only this user can have written it (owned, not group- or world-writable)."""
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _cache_read(digest: str) -> tuple[Any] | None:
    folder = cache_folder()
    file = folder / f"{digest.removeprefix('sha256:')}.json"
    try:
        if not (_owned(folder.stat()) and _owned(file.stat())):
            return None
        entry = json.loads(file.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("policy_digest") != digest or "data" not in entry:
        return None
    return (entry["data"],)


def _cache_write(digest: str, data: Any) -> None:
    """Keep the parse when JSON holds it exactly (YAML's dates or non-string keys do not
    round-trip: such a policy is parsed each time); a cache that cannot be written is none."""
    try:
        text = json.dumps({"policy_digest": digest, "data": data}, sort_keys=True)
    except (TypeError, ValueError):
        return
    if json.loads(text)["data"] != data:
        return
    folder = cache_folder()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".policy-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:   # mkstemp: mode 0600
            f.write(text)
        os.replace(tmp, folder / f"{digest.removeprefix('sha256:')}.json")
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def _identity(where: str, base: Path, name: str, entry: Any) -> Identity:
    if not isinstance(entry, dict):
        raise _fail(where, f"identity {name!r} is not a mapping")
    unknown = sorted(set(entry) - {"public_key", "public_key_pem", "may", "accounts",
                                   "key_vault"})
    if unknown:
        raise _fail(where, f"identity {name!r} has an unknown key {unknown[0]!r}")
    may = entry.get("may")
    if not isinstance(may, list) or not may or not set(may) <= {SEAL, DECIDE}:
        raise _fail(where, f"identity {name!r}: 'may' is a list of seal and/or decide, "
                           f"not {may!r}")
    accounts = entry.get("accounts", [])
    if not isinstance(accounts, list) or not all(isinstance(a, str) for a in accounts):
        raise _fail(where, f"identity {name!r}: 'accounts' is a list of user names")
    if ("public_key" in entry) == ("public_key_pem" in entry):
        raise _fail(where, f"identity {name!r} needs one of public_key (a .pub file) or "
                           f"public_key_pem")
    if "public_key" in entry:
        from mlpipe.userfiles import KEY_BYTES, read_bytes

        file = base / str(entry["public_key"])
        try:
            pem = read_bytes(file, what="its public key", hint="", limit=KEY_BYTES)
        except UsageError as exc:
            raise _fail(where, f"identity {name!r}: {exc.message}") from None
    else:
        pem = str(entry["public_key_pem"]).encode()
    try:
        pem = normal_pem(pem)
    except ValueError:
        raise _fail(where, f"identity {name!r}: its public key is not an ECDSA P-256 public "
                           f"key in PEM") from None
    # key_vault: where the identity's key is kept, a note for the people who keep the policy;
    # the public key above is what verifies, so only its form is held here
    vault = entry.get("key_vault")
    if vault is not None and not (isinstance(vault, str) and vault.startswith("https://")):
        raise _fail(where, f"identity {name!r}: key_vault is a Key Vault key id (https://...)")
    return Identity(name, keyid_of(pem), pem, frozenset(may), tuple(accounts))


@dataclass(slots=True)
class Signed:
    """Who signed an envelope, judged against a policy: the identity, or why there is none."""

    identity: Identity | None
    code: Code | None = None
    why: str = ""
    keyids: list[str] = field(default_factory=list)


def signer_of(trust: Trust, envelope: bytes | None, payload: bytes | None = None) -> Signed:
    """Which identity of ``trust`` signed ``envelope`` (whose payload must be ``payload`` when
    given); the code and reason when none did (unsigned, invalid, or an unknown key)."""
    if envelope is None:
        return Signed(None, BUNDLE_UNSIGNED, "it has no signature")
    try:
        env = dsse.read(envelope)
    except ValueError as exc:
        return Signed(None, BUNDLE_SIGNATURE_INVALID, f"its envelope is unreadable: {exc}")
    keyids = [k for k, _ in env.signatures]
    if payload is not None and env.payload != payload:
        return Signed(None, BUNDLE_SIGNATURE_INVALID,
                      "its envelope signs other bytes than the bundle's", keyids)
    valid = env.signed_by(trust.pems())
    if valid:
        return Signed(trust.identities[valid[0]], keyids=keyids)
    known = [k for k in keyids if k in trust.identities]
    if known:
        return Signed(None, BUNDLE_SIGNATURE_INVALID,
                      f"its signature by {trust.identities[known[0]].name!r} does not verify",
                      keyids)
    return Signed(None, BUNDLE_SIGNER_UNTRUSTED,
                  f"it is signed by key {', '.join(k[:16] for k in keyids) or '(none)'}, which "
                  f"the trust policy {trust.file} does not name", keyids)


def _finding(code: Code, message: str, hint: str) -> dict[str, Any]:
    return {"code": code.code, "name": code.name, "message": message, "hint": hint}


def _only_review_differs(before: bytes | None, after: bytes) -> bool:
    """Whether bundle ``after`` says what ``before`` said but for its review (and the fields
    sealing adds): the bundle a reviewer's decision seals."""
    if before is None:
        return False
    drop = ("review", "sealed_at", "previous_bundle")
    a, b = json.loads(before), json.loads(after)
    for st in (a, b):
        st["predicate"] = {k: v for k, v in st.get("predicate", {}).items() if k not in drop}
    return a == b


def judge_bundles(trust: Trust, chain: Iterable[tuple[str, bytes, bytes | None]]
                  ) -> list[dict[str, Any]]:
    """Findings for a candidate's chain, oldest first, of (digest, sealed bytes, envelope):
    each bundle must be signed by an identity that may seal, or by one that may decide when it
    changes nothing but the review (the bundle ``mlpipe review`` seals)."""
    out: list[dict[str, Any]] = []
    before: bytes | None = None
    for digest, content, envelope in chain:
        signed = signer_of(trust, envelope, content)
        ident = signed.identity
        if ident is None:
            assert signed.code is not None
            out.append(_finding(signed.code, f"sealed bundle {digest}: {signed.why}",
                                _BUNDLE_HINT[signed.code.code]))
        elif SEAL not in ident.may and not (DECIDE in ident.may
                                            and _only_review_differs(before, content)):
            out.append(_finding(BUNDLE_SIGNER_UNTRUSTED,
                                f"sealed bundle {digest} is signed by {ident.name!r}, who may "
                                f"{' and '.join(sorted(ident.may))} but not seal, and it "
                                f"changes more than the review",
                                "only an identity that may seal (CI, the runners) seals the "
                                "evidence; find who resealed the store"))
        before = content
    return out


_BUNDLE_HINT = {
    BUNDLE_UNSIGNED.code: "seal with a key the trust policy names (MLPIPE_SIGNING_KEY); a bundle "
                          "sealed without one says nothing about who sealed it",
    BUNDLE_SIGNATURE_INVALID.code: "the bundle or its envelope was changed after signing; "
                                   "restore both from a copy you trust",
    BUNDLE_SIGNER_UNTRUSTED.code: "someone resealed the evidence with their own key: find who, "
                                  "or add the key to the trust policy if it is a sealer you trust",
}


def judge_decisions(trust: Trust, decisions: Iterable[dict[str, Any]],
                    submitters: set[str]) -> list[dict[str, Any]]:
    """Findings for a candidate's decisions (each: id, verdict, bundle, candidate, envelope):
    signed by an identity that may decide, the statement agreeing with the recorded decision,
    and the decider not among ``submitters`` (the accounts that ran the candidate's runs)."""
    out: list[dict[str, Any]] = []
    for d in decisions:
        what = f"the {d['verdict']} decision on bundle {d['bundle']}"
        if d["envelope"] is None:
            if trust.signed_decisions:
                out.append(_finding(DECISION_UNSIGNED, f"{what} is not signed: its reviewer "
                                    f"({d['by']!r}, free text) is not authenticated",
                                    "record decisions with `mlpipe review ... --key FILE` (a key "
                                    "the trust policy lets decide)"))
            continue
        signed = signer_of(trust, d["envelope"])
        ident = signed.identity
        if ident is None:
            code = (DECISION_SIGNER_UNTRUSTED if signed.code is BUNDLE_SIGNER_UNTRUSTED
                    else DECISION_SIGNATURE_INVALID)
            out.append(_finding(code, f"{what}: {signed.why}",
                                "the decision's signer is not a reviewer the trust policy "
                                "names" if code is DECISION_SIGNER_UNTRUSTED else
                                "the decision or its envelope was changed after signing"))
            continue
        said = _statement_says(d["envelope"])
        if said != (d["candidate"], d["bundle"], d["verdict"]):
            out.append(_finding(DECISION_SIGNATURE_INVALID,
                                f"{what}: its signed statement says {said[2]} on bundle "
                                f"{said[1]} of {said[0]}, not what the store records",
                                "the decision row was changed after it was signed; the "
                                "signed statement is what the reviewer decided"))
            continue
        if DECIDE not in ident.may:
            out.append(_finding(DECISION_SIGNER_UNTRUSTED,
                                f"{what} is signed by {ident.name!r}, who may not decide",
                                "decisions are signed by a reviewer's key (may: [decide])"))
        if trust.decider_is_not_submitter and submitters & set(ident.accounts):
            account = sorted(submitters & set(ident.accounts))[0]
            out.append(_finding(DECIDER_IS_SUBMITTER,
                                f"{what} is signed by {ident.name!r}, who submitted the "
                                f"candidate's run (as {account!r}): the decider is not the "
                                f"submitter", "another reviewer decides on this candidate"))
    return out


def _statement_says(envelope: bytes) -> tuple[str, str, str]:
    from mlpipe.evidence.signatures.vsa import read_decision

    return read_decision(dsse.read(envelope).statement())


__all__ = ["DECIDE", "SEAL", "Identity", "Signed", "Trust", "judge_bundles", "judge_decisions",
           "load_trust", "signer_of"]
