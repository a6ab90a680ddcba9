"""The ping (``GET /v2/``) and the scheme it settles, once per registry host: what
go-containerregistry's ``transport/ping.go`` and its schemer do.

1. HTTPS first. Plain HTTP after it only for loopback hosts (``tls.is_loopback``: exactly
   ``localhost``, as containerd decides) and hosts named insecure, when HTTPS finds no TLS
   server (``NotTLSError``) or no answer at all (``TransientError``). Elsewhere a plain-HTTP
   server is an error that says which setting would allow it (a ``Hint``).
2. Where plain HTTP may follow, HTTPS is only a probe: does the port speak TLS? That needs no
   CA store, unless a TLS server answers with a certificate the configured CAs do not vouch
   for: then the system store is loaded and HTTPS asked once more (``tls.Trust``).
3. The answer: a 401 carries the challenge (``auth.py`` answers it), 408/429/5xx is worth
   another try, a 404 means no registry API there, anything else an open registry.
4. What the ping learned (the scheme, the challenge, whether credentials may travel) is kept per
   host, least recently used first, and bounded: a webhook meets any host a pod spec names.
   A forgotten host is pinged again when it is next checked.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from imagecheck._capped import MAX_ERROR_BODY, read_prefix
from imagecheck.errors import (
    CertificateError,
    Hint,
    NotTLSError,
    ProtocolError,
    TransientError,
)
from imagecheck.reference import Reference
from imagecheck.registry._auth import RegistryAuthState, names_host
from imagecheck.registry._challenge import pick_challenge
from imagecheck.registry._exceptions import transport_errors
from imagecheck.registry._netguard import named_host
from imagecheck.registry._retry import TRANSIENT_STATUS_CODES
from imagecheck.registry._status import status_error
from imagecheck.registry._tls import Trust, endpoint_context, is_loopback
from imagecheck.routes import Endpoint, HostTLS

log = logging.getLogger("imagecheck")

# Marks the HTTPS probe of a loopback/insecure registry's ping (request extensions): the
# client's request hook loads no CA store for it.
PROBE = "imagecheck.tls_probe"
# Registry hosts remembered, least recently used first.
MAX_REGISTRIES = 1024
# The distribution spec's API root.
API_ROOT = "/v2"


@dataclass(frozen=True, slots=True)
class Clients:
    """The clients of one TLS setting (verifying, or not for hosts named insecure): one for
    registries, and one for their token services. Apart, because an ``httpx`` pool's
    ``max_connections`` is one limit for every host it serves: shared, a token request finds
    the pool full of idle registry connections and closes one, and the next manifest request
    closes a token connection back, so nearly every request opened (and, over TLS, shook
    hands on) a connection of its own."""

    registry: httpx.AsyncClient
    token: httpx.AsyncClient


class ClientsByTLS:
    """The clients of each TLS setting a runtime's configuration gives some endpoint, made on
    first use: as many as the configuration has settings. ``make`` makes a client for a TLS
    context; ``ca_files`` are the checker's own CAs, trusted by every verifying setting."""

    def __init__(
        self, make: Callable[[ssl.SSLContext], httpx.AsyncClient], ca_files: Sequence[Path]
    ) -> None:
        self._make = make
        self._ca_files = tuple(ca_files)
        self._made: dict[HostTLS, Clients] = {}

    def __call__(self, tls: HostTLS) -> Clients:
        clients = self._made.get(tls)
        if clients is None:
            context = endpoint_context(tls, self._ca_files)
            clients = Clients(self._make(context), self._make(context))
            self._made[tls] = clients
        return clients

    def made(self) -> list[Clients]:
        return list(self._made.values())


@dataclass(frozen=True, slots=True)
class Registry:
    """How to reach one registry host: the clients for it and its token service (verifying
    TLS or, for a host named insecure, not) and what its ping said, shared by every request
    to it."""

    clients: Clients
    auth: RegistryAuthState
    # The API root the runtime's configuration gave (``override_path``), else /v2.
    root: str = API_ROOT

    @property
    def client(self) -> httpx.AsyncClient:
        return self.clients.registry

    def api_path(self, path: str) -> str:
        """``path``, written under /v2 as the distribution spec names it, under this
        registry's API root."""
        if self.root == API_ROOT:
            return path
        return self.root + path.removeprefix(API_ROOT)


