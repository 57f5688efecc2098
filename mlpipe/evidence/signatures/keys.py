"""Signing keys: generating an ECDSA P-256 key pair (PEM, the private half mode 0600), loading
the key that signs, naming a public key by its key id, and checking a signature.

Knows no store and no envelope (``dsse`` does); which key signs is configuration's
(``config.locate().signing_key``, loaded by ``signing.signer_for``); a Key Vault key signs in
the vault (``keyvault``). ECDSA P-256 because it is the one curve all three consumers take:
DSSE verifiers, OpenSSF Model Signing (EC keys only) and Azure Key Vault (``ES256``).
"""
from __future__ import annotations

import base64
import binascii
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mlpipe.digests import sha256_hex
from mlpipe.errors import UsageError

#: What `MLPIPE_SIGNING_KEY` (or ``[signing] key``) says to sign nothing.
NO_KEY = "none"
#: Where a project's first seal generates its key when none is configured (under the home).
LOCAL_KEY = Path("keys") / "local-signing-key.pem"


class Signer(Protocol):
    """A key that signs: its id, its public half (PEM), where it is, and ``sign``."""

    keyid: str
    public_pem: bytes
    source: str

    def sign(self, data: bytes) -> bytes:
        """A DER-encoded ECDSA P-256 / SHA-256 signature of ``data``."""
        ...


def keyid_of(public_pem: bytes) -> str:
    """A public key's id: the sha256 (hex) of its PEM SubjectPublicKeyInfo bytes, the same
    value OpenSSF Model Signing writes as the key's hint in a model signature.

    Example:
        >>> len(keyid_of(public_pem_of(generate_private())))
        64
    """
    return sha256_hex(normal_pem(public_pem))


#: The DER prefix of every ECDSA P-256 SubjectPublicKeyInfo (algorithm id-ecPublicKey,
#: curve prime256v1, a 66-byte bit string); the uncompressed point follows it.
_P256_SPKI = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")


def _spki_der(public_pem: bytes) -> bytes:
    """The DER of a PEM public key, checked to be ECDSA P-256 (uncompressed point).

    Raises:
        ValueError: not a PEM public key of that curve.
    """
    text = public_pem.decode("ascii", "replace")
    begin, end = "-----BEGIN PUBLIC KEY-----", "-----END PUBLIC KEY-----"
    if begin not in text or end not in text:
        raise ValueError("not a PEM public key")
    body = "".join(text.split(begin, 1)[1].split(end, 1)[0].split())
    try:
        der = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not a PEM public key") from None
    if len(der) != len(_P256_SPKI) + 65 or not der.startswith(_P256_SPKI + b"\x04"):
        raise ValueError("not an ECDSA P-256 public key")
    return der


def normal_pem(public_pem: bytes) -> bytes:
    """The PEM of a public key as ``cryptography`` writes it (whatever line endings or
    wrapping it came with), so that one key has one id; written here, without importing
    ``cryptography``, since every ``--verify --trust`` names keys by it.

    Raises:
        ValueError: not a PEM ECDSA P-256 public key.
    """
    body = base64.b64encode(_spki_der(public_pem)).decode("ascii")
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return ("-----BEGIN PUBLIC KEY-----\n" + "\n".join(lines)
            + "\n-----END PUBLIC KEY-----\n").encode("ascii")


