"""A loopback Azure Key Vault for the real ``azure-keyvault-keys`` clients (tests, benchmarks).

It speaks, over HTTPS with a throw-away certificate, the part of the Key Vault keys REST API
that signing needs: ``GET /keys/{name}[/{version}]`` (the public half, a JSON Web Key) and
``POST /keys/{name}/{version}/sign`` (ES256 over a digest the client computed), with Key
Vault's challenge authentication (a first request without a token gets ``401`` and a
``WWW-Authenticate: Bearer authorization=..., resource=https://vault.azure.net`` challenge; the
client then asks its credential for a token). The private keys never leave the service, as
they never leave a vault.

The vault is reached by a real vault host name, ``https://<name>.vault.azure.net``: as for the
loopback Azure ML's storage host, ``environ()`` sets ``HTTPS_PROXY`` to a loopback proxy that
tunnels that host (and only it) to the service, whose certificate names it, so the client's
challenge-resource check (the vault host must be under ``vault.azure.net``) holds as on Azure::

    kv = KeyVaultLoopback().start()
    os.environ.update(kv.environ())
    key_id = kv.create_key("ci-sealer")          # https://mlpipe-test.vault.azure.net/keys/...
    CryptographyClient(key_id, kv.credential()).sign(SignatureAlgorithm.es256, digest)

A process that is not the test's (the ``mlpipe`` command line) authenticates as a program on
Azure does, through ``DefaultAzureCredential``: ``identity_environ()`` adds App Service's
managed identity variables (``IDENTITY_ENDPOINT``, ``IDENTITY_HEADER``), pointing at a token
endpoint served here over plain HTTP on 127.0.0.1 as App Service serves its own (``GET
?api-version=2019-08-01&resource=...`` with the ``X-IDENTITY-HEADER`` secret, answered with
``access_token``, ``expires_on``, ``resource``, ``token_type``); ``kv.tokens`` counts the
tokens it issued.

``kv.requests`` lists (method, path, status) of what the client sent; ``kv.signatures`` counts
the sign operations; ``stop()`` shuts it down.
"""
from __future__ import annotations

import base64
import json
import secrets
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopback.azureml.credential import TENANT_ID, StaticTokenCredential
from loopback.azureml.proxy import serve_proxy
from loopback.azureml.tls import write_certificate

