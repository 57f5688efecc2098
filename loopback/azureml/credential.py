"""A static token credential standing in for azure-identity against the loopback service.

It hands out unsigned JWTs whose audience is the requested scope's resource, as Azure AD
would: azure-ai-ml decodes the Azure ML token it sends with a pipeline job and checks its
``aud`` claim.
"""
from __future__ import annotations

import base64
import json
import time
from typing import Any

#: The object id the tokens name (the service records it as the jobs' creator).
OBJECT_ID = "5e0b1c2d-3f4a-4b5c-8d6e-7f8091a2b3c4"
TENANT_ID = "11111111-1111-1111-1111-111111111111"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_token(audience: str, *, lifetime_s: int = 3600, name: str = "ml-engineer@contoso.com"
               ) -> tuple[str, int]:
    """An unsigned JWT for ``audience`` and its expiry (epoch seconds)."""
    expires = int(time.time()) + lifetime_s
    claims = {"aud": audience, "iss": f"https://sts.loopback.test/{TENANT_ID}/", "oid": OBJECT_ID,
              "tid": TENANT_ID, "upn": name, "name": name, "iat": int(time.time()),
              "exp": expires}
    header = {"alg": "none", "typ": "JWT"}
    return (f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}.",
            expires)


def audience_of(scope: str) -> str:
    """``https://ml.azure.com/.default`` -> ``https://ml.azure.com``."""
    return scope[: -len("/.default")] if scope.endswith("/.default") else scope


class StaticTokenCredential:
    """An azure-core ``TokenCredential`` (and ``SupportsTokenInfo``) that never fails.

    Args:
        lifetime_s: how long each token is valid.

    Example:
        >>> StaticTokenCredential().get_token("https://management.azure.com/.default").token[:3]
        'eyJ'
    """

    def __init__(self, lifetime_s: int = 3600) -> None:
        self.lifetime_s = lifetime_s
        self.scopes: list[str] = []

    def get_token(self, *scopes: str, **_: Any):
        from azure.core.credentials import AccessToken

        self.scopes.extend(scopes)
        token, expires = make_token(audience_of(scopes[0]), lifetime_s=self.lifetime_s)
        return AccessToken(token, expires)

    def get_token_info(self, *scopes: str, options: Any = None):
        from azure.core.credentials import AccessTokenInfo

        self.scopes.extend(scopes)
        token, expires = make_token(audience_of(scopes[0]), lifetime_s=self.lifetime_s)
        return AccessTokenInfo(token, expires)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *_: Any) -> None:
        pass
