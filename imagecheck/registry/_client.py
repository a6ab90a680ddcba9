"""The registry client: it owns the ``httpx`` clients (``_session.py``: TLS, limits, the
transport the fast-path seam chooses, no cookies) and the hooks every request passes, and
checks images: each against its mirrors then its registry, within the run's deadline.

``ImageChecker.check_many`` checks images concurrently (bounded, ``_batch.py``), sharing
connections, pings and tokens. A check is one attempt, and another while the failure may pass
(the policy in ``_retry.py``). The steps of an attempt live in their own modules:

    _ping.py       GET /v2/ once per registry host: the scheme (HTTPS, or plain HTTP where
                   allowed) and the challenge
    _auth.py       the auth flow that answers the challenge (_tokens.py asks the token service)
    _manifest.py   HEAD/GET the manifest and classify the answer (_digest.py verifies digests)
    _blobs.py      deep: the platform's manifest, then HEAD its config and layer blobs
    _status.py     an HTTP status as a typed error
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Self

import httpx

from imagecheck._capped import MAX_ERROR_BODY, MAX_MANIFEST_SIZE, bound_body
from imagecheck._deadline import Deadline
from imagecheck._version import __version__
from imagecheck.authn import (
    AnonymousKeychain,
    Credentials,
    Keychain,
    resolve_credentials,
    unanswered,
)
from imagecheck.errors import AuthenticationError, RegistryError, TransientError
from imagecheck.reference import Reference
from imagecheck.registry._auth import RegistryAuth, TokenCache
from imagecheck.registry._batch import LastErrors, Progress, check_many
from imagecheck.registry._manifest import ManifestCheck
from imagecheck.registry._netguard import check_destination
from imagecheck.registry._ping import PROBE, Clients, ClientsByTLS, Registries
from imagecheck.registry._platform import Platform
from imagecheck.registry._retry import RetryPolicy
from imagecheck.registry._routing import check_route, route_of
from imagecheck.registry._session import Session, new_session
from imagecheck.registry._tls import Trust
from imagecheck.registry._tokens import TokenFetcher
from imagecheck.result import CheckResult, Status
from imagecheck.routes import Endpoint, HostTLS, Router

log = logging.getLogger("imagecheck")


@dataclass(frozen=True)
class ClientOptions:
    """How to reach registries. Built once by the CLI (or a library user)."""

    timeout: float = 10.0
    retries: int = 3
    concurrency: int = 16
    insecure_registries: frozenset[str] = frozenset()
    ca_files: tuple[Path, ...] = ()
    user_agent: str = f"imagecheck/{__version__}"
    # (source registry, mirror host) pairs, in the order mirrors are tried.
    mirrors: tuple[tuple[str, str], ...] = ()
    # Count a 401/403 on the manifest (after a token was granted) as missing.
    denied_as_missing: bool = False
    # Found is not enough: the image must offer this platform.
    platform: Platform | None = None
    # Found is not enough: the config and every layer blob of the platform's manifest (the
    # one above, else this machine's) must be there too.
    deep: bool = False
    # The node runtime's registry configuration (``imagecheck.routes``): which hosts to ask
    # for a reference, in which order, and how. None: the mirrors above, then the registry.
    router: Router | None = None


class ImageChecker:
    """Checks image references against their registries. Use as an async context manager."""

    def __init__(
        self,
        options: ClientOptions | None = None,
        keychain: Keychain | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.options = options or ClientOptions()
        self.keychain: Keychain = keychain or AnonymousKeychain()
        self.retry = retry_policy or RetryPolicy(retries=self.options.retries)
        # Called with (request kind, HTTP status) for every registry answer (metrics).
        self.observers: list[Callable[[str, int], None]] = []
        # The configured CAs now; the system store when the first HTTPS request needs it (a
        # plain-HTTP local registry never does). See _on_request and ping.py.
        self._trust = Trust(self.options.ca_files)
        self._tokens = TokenCache()
        # The last error of each check in progress, for a check the deadline cuts short.
        self._last_error = LastErrors()
        pool_size = max(1, self.options.concurrency)

        def client(verify: ssl.SSLContext) -> Session:
            return new_session(
                verify,
                timeout=self.options.timeout,
                pool_size=pool_size,
                user_agent=self.options.user_agent,
                on_request=[self._on_request],
                on_response=[self._on_response, _bound_body],
                transport=transport,
            )

        # Registries and token services each have a pool of their own (ping.Clients).
        self._clients = Clients(client(self._trust.context), client(self._trust.context))
        # Per other TLS setting (a runtime's configuration gives some), its clients.
        self._tls = ClientsByTLS(client, self.options.ca_files)
        # Only when some registry is explicitly insecure: TLS without verification.
        insecure = self.options.insecure_registries
        unverified = self._tls(HostTLS(skip_verify=True)) if insecure else self._clients
        # Per registry host, what its ping said; bounded.
        self._registries = Registries(self._clients, unverified, self._trust, insecure, self._tls)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for pair in [self._clients, *self._tls.made()]:
            await pair.registry.aclose()
            await pair.token.aclose()

    # -- public API ---------------------------------------------------------------------

    async def check_many(
        self,
        items: Sequence[tuple[str, Reference]],
        deadline: Deadline,
        *,
        checked: Progress | None = None,
    ) -> list[CheckResult]:
        """Check every ``(image text, reference)`` pair, at most ``concurrency`` at once.

        Results come back in input order. Each distinct reference is checked once (as the
        text it was first given as); every input gets its result, with its own text. Checks
        still running at the deadline are cancelled, and they and those not yet started are
        reported as errors; the finished ones keep their answers. ``checked`` is called with
        (checks ended, checks in all) as each distinct reference's check ends, answered or
        cut short.
        """
        return await check_many(
            self.check,
            items,
            deadline,
            concurrency=self.options.concurrency,
            checked=checked,
            last_errors=self._last_error,
        )

    async def check(
        self,
        ref: Reference,
        deadline: Deadline,
        *,
        image: str | None = None,
        keychain: Keychain | None = None,
    ) -> CheckResult:
        """Check one reference; never raises for registry trouble (that is a result).

        The hosts asked are the route's (``_routing.py``): the router's, when the node's
        runtime configuration was given, else the mirrors given for its registry, in order,
        then the registry itself: the first *found* wins, and only the last host's answer is
        final otherwise. ``keychain`` replaces the checker's own for this check (the webhook
        adds a pod's pull secrets).
        """
        image = str(ref) if image is None else image
        started = time.monotonic()
        route = route_of(ref, image, self.options.router, self.options.mirrors)
        if isinstance(route, CheckResult):
            return route

        async def ask(endpoint: Endpoint, at: Reference) -> CheckResult:
            return await self._check_endpoint(at, image, deadline, keychain, endpoint)

        result = await check_route(route, ref, image, ask, named=self.options.router is not None)
        self._last_error.pop(image)  # the result says it now
        elapsed = (time.monotonic() - started) * 1000
        return replace(result, reference=ref, elapsed_ms=elapsed)

    async def _check_endpoint(
        self,
        ref: Reference,
        image: str,
        deadline: Deadline,
        keychain: Keychain | None,
        endpoint: Endpoint | None = None,
    ) -> CheckResult:
        keys = keychain or self.keychain
        try:
            # Before any request to the registry, inside the deadline, outside the attempt's
            # timeout: a credential helper runs here, once per registry.
            creds = await resolve_credentials(keys, ref, deadline)
            result = await self.retry.run(
                lambda: self._attempt(ref, image, creds, endpoint), deadline
            )
        except RegistryError as exc:
            status = Status.DENIED if isinstance(exc, AuthenticationError) else Status.ERROR
            return CheckResult(
                image, ref, status, message=str(exc), registry=ref.api_host, hint=exc.hint
            )
        if result.status is Status.DENIED and not creds:
            reason = unanswered(keys, ref)
            if reason is not None:
                # Refused anonymously where the kubelet would have had a credential: no
                # verdict on the image, so an error (which on-error pass lets through).
                return replace(result, status=Status.ERROR, message=f"{result.message}; {reason}")
        if result.status is Status.DENIED and self.options.denied_as_missing:
            # Docker Hub (for missing repositories) and Artifactory virtual repositories deny
            # what does not exist; the token exchange succeeded, so call it missing.
            message = f"{result.message}; counted as missing, as asked"
            return replace(result, status=Status.MISSING, message=message)
        return result

    # -- one attempt ----------------------------------------------------------------------

    async def _attempt(
        self,
        ref: Reference,
        image: str,
        candidates: Sequence[Credentials],
        endpoint: Endpoint | None = None,
    ) -> CheckResult:
        """One try at one host, within the attempt's timeout: the ping (once per host), then
        the manifest."""
        try:
            async with asyncio.timeout(self.options.timeout):
                registry = await self._registries.reach(ref, endpoint)
                fetcher = TokenFetcher(
                    registry.clients.token, registry_host=registry.auth.base_url.host
                )
                auth = RegistryAuth(registry.auth, candidates, self._tokens, fetcher)
                check = ManifestCheck(
                    ref, image, registry, auth, self.options.platform, self.options.deep, endpoint
                )
                return await check.run()
        except TimeoutError:
            error = TransientError(
                f"{ref.api_host} did not answer within {self.options.timeout:g}s"
            )
            self._last_error.note(image, str(error))
            raise error from None
        except RegistryError as exc:
            # Kept so that a check the deadline cuts short can still say what went wrong.
            self._last_error.note(image, str(exc))
            raise

    # -- the hooks every request passes ---------------------------------------------------

    async def _on_request(self, request: httpx.Request) -> None:
        # Every request and every redirect hop, before its connection or DNS lookup: httpx
        # runs this hook per hop. A hook rather than a transport wrapper, because httpx
        # ignores the proxy environment variables when it is given a transport.
        check_destination(request)
        if request.url.scheme == "https" and not request.extensions.get(PROBE):
            self._trust.load()  # the first real HTTPS request: now the CA store is worth it
        if log.isEnabledFor(logging.DEBUG):
            _log_request(request)

    async def _on_response(self, response: httpx.Response) -> None:
        for observe in self.observers:
            observe(_request_kind(response.request), response.status_code)
        if log.isEnabledFor(logging.DEBUG):
            _log_response(response)


def _log_request(request: httpx.Request) -> None:
    """Method, URL without its query, and the auth scheme: never a credential or a body."""
    auth = request.headers.get("Authorization")
    shown = f" (Authorization: {auth.split(' ', 1)[0]} [redacted])" if auth else ""
    log.debug("> %s %s%s", request.method, request.url.copy_with(query=None), shown)


def _log_response(response: httpx.Response) -> None:
    request = response.request
    log.debug("< %s %s %s", response.status_code, request.method, request.url.copy_with(query=None))


def _request_kind(request: httpx.Request) -> str:
    path = request.url.path
    if path == "/v2/":
        return "ping"
    if "/manifests/" in path:
        return "manifest"
    return "blob" if "/blobs/" in path else "token"


async def _bound_body(response: httpx.Response) -> None:
    """A response hook. httpx reads two kinds of body whole, by itself: a redirect's, and that
    of a 401 the auth flow answers with a token. Nobody uses either: at most a prefix of them
    is read, and dropped. Every other body is read by a capped reader (``manifest.py``, the
    token fetcher, the ping's prefix); this caps them once more, at the largest of those."""
    if response.status_code == 401 or response.has_redirect_location:
        bound_body(response, limit=MAX_ERROR_BODY, drop=True)
    else:
        bound_body(response, limit=MAX_MANIFEST_SIZE, drop=False)
