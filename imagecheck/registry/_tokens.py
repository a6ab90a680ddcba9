"""The token service: asking a registry's realm for a Bearer token (distribution token spec,
docs/spec/auth/token.md; the OAuth2 form, docs/spec/auth/oauth.md), and reading its answer.
``auth.py`` decides when a token is needed and caches it; this module only fetches.

- Anonymously or with Basic credentials: ``GET realm?service=..&scope=..[&account=..]``.
- With an identity (refresh) token: the OAuth2 ``POST``, and the ``GET`` when the realm
  answers 404/405 or a redirect (not every token server speaks OAuth2).
- A registry token (docker config ``registrytoken``) is already a Bearer token: no request.

The answer's ``token`` (or ``access_token``) must be usable in a header; its lifetime is
``expires_in`` (default 60 s, at most a day), renewed a little early.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from imagecheck._capped import MAX_TOKEN_RESPONSE, parse_json_object, read_capped, read_prefix
from imagecheck.authn import Credentials, bearer_problem
from imagecheck.errors import ProtocolError
from imagecheck.registry._exceptions import transport_errors
from imagecheck.registry._netguard import named_host
from imagecheck.registry._status import status_error

# The token spec: "a token should never be returned with less than 60 seconds to live".
DEFAULT_EXPIRES_IN = 60.0
# Renew a little early so a token does not expire on its way to the registry.
EXPIRY_MARGIN = 5.0
# Ask again after a day at most, whatever expires_in says (say, a 400-digit number).
MAX_EXPIRES_IN = 86400.0
CLIENT_ID = "imagecheck"


@dataclass(frozen=True, slots=True)
class Token:
    value: str = field(repr=False)
    expires_at: float

    def fresh(self, now: float) -> bool:
        return now < self.expires_at


def basic_header(creds: Credentials) -> str:
    raw = f"{creds.username}:{creds.password}".encode()
    return "Basic " + base64.b64encode(raw).decode("ascii")


def parse_token_response(body: bytes, now: float) -> Token:
    """The token in a token service's answer; any other shape is a ProtocolError."""
    data = parse_json_object(body, "token response")
    value = data.get("token") or data.get("access_token")
    if not isinstance(value, str) or not value:
        raise ProtocolError("token service answered without a token")
    problem = _token_problem(value)
    if problem is not None:
        # Never quoted: h11 would refuse the header and put the whole value in its message.
        raise ProtocolError(f"token service answered a token that {problem}")
    lifetime = _lifetime(data.get("expires_in"))
    return Token(value, now + max(1.0, lifetime - min(EXPIRY_MARGIN, lifetime / 10)))


def _token_problem(value: str) -> str | None:
    """``bearer_problem``, with a fast path: nearly every token (a JWT) is printable ASCII
    without a space, which two C loops tell; a per-character check in Python would cost more
    than the rest of the token's fetch."""
    if value.isascii() and value.isprintable() and " " not in value:
        return None
    return bearer_problem(value)


def _lifetime(expires_in: object) -> float:
    """``expires_in`` in seconds, within (0, MAX_EXPIRES_IN]; the default when it is not a
    positive number. ``min`` first: ``float()`` of a 400-digit integer overflows."""
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
        return DEFAULT_EXPIRES_IN
    if not expires_in > 0:  # also NaN
        return DEFAULT_EXPIRES_IN
    return float(min(expires_in, MAX_EXPIRES_IN))


class TokenFetcher:
    """Fetches tokens from a realm with a client of its own choosing (no auth on it).

    ``registry_host`` is the registry the user named, whose own host may serve the realm
    even on a link-local address (``netguard``)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        clock: Any = time.monotonic,
        registry_host: str | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self._extensions = named_host(registry_host) if registry_host else {}

    async def fetch(
        self, realm: httpx.URL, service: str | None, scope: str, creds: Credentials | None
    ) -> Token:
        if creds is not None and creds.registry_token:
            # A registry token is already a bearer token (docker config "registrytoken").
            return Token(creds.registry_token, float("inf"))
        if creds is not None and creds.identity_token:
            response = await self._oauth(realm, service, scope, creds)
            if response is not None:
                return response
        request = self._client.build_request(
            "GET",
            realm,
            params=_query(service, scope, creds),
            headers=_basic(creds),
            extensions=self._extensions,
        )
        return await self._send(request, creds)

    async def _oauth(
        self, realm: httpx.URL, service: str | None, scope: str, creds: Credentials
    ) -> Token | None:
        form = {
            "grant_type": "refresh_token",
            "refresh_token": creds.identity_token,
            "client_id": CLIENT_ID,
            "service": service or "",
            "scope": scope,
        }
        request = self._client.build_request("POST", realm, data=form, extensions=self._extensions)
        try:
            # Not redirected: a 307 would carry the refresh token, in the body, to any host
            # (httpx strips only the Authorization header). The GET form answers instead.
            return await self._send(request, creds, follow_redirects=False)
        except _NoOAuth:
            return None

    async def _send(
        self, request: httpx.Request, creds: Credentials | None, *, follow_redirects: bool = True
    ) -> Token:
        async with transport_errors(f"token service {request.url.netloc.decode()}"):
            response = await self._client.send(
                request, stream=True, follow_redirects=follow_redirects
            )
            try:
                if response.status_code == 200:
                    body = await read_capped(response, MAX_TOKEN_RESPONSE, "token response")
                else:
                    # Says nothing we use; a prefix is read so a short one keeps the connection.
                    await read_prefix(response)
                    body = b""
            finally:
                await response.aclose()
        status = response.status_code
        if request.method == "POST" and (status in (404, 405) or response.is_redirect):
            raise _NoOAuth
        if status != 200:
            subject = f"token service {request.url.host}"
            raise status_error(response, subject, offered=_offered(creds))
        return parse_token_response(body, self._clock())


def _query(service: str | None, scope: str, creds: Credentials | None) -> dict[str, str]:
    """The token GET's query: ``service``, ``scope``, and ``account`` for Basic credentials."""
    params = {name: value for name, value in (("service", service), ("scope", scope)) if value}
    if creds is not None and creds.has_basic:
        params["account"] = creds.username
    return params


def _basic(creds: Credentials | None) -> dict[str, str]:
    """Basic credentials for the token GET: a password, or an identity token as one."""
    if creds is None or not (creds.has_basic or creds.identity_token):
        return {}
    password = creds.password or creds.identity_token
    return {"Authorization": basic_header(Credentials(username=creds.username, password=password))}


def _offered(creds: Credentials | None) -> str:
    """What a token request offered the realm, for the message when it is refused."""
    if creds is None or not (creds.has_basic or creds.identity_token):
        return "anonymous access"
    return f"credentials from {creds.source}" if creds.source else "credentials"


class _NoOAuth(Exception):
    """The realm does not speak the OAuth2 POST; use the GET form."""
