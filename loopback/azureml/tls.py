"""A throw-away TLS certificate for the loopback service (``127.0.0.1``, ``localhost`` and the
host names it answers through its proxy, such as the storage account's blob host).

Self-signed, valid for a day, written with its key into a folder the caller owns; clients
trust it through ``REQUESTS_CA_BUNDLE`` (azure-core's requests transport) and
``SSL_CERT_FILE`` (the ``ssl`` module's default context).
"""
from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path


def write_certificate(folder: str | Path, hosts: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Write ``cert.pem`` and ``key.pem`` into ``folder``; return their paths. The certificate
    names ``localhost``, ``127.0.0.1`` and each of ``hosts``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = Path(folder)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mlpipe loopback Azure ML")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), *(x509.DNSName(h) for h in hosts),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path