@dataclass
class _Host:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    registry: Registry | None = None


class Registries:
    """Every registry host the checker has met, each pinged once (concurrent checks of one host
    wait for the same ping). The clients are the checker's: it owns and closes them."""

    def __init__(
        self,
        clients: Clients,
        insecure_clients: Clients,
        trust: Trust,
        insecure_hosts: frozenset[str],
        tls_clients: Callable[[HostTLS], Clients] | None = None,
    ) -> None:
        self._clients = clients
        self._insecure_clients = insecure_clients
        self._trust = trust
        self._insecure_hosts = insecure_hosts
        self._tls_clients = tls_clients
        self._hosts: OrderedDict[Hashable, _Host] = OrderedDict()

    def __len__(self) -> int:
        return len(self._hosts)

    async def reach(self, ref: Reference, endpoint: Endpoint | None = None) -> Registry:
        """The registry that serves ``ref``, pinged if it was not yet (or was forgotten).
        ``endpoint``, when a runtime's configuration named the host, says how to reach it
        (``_endpoint.py``); the same host reached another way is another registry here."""
        key = reach_key(ref, endpoint)
        host = self._hosts.setdefault(key, _Host())
        self._hosts.move_to_end(key)
        if len(self._hosts) > MAX_REGISTRIES:
            self._forget()
        async with host.lock:
            if host.registry is None:
                host.registry = await self._ping_endpoint(ref, endpoint)
        return host.registry

    async def _ping_endpoint(self, ref: Reference, endpoint: Endpoint | None) -> Registry:
        if endpoint is None or plain_endpoint(endpoint):
            return await self._ping(ref)
        return await self._ping_configured(ref, endpoint)

    def _endpoint_clients(self, endpoint: Endpoint) -> Clients:
        tls = endpoint.tls
        if endpoint.insecure and not tls.skip_verify:
            tls = replace(tls, skip_verify=True)
        if tls.default:
            return self._clients
        if self._tls_clients is None:
            raise ProtocolError(f"no TLS settings may be given for {endpoint.name} here")
        return self._tls_clients(tls)

    def _forget(self) -> None:
        """Forget the least recently used hosts past MAX_REGISTRIES, except those being
        pinged now."""
        for name in list(self._hosts):
            if len(self._hosts) <= MAX_REGISTRIES:
                return
            if not self._hosts[name].lock.locked():
                del self._hosts[name]

    def _insecure(self, ref: Reference) -> bool:
        port = ref.port or 443
        return names_host(self._insecure_hosts, ref.hostname, port, ref.registry, ref.api_host)

    async def _ping(self, ref: Reference) -> Registry:
        insecure = self._insecure(ref)
        clients = self._insecure_clients if insecure else self._clients
        client = clients.registry
        url = httpx.URL(f"https://{ref.api_host}/v2/")
        if not (insecure or is_loopback(ref.hostname)):
            try:
                response = await _get(client, url, ref)
            except NotTLSError as exc:
                raise _https_only(ref, exc) from None
            return Registry(clients, self._settled(ref, url, response, insecure=insecure))
        try:
            response = await _get(client, url, ref, {PROBE: True})
        except CertificateError:
            if not self._trust.load():
                raise
            response = await _get(client, url, ref)
        except (TransientError, NotTLSError) as exc:
            log.debug("ping %s failed (%s); trying plain http", url, exc)
            url = httpx.URL(f"http://{ref.api_host}/v2/")
            response = await _get(client, url, ref)
        return Registry(clients, self._settled(ref, url, response, insecure=insecure))

    async def _ping_configured(self, ref: Reference, endpoint: Endpoint) -> Registry:
        """The ping of an endpoint a runtime's configuration describes: its scheme exactly
        when it names one (no probing, no fallback), its API root, its TLS settings."""
        clients = self._endpoint_clients(endpoint)
        if endpoint.scheme is None:
            scheme = "https"
            if endpoint.insecure or self._insecure(ref) or is_loopback(ref.hostname):
                scheme = await self._probe(clients.registry, ref, endpoint.path)
        else:
            scheme = endpoint.scheme
        url = httpx.URL(f"{scheme}://{ref.api_host}{endpoint.path}/")
        response = await _get(clients.registry, url, ref)
        # A scheme the node's configuration names is the node's choice: credentials go with
        # it, as the runtime sends them.
        trusted = endpoint.insecure or endpoint.scheme == "http" or self._insecure(ref)
        state = self._settled(ref, url, response, insecure=trusted, root=endpoint.path)
        return Registry(clients, state, root=endpoint.path)

    async def _probe(self, client: httpx.AsyncClient, ref: Reference, root: str) -> str:
        """HTTPS when the port speaks TLS, else plain HTTP (where plain HTTP may be tried)."""
        url = httpx.URL(f"https://{ref.api_host}{root}/")
        try:
            await _get(client, url, ref, {PROBE: True})
        except CertificateError:
            self._trust.load()
        except (TransientError, NotTLSError) as exc:
            log.debug("ping %s failed (%s); trying plain http", url, exc)
            return "http"
        return "https"

    def _settled(
        self,
        ref: Reference,
        url: httpx.URL,
        response: httpx.Response,
        *,
        insecure: bool,
        root: str = API_ROOT,
    ) -> RegistryAuthState:
        """What the ping's answer says of the registry at ``url``."""
        status = response.status_code
        plain = url.scheme == "http"
        state = RegistryAuthState(
            url.copy_with(path="/"),
            None,
            allow_http_realm=insecure or plain,
            credentials_allowed=insecure or not plain,
            insecure_hosts=self._insecure_hosts,
        )
        if status in TRANSIENT_STATUS_CODES:
            raise status_error(response, ref.api_host, asked=" to the registry ping")
        if status == 401:
            state.challenge = pick_challenge(response.headers.get_list("WWW-Authenticate"))
        if status == 404 and root != API_ROOT:
            # A runtime never pings an override_path: it asks the manifest, and answers the
            # challenge that comes with it. An API root that does not answer its own ping is
            # taken as open; a challenge on the manifest is still answered (``_auth.py``).
            return state
        if status == 404:
            raise ProtocolError(
                f"{ref.api_host} does not serve the registry API (GET /v2/ answered 404)",
                status_code=404,
            )
        return state


