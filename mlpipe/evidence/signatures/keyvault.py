"""A signing key kept in Azure Key Vault: azure-keyvault-keys' ``CryptographyClient`` signs a
digest in the vault (the private key never leaves it); the public half is read once, for the
key id and the envelopes' verifiers.

Signs only; which key is configured is ``signing.signer_for``'s. Imported only when a key id
(``https://VAULT.vault.azure.net/keys/NAME[/VERSION]``) is configured.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mlpipe.errors import UsageError
from mlpipe.evidence.signatures.keys import keyid_of


def _refused(key_id: str, exc: Exception) -> UsageError:
    why = (getattr(exc, "message", None) or str(exc) or type(exc).__name__).splitlines()[0]
    return UsageError(f"cannot use the Key Vault key {key_id}: {why}",
                      hint="check the key id, that the vault is reachable, and that this "
                           "identity has the keys/get and keys/sign permissions (az login, or "
                           "a managed identity)")


@dataclass(slots=True)
class KeyVaultKey:
    """An ECDSA P-256 key in Key Vault: ``sign`` sends the SHA-256 digest to the vault."""

    source: str
    keyid: str
    public_pem: bytes
    client: Any

    @classmethod
    def open(cls, key_id: str, credential: Any = None) -> KeyVaultKey:
        """The key ``key_id`` names; ``credential`` defaults to ``DefaultAzureCredential``.

        Raises:
            UsageError: the id is not a Key Vault key id, the vault refuses or cannot be
                reached, or the key is not EC P-256.
        """
        from azure.core.exceptions import AzureError
        from azure.keyvault.keys import KeyClient, KeyCurveName, KeyType, KeyVaultKeyIdentifier
        from azure.keyvault.keys.crypto import CryptographyClient

        try:
            parsed = KeyVaultKeyIdentifier(key_id)
        except ValueError as exc:
            raise UsageError(f"{key_id} is not a Key Vault key id",
                             hint="write it as https://VAULT.vault.azure.net/keys/NAME/VERSION"
                             ) from exc
        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        try:
            found = KeyClient(parsed.vault_url, credential).get_key(parsed.name, parsed.version)
        except AzureError as exc:
            raise _refused(key_id, exc) from None
        jwk = found.key
        if jwk.kty not in (KeyType.ec, KeyType.ec_hsm) or jwk.crv != KeyCurveName.p_256:
            raise UsageError(f"the Key Vault key {key_id} is not an EC P-256 key "
                             f"({jwk.kty}, {jwk.crv})",
                             hint="create it with `az keyvault key create --kty EC --curve "
                                  "P-256`: the curve Model Signing and DSSE verifiers share")
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        public = ec.EllipticCurvePublicNumbers(int.from_bytes(jwk.x, "big"),
                                               int.from_bytes(jwk.y, "big"),
                                               ec.SECP256R1()).public_key()
        pem = public.public_bytes(serialization.Encoding.PEM,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
        return cls(found.id or key_id, keyid_of(pem), pem,
                   CryptographyClient(found.id or key_id, credential))

    def sign(self, data: bytes) -> bytes:
        """The vault's ES256 signature of ``data``, DER-encoded (as DSSE verifiers take it).

        Raises:
            UsageError: the vault refused or could not be reached.
        """
        from azure.core.exceptions import AzureError
        from azure.keyvault.keys.crypto import SignatureAlgorithm
        from cryptography.hazmat.primitives.asymmetric import utils

        try:
            raw = self.client.sign(SignatureAlgorithm.es256,
                                   hashlib.sha256(data).digest()).signature
        except AzureError as exc:
            raise _refused(self.source, exc) from None
        half = len(raw) // 2
        return utils.encode_dss_signature(int.from_bytes(raw[:half], "big"),
                                          int.from_bytes(raw[half:], "big"))


__all__ = ["KeyVaultKey"]
