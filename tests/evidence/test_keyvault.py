"""A sealing key kept in Azure Key Vault: the real azure-keyvault-keys clients (KeyClient for
the public half, CryptographyClient signing in the vault) against the loopback Key Vault over
HTTPS (loopback/keyvault: a fake of the wire, with Key Vault's challenge authentication), and
the envelope it signed verified by securesystemslib. SQLite and PostgreSQL."""
from __future__ import annotations

import json

import pytest

from dsse_check import sslib_verify
from mlpipe.errors import UsageError
from mlpipe.evidence.signatures import keys


@pytest.fixture
def vault(monkeypatch, tmp_path):
    from azure.keyvault.keys._shared import http_challenge_cache
    from loopback.keyvault import KeyVaultLoopback

    # the client caches each vault's challenge for the process: start as a fresh process does,
    # so every test sees the challenge handshake (the vault is new for each test)
    http_challenge_cache.clear()
    kv = KeyVaultLoopback(tmp_path / "kv").start()
    for name, value in kv.environ().items():
        monkeypatch.setenv(name, value)
    yield kv
    kv.stop()


def test_a_key_vault_key_seals_a_bundle_and_never_leaves_the_vault(vault, store_url, tmp_path,
                                                                  monkeypatch):
    from bundle_project import BundleProject
    from mlpipe.evidence.bundles.bundle import find_candidate
    from mlpipe.evidence.bundles.seal import seal
    from mlpipe.evidence.signatures.keyvault import KeyVaultKey
    from mlpipe.evidence.signatures.signing import bundle_envelopes
    from mlpipe.evidence.storage.store import Store

    key_id = vault.create_key("ci-sealer")
    signer = KeyVaultKey.open(key_id, credential=vault.credential())
    assert signer.public_pem == keys.normal_pem(vault.public_pem(key_id))
    assert signer.keyid == keys.keyid_of(vault.public_pem(key_id))
    proj = BundleProject(tmp_path / "proj", store_url)
    (proj.root / "mlpipe.toml").write_text('[signing]\nkey = "none"\n')
    cand = proj.submit()
    monkeypatch.chdir(proj.root)   # the project's artifact root
    store = Store.open(proj.store_url or f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}",
                       create=False)
    try:
        with store.session() as s:
            sealed = seal(s, find_candidate(s, cand), signer=signer)
        with store.session() as s:
            envelope = bundle_envelopes(s, [sealed.digest])[sealed.digest]
    finally:
        store.close()
    assert sslib_verify(envelope, vault.public_pem(key_id)) == sealed.content
    assert json.loads(envelope)["signatures"][0]["keyid"] == signer.keyid
    assert vault.signatures == 1
    # the client met Key Vault's challenge first, then sent its token; it went through the
    # proxy to the vault's own host name
    assert [r[2] for r in vault.requests][:2] == [401, 200]
    assert vault.tunnels and set(vault.tunnels) == {"mlpipe-test.vault.azure.net"}


def test_a_key_vault_key_that_cannot_be_used_is_one_line(vault):
    from mlpipe.evidence.signatures.keyvault import KeyVaultKey

    with pytest.raises(UsageError, match=r"cannot use the Key Vault key "
                                         r"https://mlpipe-test.vault.azure.net/keys/absent/1: "
                                         r"\(KeyNotFound\) A key with \(name/id\) absent was not "
                                         r"found in this key vault\.\n  help: check the key id"):
        KeyVaultKey.open("https://mlpipe-test.vault.azure.net/keys/absent/1",
                         credential=vault.credential())
    with pytest.raises(UsageError, match=r"https://example.com/x is not a Key Vault key id"):
        KeyVaultKey.open("https://example.com/x", credential=vault.credential())


def test_the_command_line_seals_with_the_configured_vault_key_and_verifies_it(
        vault, store_url, tmp_path, monkeypatch):
    """`mlpipe` as its own process: the key id from mlpipe.toml, DefaultAzureCredential finding
    a managed identity (the loopback's App Service token endpoint), the vault signing, and
    `--verify --trust` judging the envelope against a policy naming the vault key."""
    from bundle_project import BundleProject

    for name, value in vault.identity_environ().items():
        monkeypatch.setenv(name, value)
    key_id = vault.create_key("ci-sealer")
    pem = vault.public_pem(key_id).decode()
    proj = BundleProject(tmp_path / "proj", store_url)
    (proj.root / "mlpipe.toml").write_text(f'[signing]\nkey = "{key_id}"\n')
    (proj.root / "trust.yml").write_text(
        "identities:\n  ci:\n    may: [seal]\n    key_vault: " + key_id + "\n"
        "    public_key_pem: |\n" + "".join(f"      {line}\n" for line in pem.splitlines()))
    cand = proj.submit()
    done = proj.evidence(cand)
    assert done.returncode == 0, done.stderr
    assert vault.signatures == 1 and vault.tokens >= 1
    assert vault.tunnels and set(vault.tunnels) == {"mlpipe-test.vault.azure.net"}
    done = proj.evidence(cand, "--format", "dsse")
    assert done.returncode == 0, done.stderr
    payload = sslib_verify(done.stdout.encode(), pem.encode())
    assert json.loads(payload)["predicate"]["candidate"]["id"] == cand
    assert json.loads(done.stdout)["signatures"][0]["keyid"] == keys.keyid_of(pem.encode())
    done = proj.evidence(cand, "--verify", "--trust", "trust.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "signatures checked against the trust policy trust.yml, nothing changed" in done.stdout
    assert vault.signatures == 1   # verifying signs nothing: the public key checks it here
    # the same key refused by a policy that does not name it: MP732, exit 1
    other = vault.public_pem(vault.create_key("someone-else")).decode()
    (proj.root / "other.yml").write_text(
        "identities:\n  ci:\n    may: [seal]\n    public_key_pem: |\n"
        + "".join(f"      {line}\n" for line in other.splitlines()))
    done = proj.evidence(cand, "--verify", "--trust", "other.yml")
    assert done.returncode == 1 and "error[MP732]" in done.stdout, done.stdout
