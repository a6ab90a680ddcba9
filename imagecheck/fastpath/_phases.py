"""The phases of the webhook's connections (``_listener.py`` accepts them): a time limit on
every phase in which a client holds one without a request in progress, and the middleware
that tells a request in progress from an idle connection.

- a request's headers must be complete within ``read_timeout`` of its first byte (of the
  handshake, for a connection's first request); the server reads the body under the same
  limit (``webhook/_server.py``);
- an idle keep-alive connection is closed after ``IDLE_TIMEOUT``, longer than the API
  server's own idle timeout (90 s) so that it is the client that closes it. These timers, not
  aiohttp's: aiohttp never sees the reviews answered inline (``_framing.py``), so its
  keep-alive timer would close a busy connection.

A connection has one timer, set lazily: a phase moves the connection's deadline, and the
timer, when it fires before that, sets itself again for the rest. A new timer is made only
when a deadline comes sooner than the timer, so a keep-alive connection answered inline
request after request makes none (a timer per request would cost memory too: a loop keeps a
cancelled timer until it would have fired or the loop sweeps it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from imagecheck.fastpath._framing import Connection

IDLE_TIMEOUT = 120.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(eq=False)
class Accepted:
    """One accepted connection, from ``accept()`` until its socket is closed."""

    handshake: asyncio.Task[None] | None = None
    transport: asyncio.Transport | None = None
    protocol: Connection | None = None
    busy: bool = False  # a request is in progress
    served: bool = False  # a request was completed
    data_while_busy: bool = False  # bytes of a next request came in during this one
    phase: str | None = None  # HEADERS or IDLE: what ``deadline`` is for; None: untimed
    deadline: float = 0.0  # loop time
    timer: asyncio.TimerHandle | None = None
    timer_at: float = 0.0  # when ``timer`` fires: at or before ``deadline``, or it is moved


HEADERS, IDLE = "headers", "idle"


class Phases:
    """Every open connection and the timer of the phase it is in. ``on_close(reason)`` is told
    of every connection closed here rather than by its client or by aiohttp."""

    def __init__(self, *, read_timeout: float, on_close: Callable[[str], None]) -> None:
        self._read_timeout = read_timeout
        self._on_close = on_close
        # Every open connection, oldest first (dicts keep insertion order).
        self._open: dict[Accepted, None] = {}
        # aiohttp's handler of a connection -> the connection (``request.protocol`` is the key).
        self._by_handler: dict[RequestHandler, Accepted] = {}

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Marks a connection busy while a request is handled (and so not to be closed)."""
        conn = self._by_handler.get(request.protocol)
        if conn is None:
            return await handler(request)
        conn.busy = True
        _cancel(conn)
        sent = False
        try:
            try:
                response = await handler(request)
            except web.HTTPException as exc:  # 404, 405: an answer too
                sent = await _send(request, exc)
                raise
            # Written here, not after the middleware: then the connection's next answer,
            # which may be written inline (_framing.py), follows it on the wire.
            sent = await _send(request, response)
            return response
        finally:
            conn.busy, conn.served = False, True
            protocol = conn.protocol
            if protocol is not None:
                protocol.answered_by_aiohttp(sent)  # which may answer more, inline
            pipelined, conn.data_while_busy = conn.data_while_busy, False
            if pipelined and (protocol is None or not protocol.framing):
                self._expect_headers(conn)  # a next request has begun: its headers are timed
            else:
                self._expect_idle(conn)  # the framer knows whether one has

    # -- told by each connection (_framing.Owner) ----------------------------------------

    def connected(self, conn: Accepted, protocol: Connection, transport: Any) -> None:
        conn.transport, conn.protocol = transport, protocol
        self._by_handler[protocol.handler] = conn
        self._expect_headers(conn)

    def received(self, conn: Accepted) -> None:
        if conn.busy:
            conn.data_while_busy = True
        elif conn.phase != HEADERS:
            self._expect_headers(conn)

    def answered(self, conn: Accepted) -> None:
        """A review was answered inline (_framing.py)."""
        conn.served = True
        self._expect_idle(conn)

    def _expect_headers(self, conn: Accepted) -> None:
        self._time(conn, HEADERS, self._read_timeout)

    def _expect_idle(self, conn: Accepted) -> None:
        """No request in progress: the connection may stay idle for ``IDLE_TIMEOUT``; but
        the bytes of a next request are timed as headers, and a request that aiohttp
        already holds starts at once (its end sets the timer)."""
        protocol = conn.protocol
        if protocol is not None and protocol.outstanding:
            _cancel(conn)
        elif protocol is not None and protocol.buffered:
            self._expect_headers(conn)
        else:
            self._time(conn, IDLE, IDLE_TIMEOUT)

    def _time(self, conn: Accepted, phase: str, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        conn.phase, conn.deadline = phase, loop.time() + seconds
        if conn.timer is not None:
            if conn.timer_at <= conn.deadline:
                return  # it fires first, and sets itself again for the rest
            conn.timer.cancel()
        conn.timer_at = conn.deadline
        conn.timer = loop.call_at(conn.deadline, self._fire, conn)

    def _fire(self, conn: Accepted) -> None:
        conn.timer = None
        if conn.phase is None or conn not in self._open:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < conn.deadline:  # moved since it was set (or a loop fired it early)
            conn.timer_at = conn.deadline
            conn.timer = loop.call_at(conn.deadline, self._fire, conn)
            return
        phase, conn.phase = conn.phase, None
        if phase == HEADERS:
            self._headers_late(conn)
        else:
            self._idle_late(conn)

    def _headers_late(self, conn: Accepted) -> None:
        if conn.busy:
            return
        if conn.protocol is not None and conn.protocol.hand_over_body():
            return  # a framed head whose body trickles: aiohttp's body timeout answers it
        self._close(conn, "header_timeout")

    def _idle_late(self, conn: Accepted) -> None:
        if not conn.busy and conn.transport is not None:
            self.forget(conn)
            conn.transport.close()

    def _close(self, conn: Accepted, reason: str | None) -> None:
        if conn not in self._open:
            return
        self.forget(conn)
        if conn.transport is not None:
            conn.transport.abort()  # no TLS close_notify exchange with a client we drop
        elif conn.handshake is not None:
            conn.handshake.cancel()  # asyncio aborts the handshake and closes the socket
        if reason is not None:
            self._on_close(reason)

    def forget(self, conn: Accepted, handler: RequestHandler | None = None) -> None:
        self._open.pop(conn, None)
        _cancel(conn)
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        if handler is not None:
            self._by_handler.pop(handler, None)


def _cancel(conn: Accepted) -> None:
    """Untimed (a request in progress); the timer, if set, fires and finds nothing to do."""
    conn.phase = None


async def _send(request: web.Request, response: web.StreamResponse) -> bool:
    """Write ``response`` whole (aiohttp's own ``prepare``/``write_eof`` after the middleware
    then do nothing); False when the client has gone."""
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        return False
    return True
