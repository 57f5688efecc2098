"""Checking mlpipe's DSSE envelopes with securesystemslib, an implementation independent of
mlpipe's own (``mlpipe.evidence.signatures.dsse``), as a GRC tool or a deployment gate would."""
from __future__ import annotations

import json

from mlpipe.evidence.signatures import keys


def sslib_verify(envelope: bytes, public_pem: bytes) -> bytes:
    """securesystemslib's DSSE verification of ``envelope`` by the key ``public_pem``; the
    payload it verified."""
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    key = SSlibKey.from_crypto(serialization.load_pem_public_key(public_pem),
                               keyid=keys.keyid_of(public_pem))
    parsed = Envelope.from_dict(json.loads(envelope))
    assert parsed.payload_type == "application/vnd.in-toto+json"
    assert list(parsed.verify([key], 1)) == [key.keyid]
    return parsed.payload
