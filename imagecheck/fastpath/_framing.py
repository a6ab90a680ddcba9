"""One webhook connection: reviews that need no I/O answered in the loop turn their bytes
arrive; everything else handed to aiohttp's ``RequestHandler``, byte for byte.

Why: aiohttp answers a request two loop turns after its bytes arrive (its parser wakes the
connection's task, which starts a task for the handler). With 50 reviews in flight a turn
lasts about as long as the 50 take, so a review waited one turn or two depending on when it
came: p99 about twice p50. A warm webhook's every review is a cached answer (or an invalid
one) that needs no I/O, so it is answered here, in ``data_received``.

Why in front of aiohttp rather than a server of our own: aiohttp keeps everything it does
well (TLS with cert reload, routing, ``/metrics``, bodies that trickle, are too big or are
compressed, its 400s and 413s, lingering close), untouched, and this layer only has to be
right about one thing: where a request ends. It decides only what it is sure of and hands
the rest over unchanged:

- a request is *framed* when aiohttp's own parser takes its head as a plain HTTP/1.1
  keep-alive request with a ``Content-Length`` body (``_heads.py``). Anything else hands this
  request and every later byte of the connection to aiohttp for good, so aiohttp's answers
  to them are the ones it gives alone;
- a framed review (a POST to a review path: serve's ``/validate`` or ``/``, gate's
  ``/mutate``; no ``Content-Encoding``) is offered to ``answer_now`` (the webhook: JSON,
  review, cache; None when it would need I/O), but only when aiohttp holds no request of this
  connection, so that answers leave in the order the requests came (pipelining). Any other
  framed request is handed to aiohttp whole;
- aiohttp holds at most one framed request of a connection at a time, and nothing more is
  read while it does, nor while the client leaves its answers unread (``pause_writing``):
  what a connection queues here is one request, never a backlog of them;
- while a framed request's body is incomplete its bytes wait here (at most ``MAX_HEAD +
  MAX_INLINE_BODY``), under the listener's header timer; if that fires the request goes to
  aiohttp, whose body timeout then answers the 408.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Protocol

from aiohttp.http import SERVER_SOFTWARE
from aiohttp.web_protocol import RequestHandler

from imagecheck.fastpath._heads import REVIEW_PATHS, Framed, Heads
from imagecheck.fastpath._reading import SharedReading

# Answers a connection may hold, unread by its client, before nothing more is answered or read
# (and aiohttp's writer waits); the kernel's socket buffer, fixed by the listener, comes on top.
UNREAD_ANSWERS = 64 * 1024

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
    ``framing`` (the fast path switched off) every byte goes to aiohttp as it arrives.
    ``paths``: the review routes whose requests are offered to ``answer_now``."""

    def __init__(
        self,
        listener: Owner,
        conn: object,
        answer_now: AnswerNow,
        *,
        framing: bool = True,
        paths: frozenset[str] = REVIEW_PATHS,
    ) -> None:
        self._listener = listener
        self._conn = conn
        self._answer_now = answer_now
        self.handler: RequestHandler = listener.new_handler()
        self._heads = Heads(self.handler, paths)
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._handed_over = not framing  # aiohttp frames the rest of the connection
        self._outstanding = 0  # framed requests aiohttp holds, not yet answered (0 or 1)
        self._writing_paused = False  # the client is not reading its answers
        self._reading: SharedReading | None = None  # aiohttp's view of the transport
        self._holding = False  # reading, until the client reads or aiohttp answers

    @property
    def buffered(self) -> bool:
        """Bytes of a request wait here."""
        return bool(self._buffer)

    @property
    def framing(self) -> bool:
        """The framer still frames this connection's requests (aiohttp has not taken it)."""
        return not self._handed_over

    @property
    def outstanding(self) -> int:
        """Framed requests that aiohttp holds, not yet answered."""
        return self._outstanding

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        # A TLS transport takes 512 KiB of answers before it asks its writer to pause: held
        # for a client that does not read them, that would be most of what it costs.
        transport.set_write_buffer_limits(high=UNREAD_ANSWERS)  # type: ignore[attr-defined]
        self._listener.connected(self._conn, self, transport)
        if self._handed_over:  # the framer is off: aiohttp's transport is the real one
            self.handler.connection_made(transport)
            return
        self._reading = SharedReading(self._transport)  # type: ignore[arg-type]
        self.handler.connection_made(self._reading)

    def data_received(self, data: bytes) -> None:
        if self._handed_over:
            self._listener.received(self._conn)
            self.handler.data_received(data)
            return
        self._buffer += data
        self._drain()
        if self._buffer or self._handed_over:  # part of a request waits: it is timed
            self._listener.received(self._conn)

    def _drain(self) -> None:
        while self._buffer and not self._handed_over:
            if self._writing_paused or self._outstanding:
                self._pause_reading()  # until the client reads, or aiohttp has answered
                return
            framed = self._heads.frame(self._buffer)
            if framed is None or (isinstance(framed, Framed) and framed.size > len(self._buffer)):
                return
            if not isinstance(framed, Framed):
                self.hand_over()
                return
            request = bytes(self._buffer[: framed.size])
            del self._buffer[: framed.size]
            self._heads.next()
            answer = self._answer_now(request[framed.head_size :]) if framed.inline else None
            if answer is None:
                self._outstanding += 1
                self.handler.data_received(request)
                continue
            assert self._transport is not None
            self._transport.write(http_answer(*answer))
            self._listener.answered(self._conn)

    def _pause_reading(self) -> None:
        if not self._holding and self._reading is not None:
            self._holding = True
            self._reading.hold(True)

    def _resume_reading(self) -> None:
        """Read again once nothing of this layer holds the connection back (aiohttp's own
        pauses stay until aiohttp lifts them: ``_reading.py``)."""
        if not self._holding or (
            not self._handed_over and (self._writing_paused or self._outstanding)
        ):
            return
        self._holding = False
        assert self._reading is not None
        self._reading.hold(False)
        self._drain()

    def hand_over(self) -> bool:
        """Give aiohttp the rest of the connection (what waits here first). False when
        nothing waited."""
        if self._handed_over or not self._buffer:
            return False
        self._handed_over = True
        waiting, self._buffer = bytes(self._buffer), bytearray()
        self.handler.data_received(waiting)
        self._resume_reading()
        return True

    def hand_over_body(self) -> bool:
        """At the read timeout: a request whose head is here but not its whole body goes to
        aiohttp, whose body timeout answers it (408). False when no head is complete."""
        if self._handed_over or not isinstance(self._heads.frame(self._buffer), Framed):
            return False
        return self.hand_over()

    def answered_by_aiohttp(self, sent: bool) -> None:
        """The listener's middleware has written the answer to a request (``sent``), or the
        handler failed: aiohttp then answers and closes, and frames what is left."""
        if self._outstanding > 0:
            self._outstanding -= 1
        if not sent:
            self.hand_over()
            self._handed_over = True
        self._resume_reading()

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
        self._resume_reading()
