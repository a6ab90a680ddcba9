"""The one switch between the fast paths and the stock libraries, and the choices it makes.

``IMAGECHECK_FASTPATH=0`` (or ``off``, ``false``, ``no``) runs registry requests over httpx's
own transport and webhook requests through aiohttp's own request handling; unset, or any
other value, the fast paths. It is read when a registry client or a webhook server is built,
never per request, so switching costs the fast path nothing.

A proxy is the seam's decision too, in either mode: when the environment names one (the
``*_proxy`` variables httpx reads), registry requests take httpx's own transports, because
httpx reads those variables, ``no_proxy`` included, only when it is given no transport.
"""

from __future__ import annotations

import os
import ssl

import httpx

ENVIRONMENT_VARIABLE = "IMAGECHECK_FASTPATH"
_OFF = frozenset({"0", "off", "false", "no"})
_PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})


def enabled() -> bool:
    """Whether the fast paths are on (the default), by ``IMAGECHECK_FASTPATH``."""
    return os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower() not in _OFF


def proxied() -> bool:
    """Whether the environment names a proxy, as httpx reads it (``urllib``'s ``*_proxy``
    variables, any case: http, https, all)."""
    return any(value and name.lower() in _PROXY_VARIABLES for name, value in os.environ.items())


def registry_transport(
    verify: ssl.SSLContext, *, max_connections: int
) -> httpx.AsyncBaseTransport | None:
    """The transport for a registry client: the fast path's, or None for httpx's own (built by
    ``httpx.AsyncClient`` from its ``verify`` and ``limits``, proxies from the environment)."""
    if proxied() or not enabled():
        return None
    from imagecheck.fastpath._client import WireTransport  # noqa: PLC0415 -- loaded when used

    return WireTransport(verify, max_connections=max_connections)
