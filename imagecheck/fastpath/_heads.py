"""Where a request ends, decided by the rules aiohttp itself applies (``_framing.py`` frames
requests in front of aiohttp's ``RequestHandler``).

The framer may only answer a request that aiohttp would have taken as the same request, or
the answer could depend on which path a connection's bytes happened to take. So a head is
parsed by aiohttp's own request parser (llhttp, with aiohttp's checks on top: the ``Host``
header an HTTP/1.1 request needs, duplicate single-value headers, the 128-header and 8190-byte
limits, NUL bytes), built with the handler's own limits. Whatever it refuses, or any head that
is not a plain HTTP/1.1 keep-alive request with a ``Content-Length`` body (upgrades, CONNECT,
chunked, ``Expect``, a ``Connection`` header, HTTP/1.0, a body over ``MAX_INLINE_BODY``) is
``FOREIGN``: the connection goes to aiohttp, which answers it as it would have alone.

The end of a head is the first CRLF CRLF, and aiohttp must agree: the head is fed to the
parser without its last byte (no request may come out) and then with it (exactly one must).
A bare LF before it is ``FOREIGN`` at once (aiohttp answers it; waiting for a CRLF CRLF that
never comes would leave the client without one). Each byte is scanned once however the head
arrives, and a head is parsed once, however its body trickles in after it.
"""

from __future__ import annotations

import asyncio
import re

from aiohttp import hdrs
from aiohttp.http import HttpRequestParser, HttpVersion11
from aiohttp.web_protocol import RequestHandler

# aiohttp refuses a request line or a header over 8190 bytes and more than 128 headers; a
# longer head goes to aiohttp (which answers it) instead of being parsed here.
MAX_HEAD = 16 * 1024
# Reviews of a few containers are 2-20 KiB; a bigger body goes to aiohttp, which reads it
# under its read slots (``webhook/_server.py``) instead of holding it per connection here.
MAX_INLINE_BODY = 64 * 1024
# serve's review routes; another server (gate's ``/mutate``) names its own.
REVIEW_PATHS = frozenset({"/validate", "/"})
_FOREIGN_HEADERS = (hdrs.TRANSFER_ENCODING, hdrs.EXPECT, hdrs.UPGRADE, hdrs.CONNECTION)
_BARE_LF = re.compile(rb"(?<!\r)\n")
_CRLF_CRLF = b"\r\n\r\n"


class Framed:
    """A request whose end is known: ``size`` bytes from the start of the buffer. ``inline``:
    a review the framer may answer itself (a POST to a review path, by default ``/validate``
    or ``/``, without a content coding)."""

    __slots__ = ("head_size", "inline", "size")

    def __init__(self, head_size: int, size: int, inline: bool) -> None:
        self.head_size, self.size, self.inline = head_size, size, inline


FOREIGN = "foreign"  # not framed here: aiohttp takes the connection's bytes from here on


class Heads:
    """The head of the request at the start of one connection's buffer, scanned as its
    bytes arrive. :meth:`next` once that request has left the buffer."""

    __slots__ = ("_framed", "_handler", "_paths", "_scanned")

    def __init__(self, handler: RequestHandler, paths: frozenset[str] = REVIEW_PATHS) -> None:
        self._handler = handler
        self._paths = paths
        self._scanned = 0  # bytes of the buffer known to hold no head end and no bare LF
        self._framed: Framed | None = None

    def next(self) -> None:
        self._scanned, self._framed = 0, None

    def frame(self, buffer: bytearray) -> Framed | str | None:
        """The request at the start of ``buffer``: framed, ``FOREIGN``, or None (its head is
        not complete yet)."""
        if self._framed is not None:
            return self._framed
        end = buffer.find(_CRLF_CRLF, max(0, self._scanned - 3))
        stop = len(buffer) if end < 0 else end + len(_CRLF_CRLF)
        if _BARE_LF.search(buffer, self._scanned, stop) or stop > MAX_HEAD:
            return FOREIGN
        if end < 0:
            self._scanned = len(buffer)
            return None
        framed = parse_head(bytes(buffer[:stop]), self._handler, self._paths)
        if isinstance(framed, Framed):
            self._framed = framed
        return framed


def parse_head(
    head: bytes, handler: RequestHandler, paths: frozenset[str] = REVIEW_PATHS
) -> Framed | str:
    """``head`` (ending with CRLF CRLF) framed by aiohttp's parser, or ``FOREIGN``; inline
    when it is a POST to one of ``paths`` (the server's review routes)."""
    parser = HttpRequestParser(
        handler,
        asyncio.get_running_loop(),
        2**16,
        max_line_size=handler.max_line_size,
        max_headers=handler.max_headers,
        max_field_size=handler.max_field_size,
        auto_decompress=False,
    )
    try:
        if parser.feed_data(head[:-1])[0]:  # aiohttp saw the head end earlier
            return FOREIGN
        messages, upgraded, _ = parser.feed_data(head[-1:])
    except Exception:  # whatever aiohttp refuses (or fails on), aiohttp answers
        return FOREIGN
    if upgraded or len(messages) != 1:
        return FOREIGN
    message = messages[0][0]
    headers = message.headers
    if (
        message.version != HttpVersion11
        or message.should_close
        or message.upgrade
        or message.chunked
        or message.method == hdrs.METH_CONNECT
        or any(name in headers for name in _FOREIGN_HEADERS)
    ):
        return FOREIGN
    length = headers.get(hdrs.CONTENT_LENGTH, "0")
    if not (length.isascii() and length.isdigit()) or len(length) > 7:
        return FOREIGN
    if int(length) > MAX_INLINE_BODY:
        return FOREIGN
    inline = (
        message.method == hdrs.METH_POST
        and message.path.partition("?")[0] in paths
        and hdrs.CONTENT_ENCODING not in headers
    )
    return Framed(len(head), len(head) + int(length), inline)