#: The vault's host name (a real Key Vault DNS suffix: the client checks the challenge's).
VAULT_HOST = "mlpipe-test.vault.azure.net"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class KeyVaultLoopback:
    """A Key Vault holding EC P-256 keys, served on 127.0.0.1 (see the module's docstring)."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self._tmp = None if folder is not None else tempfile.TemporaryDirectory()
        self.folder = Path(folder if folder is not None else self._tmp.name)  # type: ignore
        self.keys: dict[str, dict[str, Any]] = {}   # name -> {version: private key}
        self.requests: list[tuple[str, str, int]] = []
        self.signatures = 0
        self.tokens = 0
        self._identity_secret = secrets.token_hex(16)
        self._identity: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._proxy: Any = None

    @property
    def vault_url(self) -> str:
        return f"https://{VAULT_HOST}"

    def start(self) -> KeyVaultLoopback:
        import ssl

        self.folder.mkdir(parents=True, exist_ok=True)
        self.cert_path, key_path = write_certificate(self.folder, hosts=(VAULT_HOST,))
        handler = type("KeyVaultHandler", (_Handler,), {"vault": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.cert_path), str(key_path))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, name="loopback-keyvault",
                         daemon=True).start()
        self._server = server
        port = server.server_address[1]
        self._proxy, self.tunnels = serve_proxy(
            lambda host: ("127.0.0.1", port) if host == VAULT_HOST else None)
        identity = type("IdentityHandler", (_IdentityHandler,), {"vault": self})
        self._identity = ThreadingHTTPServer(("127.0.0.1", 0), identity)
        self._identity.daemon_threads = True
        threading.Thread(target=self._identity.serve_forever, name="loopback-identity",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        for server in (self._server, self._proxy, self._identity):
            if server is not None:
                server.shutdown()
                server.server_close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def environ(self) -> dict[str, str]:
        """Where the client finds the vault (the proxy) and the certificate to trust."""
        proxy = f"http://127.0.0.1:{self._proxy.server_address[1]}"
        bypass = "127.0.0.1,localhost,::1"
        return {"HTTPS_PROXY": proxy, "https_proxy": proxy, "NO_PROXY": bypass,
                "no_proxy": bypass, "REQUESTS_CA_BUNDLE": str(self.cert_path),
                "SSL_CERT_FILE": str(self.cert_path)}

    def identity_environ(self) -> dict[str, str]:
        """``environ()`` and App Service's managed identity variables: what a separate process
        needs for ``DefaultAzureCredential`` to get a vault token here."""
        assert self._identity is not None, "start() the vault first"
        return {**self.environ(),
                "IDENTITY_ENDPOINT": f"http://127.0.0.1:{self._identity.server_address[1]}"
                                     f"/msi/token",
                "IDENTITY_HEADER": self._identity_secret}

    def credential(self) -> StaticTokenCredential:
        """A token credential the vault accepts."""
        return StaticTokenCredential()

    def create_key(self, name: str) -> str:
        """A new EC P-256 key (a new version when ``name`` exists); its key id."""
        from cryptography.hazmat.primitives.asymmetric import ec

        version = secrets.token_hex(16)
        with self._lock:
            self.keys.setdefault(name, {})[version] = ec.generate_private_key(ec.SECP256R1())
        return f"{self.vault_url}/keys/{name}/{version}"

    def public_pem(self, key_id: str) -> bytes:
        """The public half of ``key_id`` (what a trust policy names)."""
        from cryptography.hazmat.primitives import serialization

        name, version = key_id.rstrip("/").split("/keys/", 1)[1].split("/")
        return self.keys[name][version].public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


class _Handler(BaseHTTPRequestHandler):
    vault: KeyVaultLoopback
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        status, payload, headers = self._answer(method, path, body)
        self.vault.requests.append((method, path, status))
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _answer(self, method: str, path: str, body: bytes
                ) -> tuple[int, dict[str, Any], dict[str, str]]:
        auth = self.headers.get("Authorization") or ""
        if not auth.startswith("Bearer ") or not _valid_token(auth[len("Bearer "):]):
            challenge = (f'Bearer authorization="https://login.microsoftonline.com/{TENANT_ID}", '
                         f'resource="https://vault.azure.net"')
            return 401, _error("Unauthorized", "AKV10000: Request is missing a Bearer or PoP "
                               "token."), {"WWW-Authenticate": challenge}
        parts = [p for p in path.split("/") if p]
        if len(parts) < 2 or parts[0] != "keys":
            return 404, _error("NotFound", f"no such operation: {method} {path}"), {}
        versions = self.vault.keys.get(parts[1])
        if not versions:
            return 404, _error("KeyNotFound", f"A key with (name/id) {parts[1]} was not found "
                               f"in this key vault."), {}
        version = parts[2] if len(parts) > 2 and parts[2] != "sign" else list(versions)[-1]
        key = versions.get(version)
        if key is None:
            return 404, _error("KeyNotFound", f"A key with (name/id) {parts[1]}/{version} was "
                               f"not found in this key vault."), {}
        kid = f"{self.vault.vault_url}/keys/{parts[1]}/{version}"
        if method == "GET" and len(parts) <= 3:
            numbers = key.public_key().public_numbers()
            return 200, {"key": {"kid": kid, "kty": "EC", "crv": "P-256",
                                 "key_ops": ["sign", "verify"],
                                 "x": _b64url(numbers.x.to_bytes(32, "big")),
                                 "y": _b64url(numbers.y.to_bytes(32, "big"))},
                         "attributes": {"enabled": True, "created": int(time.time()),
                                        "updated": int(time.time()), "exportable": False,
                                        "recoveryLevel": "Recoverable+Purgeable"}}, {}
        if method == "POST" and parts[-1] == "sign":
            return self._sign(key, kid, body)
        return 405, _error("BadRequest", f"{method} {path} is not served here"), {}

    def _sign(self, key: Any, kid: str, body: bytes) -> tuple[int, dict[str, Any], dict]:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, utils

        try:
            request = json.loads(body)
            alg, digest = request["alg"], _unb64url(request["value"])
        except (ValueError, KeyError, TypeError):
            return 400, _error("BadParameter", "the request body is not {alg, value}"), {}
        if alg != "ES256" or len(digest) != 32:
            return 400, _error("BadParameter", f"Key and signing algorithm are incompatible: "
                               f"{alg} over a {len(digest)}-byte digest"), {}
        der = key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256())))
        r, s = utils.decode_dss_signature(der)
        with self.vault._lock:
            self.vault.signatures += 1
        raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return 200, {"kid": kid, "value": _b64url(raw)}, {}


class _IdentityHandler(BaseHTTPRequestHandler):
    """App Service's managed identity endpoint (REST API version 2019-08-01)."""

    vault: KeyVaultLoopback

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        from urllib.parse import parse_qs, urlsplit

        from loopback.azureml.credential import audience_of, make_token

        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if self.headers.get("X-IDENTITY-HEADER") != self.vault._identity_secret:
            status, payload = 401, {"statusCode": 401, "message": "X-IDENTITY-HEADER is missing "
                                                                  "or wrong"}
        elif url.path != "/msi/token" or query.get("api-version") != "2019-08-01" \
                or not query.get("resource"):
            status, payload = 400, {"statusCode": 400, "message": "expected GET /msi/token?"
                                                                  "api-version=2019-08-01&"
                                                                  "resource=..."}
        else:
            resource = audience_of(query["resource"])
            token, expires = make_token(resource)
            with self.vault._lock:
                self.vault.tokens += 1
            status, payload = 200, {"access_token": token, "expires_on": str(expires),
                                    "resource": resource, "token_type": "Bearer"}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _valid_token(token: str) -> bool:
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return False
    return claims.get("aud") == "https://vault.azure.net" and claims.get("exp", 0) > time.time()


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


__all__ = ["VAULT_HOST", "KeyVaultLoopback"]
