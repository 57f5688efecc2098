"""Commands for signing keys: keys generate (a new ECDSA P-256 key pair) and keys show (a key's
id and public half, by default the key that seals here). Parse, call
``mlpipe.evidence.signatures.keys``, render.
"""
from __future__ import annotations

import click

from mlpipe.cli.base import main


@main.group()
def keys() -> None:
    """Signing keys: who seals bundles and signs decisions (docs/signing.md)."""


@keys.command("generate")
@click.argument("path", type=click.Path(dir_okay=False))
def keys_generate(path: str) -> None:
    """Write a new ECDSA P-256 private key to PATH (PEM, mode 0600) and its public half to
    PATH without .pem plus .pub. Never overwrites a key."""
    from mlpipe.evidence.signatures.keys import generate, public_path

    key = generate(path)
    click.echo(f"wrote private key {path} (mode 0600) and public key {public_path(path)}")
    click.echo(f"  key id {key.keyid}")
    click.echo("  name it in a trust policy (docs/signing.md), and point MLPIPE_SIGNING_KEY (or "
               "[signing] key in mlpipe.toml) at the private key where it should seal")


@keys.command("show")
@click.argument("path", required=False)
def keys_show(path: str | None) -> None:
    """The key id and public key of PATH (a private or public PEM file, or a Key Vault key id
    https://VAULT.vault.azure.net/keys/NAME/VERSION), or, without PATH, of the key that seals
    here (MLPIPE_SIGNING_KEY, [signing] key, else this home's local key)."""

    from mlpipe.errors import UsageError
    from mlpipe.evidence.signatures.keys import keyid_of, load_private, normal_pem

    if path is None:
        from mlpipe.evidence.signatures.signing import configured_signer
        from mlpipe.evidence.storage.config import locate

        where = locate()
        key = configured_signer()
        if key is None:
            click.echo("nothing signs here: the signing key is configured as none")
            return
        how = ("configured" if where.signing_key
               else "a local identity, generated on first use: untrusted until a trust policy "
                    "names it")
        click.echo(f"the key that seals here: {key.source} ({how})")
        click.echo(f"  key id {key.keyid}")
        click.echo(key.public_pem.decode().rstrip())
        return
    if path.startswith("https://"):
        from mlpipe.evidence.signatures.keyvault import KeyVaultKey

        key = KeyVaultKey.open(path)
        click.echo(f"key id {key.keyid}")
        click.echo(key.public_pem.decode().rstrip())
        return
    from mlpipe.userfiles import KEY_BYTES, read_bytes

    data = read_bytes(path, what="the key", hint="give a key file or a Key Vault key id",
                      limit=KEY_BYTES)
    if b"PRIVATE KEY" in data:
        pem = load_private(path).public_pem
    else:
        try:
            pem = normal_pem(data)
        except ValueError:
            raise UsageError(f"{path} is not an ECDSA P-256 key in PEM",
                             hint="give a key written by `mlpipe keys generate`") from None
    click.echo(f"key id {keyid_of(pem)}")
    click.echo(pem.decode().rstrip())


def trust_option(fn):
    """``--trust FILE``: the trust policy signatures are judged against (default: MLPIPE_TRUST
    or ``[signing] trust``)."""
    return click.option("--trust", "trust_file", default=None, metavar="FILE",
                        type=click.Path(dir_okay=False),
                        help="The trust policy (docs/signing.md), e.g. policies/trust.yml; "
                             "default MLPIPE_TRUST or [signing] trust in mlpipe.toml.")(fn)


def load_configured_trust(trust_file: str | None):
    """The trust policy ``--trust`` names, else the configured one, else None."""
    from mlpipe.evidence.storage.config import locate

    path = trust_file or locate().trust
    if path is None or path.strip().lower() == "none":
        return None
    from mlpipe.evidence.signatures.trust import load_trust

    return load_trust(path)
