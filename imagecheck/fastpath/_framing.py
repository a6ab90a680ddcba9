"""One webhook connection: reviews that need no I/O answered in the loop turn their bytes
arrive; everything else handed to aiohttp's ``RequestHandler``, byte for byte.

Why: aiohttp answers a request two loop turns after its bytes arrive (its parser wakes the
connection's task, which starts a task for the handler). With 50 reviews in flight a turn
lasts about as long as the 50 take, so a review waited one turn or two depending on when it
came: p99 about twice p50. A warm webhook's every review is a cached answer (or an invalid
one) that needs no I/O, so it is answered here, in ``data_received``.

Why in front of aiohttp rather than a server of our own: aiohttp keeps everything it does
well (TLS with cert reload, routing, ``/metrics``, bodies that trickle or are too big, its
400s and 413s, lingering close), untouched, and this layer only has to be right about one
thing: where a request ends. So it frames only what it is sure of and hands the rest over:

- a request is *framed* when its head (ended by CRLF CRLF, at most ``MAX_HEAD`` bytes) parses
  with httptools (llhttp, the parser aiohttp itself vendors) as HTTP/1.1 with keep-alive, no
  ``Transfer-Encoding``, ``Expect``, ``Upgrade`` or ``Connection`` header, and a body of at
  most ``MAX_INLINE_BODY`` bytes by ``Content-Length``. Anything else (chunked, HTTP/1.0, a
  big body, a head that does not parse, bare-LF lines) hands this request and every later
  byte of the connection to aiohttp for good, so aiohttp's answers to them are unchanged;
- a framed ``POST /validate`` (or ``/``) is offered to ``answer_now`` (the webhook: JSON,
  review, cache; None when it would need I/O), but only when aiohttp holds no request of this
  connection, so that answers leave in the order the requests came (pipelining). Any other
  framed request is handed to aiohttp whole, and counted until the listener's middleware has
  written its answer;
- while a framed request's body is incomplete its bytes wait here (at most ``MAX_HEAD +
  MAX_INLINE_BODY``), under the listener's header timer; if that fires the request goes to
  aiohttp, whose body timeout then answers the 408;
- a client that sends requests without reading the answers: once the transport's write
  buffer is full (``pause_writing``), nothing more is answered or read until it drains.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Protocol

import httptools
from aiohttp.http import SERVER_SOFTWARE
from aiohttp.web_protocol import RequestHandler

# aiohttp refuses a request line or a header over 8190 bytes; a head longer than this goes
# to aiohttp (which answers it) instead of being framed here.
MAX_HEAD = 16 * 1024
# Reviews of a few containers are 2-20 KiB; a bigger body goes to aiohttp, which reads it
# under its read slots (server.READ_SLOTS) instead of holding it per connection here.
MAX_INLINE_BODY = 64 * 1024
REVIEW_PATHS = frozenset({b"/validate", b"/"})
_FOREIGN_HEADERS = frozenset({b"transfer-encoding", b"expect", b"upgrade", b"connection"})

# (HTTP status, JSON body) for a review answered at once, or None: it needs aiohttp's path.
AnswerNow = Callable[[bytes], "tuple[int, bytes] | None"]


class Owner(Protocol):
    """What a connection tells the listener that accepted it (``_listener.py``); ``conn`` is
    the listener's own record of the connection, passed back as it was given."""

    def new_handler(self) -> RequestHandler: ...

    def connected(self, conn: Any, protocol: Connection, transport: Any) -> None: ...

    def received(self, conn: Any) -> None: ...

    def answered(self, conn: Any) -> None: ...

    def forget(self, conn: Any, handler: RequestHandler | None = None) -> None: ...


class _Head:
    """httptools callbacks for one request head."""

    __slots__ = ("foreign", "length", "url")

    def __init__(self) -> None:
        self.url = b""
        self.length: bytes | None = None
        self.foreign = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            self.foreign = self.foreign or self.length is not None
            self.length = value
        elif name in _FOREIGN_HEADERS:
            self.foreign = True


class Framed:
    """A request whose end is known: ``size`` bytes from the start of the buffer."""

    __slots__ = ("head_size", "review", "size")

    def __init__(self, head_size: int, size: int, review: bool) -> None:
        self.head_size, self.size, self.review = head_size, size, review


FOREIGN = "foreign"  # not framed here: aiohttp takes the connection's bytes from here on