def generate_private():  # -> ec.EllipticCurvePrivateKey
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def public_pem_of(private_key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _private_pem(private_key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private_key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())


def public_path(private_path: str | os.PathLike[str]) -> Path:
    """Where the public half of the key at ``private_path`` is written: ``NAME.pub``."""
    path = Path(private_path)
    return path.with_name(path.name.removesuffix(".pem") + ".pub")


def generate(path: str | os.PathLike[str]) -> LocalKey:
    """Write a new ECDSA P-256 key to ``path`` (PKCS#8 PEM, mode 0600) and its public half to
    ``public_path(path)`` (SubjectPublicKeyInfo PEM, mode 0644).

    Raises:
        UsageError: ``path`` or its ``.pub`` exists (a key is never overwritten), or the
            folder cannot be written.

    Example:
        >>> generate("keys/ci.pem").keyid[:8]
        '3f9a0c1b'
    """
    path = Path(path)
    pub = public_path(path)
    for existing in (path, pub):
        if os.path.lexists(existing):
            raise UsageError(f"{existing} exists: a key is never overwritten",
                             hint="choose another path, or remove the old key yourself "
                                  "(and from the trust policy that names it)")
    key = generate_private()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_new(path, _private_pem(key), 0o600)
        _write_new(pub, public_pem_of(key), 0o644)
    except FileExistsError:
        raise UsageError(f"{path} was created by another process meanwhile",
                         hint="choose another path") from None
    except OSError as exc:
        raise UsageError(f"cannot write the key to {path}: {exc.strerror or exc}",
                         hint="choose a folder you can write") from None
    return LocalKey(key, str(path))


def _write_new(path: Path, content: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask
        os.write(fd, content)
    finally:
        os.close(fd)


def first_use_key(home: Path) -> LocalKey | None:
    """The home's local key (``<home>/keys/local-signing-key.pem``), generated the first time
    one is needed; concurrent first uses end with one key (written aside, then linked). None
    when the home cannot hold one (read-only): the bundle is then sealed unsigned, and shown
    so (an untrusted local identity proves nothing a missing one would)."""
    path = home / LOCAL_KEY
    try:
        return _first_use_key(path)
    except OSError:
        return None


def _first_use_key(path: Path) -> LocalKey:
    if not path.exists():
        key = generate_private()
        path.parent.mkdir(parents=True, exist_ok=True)
        import secrets

        aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            _write_new(aside, _private_pem(key), 0o600)
            try:
                os.link(aside, path)
            except FileExistsError:
                pass  # another process linked its key first: use that one
            else:
                public_path(path).write_bytes(public_pem_of(key))
        finally:
            aside.unlink(missing_ok=True)
    key = load_private(path)
    key.local_identity = True
    return key


@dataclass(slots=True)
class LocalKey:
    """A private key in a PEM file here."""

    private_key: object
    source: str
    keyid: str = ""
    public_pem: bytes = b""
    #: the home's key generated on first use: it seals bundles, but signs no model
    local_identity: bool = False

    def __post_init__(self) -> None:
        self.public_pem = public_pem_of(self.private_key)
        self.keyid = keyid_of(self.public_pem)

    @property
    def path(self) -> str:
        return self.source

    def sign(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        return self.private_key.sign(data, ec.ECDSA(hashes.SHA256()))  # type: ignore[attr-defined]


def load_private(path: str | os.PathLike[str]) -> LocalKey:
    """The ECDSA P-256 private key in the PEM file at ``path``.

    A key its group or others may read or write is refused, as ssh refuses one: whoever can
    read it can sign as its identity (docs/signing.md).

    Raises:
        UsageError: no such file, not a regular file or too big (``userfiles``), not a PEM
            private key, encrypted, not P-256, or readable by group or others.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from mlpipe.userfiles import KEY_BYTES, private_key_exposed, read_bytes

    hint = "generate one with `mlpipe keys generate PATH` and point MLPIPE_SIGNING_KEY at it"
    data = read_bytes(path, what="the signing key", hint=hint, limit=KEY_BYTES)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise UsageError(f"the signing key {path} is encrypted with a password",
                         hint="mlpipe reads unencrypted keys (mode 0600); keep an encrypted one "
                              "in Azure Key Vault instead") from None
    except ValueError:
        raise UsageError(f"{path} is not a PEM private key", hint=hint) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise UsageError(f"the signing key {path} is not an ECDSA P-256 key",
                         hint=hint + " (P-256 is what Model Signing and Key Vault share)")
    mode = private_key_exposed(path)
    if mode is not None:
        raise UsageError(f"the signing key {path} may be read by its group or others (mode "
                         f"{mode}): a private key is its owner's alone",
                         hint=f"run `chmod 600 {path}`, and replace the key if anyone else "
                              f"may have read it")
    return LocalKey(key, str(path))


def load_public(pem: bytes):  # -> ec.EllipticCurvePublicKey
    """The ECDSA P-256 public key in ``pem`` (its point read from the DER, so that checking a
    signature imports ``cryptography``'s EC module only, not its serialization package); read
    once per process for each key (a chain's bundles, decisions and model signature are often
    all one or two keys).

    Raises:
        ValueError: not a PEM public key of that curve (the caller says whose).
    """
    point = _spki_der(pem)[len(_P256_SPKI):]
    found = _PUBLIC.get(point)
    if found is None:
        from cryptography.hazmat.primitives.asymmetric import ec

        found = _PUBLIC[point] = ec.EllipticCurvePublicKey.from_encoded_point(
            ec.SECP256R1(), point)
    return found


#: Public keys read in this process, by their uncompressed point (immutable objects).
_PUBLIC: dict[bytes, object] = {}


def valid(public_key, signature: bytes, data: bytes) -> bool:
    """Whether ``signature`` (DER) is ``public_key``'s ECDSA P-256 / SHA-256 signature of
    ``data``."""
    from cryptography.exceptions import InvalidSignature

    try:
        public_key.verify(signature, data, _ecdsa_sha256())
    except (InvalidSignature, ValueError):
        return False
    return True


@functools.cache
def _ecdsa_sha256():  # -> ec.ECDSA
    """ECDSA with SHA-256, for verifying. ``ec.ECDSA()`` imports cryptography's whole OpenSSL
    backend (its ciphers, RSA, padding: about a third of what ``--verify --trust`` imported)
    only to ask whether deterministic signing is supported, which verifying never uses; this
    is the same algorithm (an ``ec.ECDSA``, its ``algorithm`` SHA-256, not deterministic)
    without that question. Signing still uses ``ec.ECDSA`` itself."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    sha256 = hashes.SHA256()

    class _VerifyingECDSA(ec.ECDSA):
        def __init__(self) -> None:  # no backend question (see above)
            pass

        @property
        def algorithm(self):
            return sha256

        @property
        def deterministic_signing(self) -> bool:
            return False

    return _VerifyingECDSA()


__all__ = ["LOCAL_KEY", "NO_KEY", "LocalKey", "Signer", "first_use_key", "generate",
           "keyid_of", "load_private", "load_public", "normal_pem", "public_path",
           "valid"]
