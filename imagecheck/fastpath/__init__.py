"""The fast paths, behind one seam: an HTTP/1.1 client transport for registry requests and
a request framer that answers admission reviews before aiohttp parses them.

Both are measured to earn their place (``benchmarks/``); both have a stock equivalent (httpx's
own transport, aiohttp's own request handling) that the same tests run over. The registry
client and the webhook server ask this face which to use, and nothing else of it:

    registry_transport()   the registry client's transport (None: httpx's own)
    Listener               the webhook's accept loop and bounds; ``framing`` says whether
                           reviews are framed in front of aiohttp (``framing_enabled()``)
    enabled()              the switch: ``IMAGECHECK_FASTPATH=0`` turns both fast paths off

``_switch.py`` says how the switch is read and why a proxy takes httpx's own transport.
"""

from __future__ import annotations

from imagecheck._lazy import load_export

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "ENVIRONMENT_VARIABLE": "imagecheck.fastpath._switch",
    "Listener": "imagecheck.fastpath._listener",
    "WireTransport": "imagecheck.fastpath._client",
    "enabled": "imagecheck.fastpath._switch",
    "handler_options": "imagecheck.fastpath._listener",
    "registry_transport": "imagecheck.fastpath._switch",
}

if TYPE_CHECKING:
    from imagecheck.fastpath._client import WireTransport
    from imagecheck.fastpath._listener import Listener, handler_options
    from imagecheck.fastpath._switch import ENVIRONMENT_VARIABLE, enabled, registry_transport

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """The names above, imported on first use (PEP 562)."""
        return load_export(__name__, _EXPORTS, name, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "ENVIRONMENT_VARIABLE",
    "Listener",
    "WireTransport",
    "enabled",
    "handler_options",
    "registry_transport",
]
