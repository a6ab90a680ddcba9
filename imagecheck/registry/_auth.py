"""Answering a registry's challenge: Basic, or the Bearer token exchange.

The handshake, step by step (distribution token spec, docs/spec/auth/token.md):

1. ``ping.py`` pings ``GET /v2/`` once per registry. A 401 carries ``WWW-Authenticate``:
   ``Basic realm=...`` or ``Bearer realm=<token URL>,service=<name>``.
2. For Basic, every request carries ``Authorization: Basic ...`` (when we have credentials).
3. For Bearer, we ask the realm (``tokens.py``) for a token for ``scope=repository:<name>:pull``:
   ``GET realm?service=..&scope=..`` anonymously or with Basic credentials, or, for an
   identity (refresh) token, the OAuth2 ``POST`` (docs/spec/auth/oauth.md), falling back to
   the ``GET`` when the realm answers 404/405 (not every token server speaks OAuth2).
   The answer's ``token`` (or ``access_token``) is cached per (realm, service, scope,
   credentials) until ``expires_in`` (default 60 s) runs out, and one fetch is shared by every
   concurrent request that needs it.
4. A 401 on a *cached* token means it went stale early: fetch a fresh one, once. A 401 on a
   fresh token means these credentials are not enough: try the next candidate credentials (as
   the kubelet tries each matching pull secret), and give the last answer back otherwise.

Credentials only ever go to the registry host and its token realm; httpx drops
``Authorization`` itself when a redirect leaves the origin.

A plain-``http://`` realm for an HTTPS registry (Harbor or Nexus behind a TLS-terminating
proxy advertise one) is followed as containerd follows it, except with a secret: an anonymous
token request carries none, so it goes to the realm as given. Credentials go to the same URL
over HTTPS instead (``https_twin``); when that cannot be reached at all (no connection, no
TLS, an untrusted certificate), they are not sent: the check fails with a hint to name the
realm's host insecure, which lets them go over plain HTTP. Any HTTP answer over HTTPS (a
token, a 401, a 404) is the token service's answer, as for any realm.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from imagecheck._text import printable
from imagecheck.authn import Credentials
from imagecheck.errors import (
    AuthenticationError,
    CertificateError,
    Hint,
    NotTLSError,
    ProtocolError,
    RegistryError,
    TransientError,
)
from imagecheck.registry._challenge import Challenge, pick_challenge
from imagecheck.registry._netguard import refusal, shown
from imagecheck.registry._tokens import Token, TokenFetcher, basic_header

TokenKey = tuple[str, str, str, str]


class TokenCache:
    """Tokens by (realm, service, scope, credentials id), with one lock per key so
    concurrent checks of one repository share one fetch.

    Bounded for a process that lives for months: at most ``max_tokens`` tokens,
    the least recently used dropped first (an expired one as soon as it is seen), and a
    key's lock only while some request holds or waits for it.
    """

    def __init__(self, max_tokens: int = 1024) -> None:
        self._tokens: OrderedDict[TokenKey, Token] = OrderedDict()
        self._locks: dict[TokenKey, _SharedLock] = {}
        self._max = max(1, max_tokens)

    @contextlib.asynccontextmanager
    async def lock(self, key: TokenKey) -> AsyncIterator[None]:
        shared = self._locks.get(key)
        if shared is None:
            shared = self._locks[key] = _SharedLock()
        shared.users += 1
        try:
            async with shared.lock:
                yield
        finally:
            shared.users -= 1
            if not shared.users:
                del self._locks[key]

    def get(self, key: TokenKey, now: float) -> Token | None:
        token = self._tokens.get(key)
        if token is None:
            return None
        if not token.fresh(now):
            del self._tokens[key]
            return None
        self._tokens.move_to_end(key)
        return token

    def put(self, key: TokenKey, token: Token) -> None:
        self._tokens[key] = token
        self._tokens.move_to_end(key)
        while len(self._tokens) > self._max:
            self._tokens.popitem(last=False)

    def __len__(self) -> int:
        return len(self._tokens)


@dataclass(eq=False)
class _SharedLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


# A request's repository, when its path may not say it (an API root other than /v2).
SCOPE = "imagecheck.repository"


def scope_extension(repository: str) -> dict[str, str]:
    """Request extensions naming the repository a request is about (for its token scope)."""
    return {SCOPE: repository}


def repository_scope(request: httpx.Request) -> str:
    """``repository:<name>:pull`` for a request about a repository: named in its extensions
    (``scope_extension``), else read from ``/v2/<name>/(manifests|blobs|tags)/...``."""
    named = request.extensions.get(SCOPE)
    if isinstance(named, str) and named:
        return f"repository:{named}:pull"
    path = request.url.path
    if not path.startswith("/v2/"):
        return ""
    for marker in ("/manifests/", "/blobs/", "/tags/"):
        name, sep, _ = path[len("/v2/") :].rpartition(marker)
        if sep:
            return f"repository:{name}:pull"
    return ""


def check_realm(realm: str, registry_url: httpx.URL) -> httpx.URL:
    """The realm as a URL; refused when it is not an http(s) URL or names a destination
    ``netguard`` refuses (a metadata service; a link-local address that is not the registry's
    own host). Redirects from the realm are checked by ``netguard`` too. Whether credentials
    may go to a plain-HTTP realm is ``RegistryAuth``'s question."""
    quoted = printable(realm)
    try:
        url = httpx.URL(realm)
    except httpx.InvalidURL:
        raise ProtocolError(f"invalid token realm {quoted!r}: not a URL") from None
    if url.scheme not in ("https", "http") or not url.host:
        raise ProtocolError(f"invalid token realm {quoted!r}: not an http(s) URL")
    reason = refusal(url, named_host=registry_url.host)
    if reason is not None:
        raise ProtocolError(f"refusing token realm {quoted!r}: {reason}")
    return url