def frame(buffer: bytearray) -> Framed | str | None:
    """The request at the start of ``buffer``: framed, ``FOREIGN``, or None (its head is not
    complete yet)."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return FOREIGN if len(buffer) > MAX_HEAD or b"\n\n" in buffer else None
    head_size = end + 4
    if head_size > MAX_HEAD:
        return FOREIGN
    head = _Head()
    parser = httptools.HttpRequestParser(head)
    try:
        parser.feed_data(bytes(buffer[:head_size]))
    except httptools.HttpParserError:  # HttpParserUpgrade included
        return FOREIGN
    if head.foreign or parser.get_http_version() != "1.1" or not parser.should_keep_alive():
        return FOREIGN
    length = 0
    if head.length is not None:
        if not head.length.isdigit() or len(head.length) > 7:
            return FOREIGN
        length = int(head.length)
    if length > MAX_INLINE_BODY:
        return FOREIGN
    review = parser.get_method() == b"POST" and head.url.partition(b"?")[0] in REVIEW_PATHS
    return Framed(head_size, head_size + length, review)


_second: tuple[int, bytes] = (-1, b"")


def http_answer(status: int, body: bytes) -> bytes:
    """An HTTP/1.1 keep-alive answer with a JSON body, header for header what aiohttp's
    ``web.json_response`` sends."""
    global _second  # noqa: PLW0603 -- the Date header, made once a second
    now = int(time.time())
    if _second[0] != now:
        _second = (now, email.utils.formatdate(now, usegmt=True).encode())
    return b"".join(
        (
            b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode()),
            b"Content-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n" % len(body),
            b"Date: %s\r\nServer: %s\r\n\r\n" % (_second[1], SERVER_SOFTWARE.encode()),
            body,
        )
    )


class Connection(asyncio.Protocol):
    """The protocol of one accepted connection (see the module docstring). Without
    ``framing`` (the fast path switched off) every byte goes to aiohttp as it arrives."""

    def __init__(
        self, listener: Owner, conn: object, answer_now: AnswerNow, *, framing: bool = True
    ) -> None:
        self._listener = listener
        self._conn = conn
        self._answer_now = answer_now
        self.handler: RequestHandler = listener.new_handler()
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._handed_over = not framing  # aiohttp frames the rest of the connection
        self._outstanding = 0  # framed requests aiohttp holds, not yet answered
        self._writing_paused = False  # the client is not reading its answers
        self._reading_paused = False  # by this layer, until the client reads

    @property
    def buffered(self) -> bool:
        """Bytes of a request wait here."""
        return bool(self._buffer)

    @property
    def outstanding(self) -> int:
        """Framed requests that aiohttp holds, not yet answered."""
        return self._outstanding

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        self._listener.connected(self._conn, self, transport)
        self.handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._listener.received(self._conn)
        if self._handed_over:
            self.handler.data_received(data)
            return
        self._buffer += data
        self._drain()

    def _drain(self) -> None:
        while self._buffer:
            if self._writing_paused:  # no more answers until the client reads: stop reading
                assert self._transport is not None
                self._transport.pause_reading()
                self._reading_paused = True
                return
            framed = frame(self._buffer)
            if framed is None or (isinstance(framed, Framed) and framed.size > len(self._buffer)):
                return
            if not isinstance(framed, Framed):
                self.hand_over()
                return
            request = bytes(self._buffer[: framed.size])
            del self._buffer[: framed.size]
            answer = None
            if framed.review and self._outstanding == 0:
                answer = self._answer_now(request[framed.head_size :])
            if answer is None:
                self._outstanding += 1
                self.handler.data_received(request)
                continue
            assert self._transport is not None
            self._transport.write(http_answer(*answer))
            self._listener.answered(self._conn)

    def hand_over(self) -> bool:
        """Give aiohttp the rest of the connection (what waits here first). False when
        nothing waited."""
        if self._handed_over or not self._buffer:
            return False
        self._handed_over = True
        waiting, self._buffer = bytes(self._buffer), bytearray()
        self.handler.data_received(waiting)
        return True

    def hand_over_body(self) -> bool:
        """At the read timeout: a request whose head is here but not its whole body goes to
        aiohttp, whose body timeout answers it (408). False when no head is complete."""
        if self._handed_over or not isinstance(frame(self._buffer), Framed):
            return False
        return self.hand_over()

    def answered_by_aiohttp(self, sent: bool) -> None:
        """The listener's middleware has written the answer to a request (``sent``), or the
        handler failed: aiohttp then answers and closes, and frames what is left."""
        if not sent:
            self.hand_over()
            self._handed_over = True
        elif self._outstanding > 0:
            self._outstanding -= 1

    def eof_received(self) -> bool | None:
        self.hand_over()  # a request cut short: aiohttp answers it as it did
        return self.handler.eof_received()  # type: ignore[func-returns-value]

    def connection_lost(self, exc: Exception | None) -> None:
        self._buffer.clear()
        self._listener.forget(self._conn, self.handler)
        self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.handler.resume_writing()
        if self._reading_paused:
            assert self._transport is not None
            self._reading_paused = False
            self._transport.resume_reading()
            if not self._handed_over:
                self._drain()
