"""The ``httpx`` clients the registry client sends through: TLS, limits, headers, the hooks
every request passes, a transport chosen by the fast-path seam, and no cookies."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Sequence

import httpx

from imagecheck import fastpath

RequestHook = Callable[[httpx.Request], Awaitable[None]]
ResponseHook = Callable[[httpx.Response], Awaitable[None]]


class Session(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` that keeps no cookies. Registry clients keep none (Docker,
    containerd and the kubelet have no jar): the protocol has none, a registry's
    ``Set-Cookie`` would be sent to it again unasked, and in ``serve`` the jar would grow
    with every registry's cookies for the life of the process.

    httpx reads its jar through the public ``cookies`` attribute, so this client answers it
    with a jar that keeps nothing and ignores any other given to it. A jar that refused
    cookies by policy would do too, but httpx would still build urllib objects for it on every
    response, which costs as much as the rest of the client's work on that response."""

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, cookies: object) -> None:
        pass  # httpx's constructor sets an empty jar; no other is taken


class _NoCookies(httpx.Cookies):
    """A jar that keeps nothing: every ``Set-Cookie`` is dropped unread."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set(self, name: str, value: str, domain: str = "", path: str = "/") -> None:
        return None


_NO_COOKIES = _NoCookies()


def new_session(
    verify: ssl.SSLContext,
    *,
    timeout: float,
    pool_size: int,
    user_agent: str,
    on_request: Sequence[RequestHook],
    on_response: Sequence[ResponseHook],
    transport: httpx.AsyncBaseTransport | None = None,
) -> Session:
    """A client for registries or token services. ``transport`` (tests) replaces the one the
    seam chooses (``imagecheck.fastpath.registry_transport``)."""
    # As many connections as checks run at once, all kept alive between requests: httpx
    # keeps 20 by default, so above that every request past the 20th would open one anew.
    limits = httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size)
    if transport is None:
        transport = fastpath.registry_transport(verify, max_connections=pool_size)
    return Session(
        verify=verify,
        transport=transport,
        timeout=httpx.Timeout(timeout),
        limits=limits,
        # Asked for identity; a body compressed unasked is still decoded within its cap.
        headers={"User-Agent": user_agent, "Accept-Encoding": "identity"},
        follow_redirects=True,
        event_hooks={"request": list(on_request), "response": list(on_response)},
    )