async def _get(
    client: httpx.AsyncClient,
    url: httpx.URL,
    ref: Reference,
    extensions: dict[str, Any] | None = None,
) -> httpx.Response:
    """The ping's answer: its status and headers are all it tells. Its body is never read
    whole (a registry may send gigabytes): a prefix, so a short body leaves the connection
    reusable, and that is dropped."""
    request = client.build_request(
        "GET", url, extensions={**(extensions or {}), **named_host(url.host)}
    )
    async with transport_errors(ref.api_host):
        response = await client.send(request, stream=True)
        try:
            await read_prefix(response, MAX_ERROR_BODY)
        finally:
            await response.aclose()
    return response


def _https_only(ref: Reference, exc: NotTLSError) -> NotTLSError:
    """A plain-HTTP registry that may not be asked over plain HTTP: as containerd, which tries
    HTTP only for ``localhost`` and loopback addresses (``tls.is_loopback``)."""
    return NotTLSError(
        f"{exc}; plain HTTP is tried only for localhost, 127.0.0.0/8 and ::1, as containerd does",
        hint=Hint(ref.api_host),
    )


def plain_endpoint(endpoint: Endpoint) -> bool:
    """Whether ``endpoint`` is reached as imagecheck reaches a host the user named."""
    return (
        endpoint.scheme is None
        and endpoint.path == API_ROOT
        and endpoint.tls.default
        and not endpoint.insecure
    )


def reach_key(ref: Reference, endpoint: Endpoint | None) -> Hashable:
    """What tells registries apart in the cache: the host, and how it is reached."""
    if endpoint is None or plain_endpoint(endpoint):
        return ref.api_host
    return (ref.api_host, endpoint.scheme, endpoint.path, endpoint.tls, endpoint.insecure)
