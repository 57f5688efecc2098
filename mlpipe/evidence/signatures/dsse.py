"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, v1.0): signing a payload with a
key, reading an envelope back, and checking its signatures against public keys.

Written against the specification with ``cryptography`` rather than with securesystemslib, so
that the tests' securesystemslib (``Envelope.verify``) is an independent implementation that
checks what this one writes. Knows no store; which keys are trusted is ``trust``'s.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from mlpipe.evidence.signatures.keys import Signer, keyid_of, load_public, valid

#: The payload type of an in-toto statement.
IN_TOTO = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what is actually signed.

    Example:
        >>> pae("t", b"hi")
        b'DSSEv1 1 t 2 hi'
    """
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def sign(payload: bytes, signer: Signer, payload_type: str = IN_TOTO) -> bytes:
    """The envelope of ``payload`` signed by ``signer``, as JSON bytes (one closing newline).

    Example:
        >>> json.loads(sign(b"{}", key))["payloadType"]
        'application/vnd.in-toto+json'
    """
    signature = signer.sign(pae(payload_type, payload))
    envelope = {"payload": base64.b64encode(payload).decode("ascii"),
                "payloadType": payload_type,
                "signatures": [{"keyid": signer.keyid,
                                "sig": base64.b64encode(signature).decode("ascii")}]}
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"


@dataclass(frozen=True, slots=True)
class Envelope:
    """An envelope read back: its payload, payload type and (key id, signature) pairs."""

    payload: bytes
    payload_type: str
    signatures: tuple[tuple[str, bytes], ...]

    def signed_by(self, public_pems: dict[str, bytes]) -> list[str]:
        """The key ids, among ``public_pems`` (key id -> PEM), whose signature verifies."""
        message = pae(self.payload_type, self.payload)
        found = []
        for keyid, sig in self.signatures:
            pem = public_pems.get(keyid)
            if pem is not None and keyid not in found and valid(load_public(pem), sig, message):
                found.append(keyid)
        return found

    def statement(self) -> dict[str, Any]:
        """The payload as an in-toto statement.

        Raises:
            ValueError: the payload is not a JSON object.
        """
        data = json.loads(self.payload)
        if not isinstance(data, dict):
            raise ValueError("the payload is not a JSON object")
        return data


def read(content: bytes) -> Envelope:
    """The envelope in ``content``.

    Raises:
        ValueError: not a DSSE envelope (the message says what is wrong).
    """
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        raise ValueError("not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("payloadType"), str):
        raise ValueError("not a DSSE envelope (no payloadType)")
    sigs = data.get("signatures")
    if not isinstance(sigs, list) or not all(isinstance(x, dict) for x in sigs):
        raise ValueError("its signatures are not a list")
    try:
        payload = base64.b64decode(data.get("payload", ""), validate=True)
        signatures = tuple((str(x.get("keyid", "")),
                            base64.b64decode(x.get("sig", ""), validate=True)) for x in sigs)
    except (binascii.Error, TypeError, ValueError):
        raise ValueError("its payload or a signature is not base64") from None
    return Envelope(payload, data["payloadType"], signatures)


def self_signed_by(envelope: Envelope, public_pem: bytes) -> bool:
    """Whether the key ``public_pem`` signed ``envelope``."""
    return bool(envelope.signed_by({keyid_of(public_pem): public_pem}))


__all__ = ["IN_TOTO", "Envelope", "pae", "read", "self_signed_by", "sign"]