def https_twin(realm: httpx.URL) -> httpx.URL:
    """The same realm over HTTPS: same host, port (an implicit 80 becomes an implicit 443)
    and path, as a TLS-terminating proxy in front of the token service serves it."""
    return realm.copy_with(scheme="https")


def realm_host(realm: httpx.URL) -> str:
    """The realm's ``host[:port]`` as ``ClientOptions.insecure_registries`` names it."""
    return realm.netloc.decode("ascii")


def names_host(names: frozenset[str], host: str, port: int, *spellings: str) -> bool:
    """Whether ``names`` (insecure registries: ``host`` or ``host:port``, any case, an IPv6
    address bracketed or not) names ``host`` (an IPv6 address unbracketed), with or without
    ``port``, or one of ``spellings``. The one matcher of insecure hosts: the registry's
    (:mod:`imagecheck.registry._ping`) and its token realm's (:func:`names_realm`)."""
    bracketed = f"[{host}]" if ":" in host else host
    wanted = {host, bracketed, f"{bracketed}:{port}", *spellings}
    wanted = {w.lower() for w in wanted}
    return any(name.lower() in wanted for name in names)


def names_realm(names: frozenset[str], realm: httpx.URL) -> bool:
    """Whether ``names`` (insecure registries) names the realm's host, with or without its
    port."""
    port = realm.port or (443 if realm.scheme == "https" else 80)
    return names_host(names, realm.raw_host.decode("ascii"), port, realm_host(realm))


def sends_secret(creds: Credentials | None) -> bool:
    """Whether a token request with ``creds`` carries a secret to the realm (a registry token
    is used as it is, and never goes to the realm)."""
    if creds is None or creds.registry_token:
        return False
    return creds.has_basic or bool(creds.identity_token)


def _unreachable(exc: RegistryError) -> bool:
    """No HTTP answer at all: no connection, no TLS, an untrusted certificate, a timeout."""
    kinds = (TransientError, NotTLSError, CertificateError)
    return isinstance(exc, kinds) and exc.status_code is None


def _plain_realm_refused(realm: httpx.URL, exc: RegistryError) -> ProtocolError:
    twin = shown(https_twin(realm))
    return ProtocolError(
        f"token realm {shown(realm)} is plain HTTP and {twin} cannot be reached ({exc}); "
        "credentials are not sent over plain HTTP",
        hint=Hint(realm_host(realm)),
    )


@dataclass
class RegistryAuthState:
    """What one registry told us at the ping, shared by every request to it."""

    base_url: httpx.URL
    challenge: Challenge | None
    # A plain-HTTP realm may have credentials: the registry itself is plain HTTP or insecure.
    allow_http_realm: bool = False
    # Credentials never travel over plain HTTP unless the host is explicitly insecure.
    credentials_allowed: bool = True
    # The hosts named insecure (``ClientOptions.insecure_registries``): a realm's host among
    # them may have credentials over plain HTTP.
    insecure_hosts: frozenset[str] = frozenset()


