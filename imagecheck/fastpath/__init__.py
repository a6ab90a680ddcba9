"""The fast paths, behind one seam: an HTTP/1.1 client transport for registry requests and
a request framer that answers admission reviews before aiohttp parses them.

Both are measured to earn their place (``benchmarks/``); both have a stock equivalent (httpx's
own transport, aiohttp's own request handling) that the same tests run over.
"""

from __future__ import annotations

from imagecheck._lazy import load_export

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "Listener": "imagecheck.fastpath._listener",
    "WireTransport": "imagecheck.fastpath._client",
    "handler_options": "imagecheck.fastpath._listener",
}

if TYPE_CHECKING:
    from imagecheck.fastpath._client import WireTransport
    from imagecheck.fastpath._listener import Listener, handler_options

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """The names above, imported on first use (PEP 562)."""
        return load_export(__name__, _EXPORTS, name, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Listener",
    "WireTransport",
    "handler_options",
]