class RegistryAuth(httpx.Auth):
    """An ``httpx.Auth`` that answers the registry's challenge for one request.

    ``candidates`` are the credentials to offer, most preferred first (empty: anonymous).
    After the flow, ``used`` says which candidate was last offered and ``withheld`` whether
    credentials were kept back (plain HTTP to a host not marked insecure), for messages.
    """

    def __init__(
        self,
        state: RegistryAuthState,
        candidates: Sequence[Credentials],
        tokens: TokenCache,
        fetcher: TokenFetcher,
        *,
        clock: Any = time.monotonic,
    ) -> None:
        self._state = state
        self.withheld = bool(candidates) and not state.credentials_allowed
        usable = list(candidates) if state.credentials_allowed else []
        self._candidates: Sequence[Credentials | None] = usable or [None]
        self._tokens = tokens
        self._fetcher = fetcher
        self._clock = clock
        self.used: Credentials | None = None
        self.refused: list[AuthenticationError] = []

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        raise RuntimeError("RegistryAuth works with httpx.AsyncClient only")
        yield request  # pragma: no cover - makes this a generator

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        response: httpx.Response | None = None
        for creds in self._candidates:
            self.used = creds
            try:
                header, fresh = await self._authorization(request, creds, refresh=False)
            except AuthenticationError as exc:
                self.refused.append(exc)
                continue
            _set_auth(request, header)
            response = yield request
            if response.status_code == 401 and self._state.challenge is None:
                # Some registries leave /v2/ open and challenge only on repositories.
                self._state.challenge = _challenge_of(response)
                if self._state.challenge is None:
                    return
                fresh = False
            if response.status_code != 401:
                return
            if not fresh:
                header, _ = await self._authorization(request, creds, refresh=True)
                if header is None:
                    continue  # nothing new to offer (anonymous Basic): not the same request again
                _set_auth(request, header)
                response = yield request
                if response.status_code != 401:
                    return
        if response is None and self.refused:
            raise self.refused[-1]

    async def _authorization(
        self, request: httpx.Request, creds: Credentials | None, *, refresh: bool
    ) -> tuple[str | None, bool]:
        """The ``Authorization`` value for ``request`` and whether it was freshly made."""
        challenge = self._state.challenge
        if challenge is None:
            return None, True
        if challenge.scheme == "basic":
            return (basic_header(creds) if creds and creds.has_basic else None), True
        if not challenge.realm:
            raise ProtocolError("registry sent a Bearer challenge without a realm")
        given = check_realm(challenge.realm, self._state.base_url)
        upgraded = self._needs_tls(given, creds)
        realm = https_twin(given) if upgraded else given
        scope = repository_scope(request)
        key: TokenKey = (str(realm), challenge.service or "", scope, _creds_id(creds))
        async with self._tokens.lock(key):
            token = None if refresh else self._tokens.get(key, self._clock())
            if token is not None:
                return f"Bearer {token.value}", False
            try:
                token = await self._fetcher.fetch(realm, challenge.service, scope, creds)
            except RegistryError as exc:
                if upgraded and _unreachable(exc):
                    raise _plain_realm_refused(given, exc) from None
                raise
            self._tokens.put(key, token)
        return f"Bearer {token.value}", True

    def _needs_tls(self, realm: httpx.URL, creds: Credentials | None) -> bool:
        """Whether ``creds`` must go to ``realm``'s HTTPS twin: a plain-HTTP realm of an HTTPS
        registry, a secret to send, and neither host named insecure (see the module doc)."""
        return (
            realm.scheme == "http"
            and self._state.base_url.scheme == "https"
            and sends_secret(creds)
            and not self._state.allow_http_realm
            and not names_realm(self._state.insecure_hosts, realm)
        )


def _set_auth(request: httpx.Request, header: str | None) -> None:
    if header is None:
        request.headers.pop("Authorization", None)
    else:
        request.headers["Authorization"] = header


def _challenge_of(response: httpx.Response) -> Challenge | None:
    return pick_challenge(response.headers.get_list("WWW-Authenticate"))


def _creds_id(creds: Credentials | None) -> str:
    """Tells credentials apart in the token cache without putting secrets in the key."""
    if creds is None:
        return "anonymous"
    return f"{creds.source}\x00{creds.username}\x00{hash(creds):x}"
