"""Accepting the webhook's connections: a cap on how many are open, and a time limit on every
phase in which a client holds one without a request in progress (issue #10).

aiohttp's server has neither. A client that connects and sends its headers a byte at a time
keeps its connection for as long as it likes, and each one costs about half a MiB (asyncio
gives every TLS connection a 256 KiB read buffer from the moment it is accepted): 1,000 such
clients held 468 MB. So the accept loop is ours, and it hands each connection to aiohttp's
own ``RequestHandler``:

- a connection is counted from ``accept()``, before its TLS handshake, which must end within
  ``read_timeout`` (asyncio's ``ssl_handshake_timeout``);
- a request's headers must be complete within ``read_timeout`` of its first byte (of the
  handshake, for a connection's first request); the server reads the body under the same
  limit (``server.py``);
- an idle keep-alive connection is closed after ``IDLE_TIMEOUT``, longer than the API
  server's own idle timeout (90 s) so that it is the client that closes it. The listener
  times it, not aiohttp: aiohttp never sees the reviews answered inline (``protocol.py``),
  so its keep-alive timer would close a busy connection;
- at most ``max_connections`` are open. One more closes the oldest connection that has no
  request in progress, preferring one that never completed a request, so that a probe or
  the API server still gets in while slow clients hold the rest; when every connection has
  a request in progress (each bounded by the review deadline), the new one is closed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from imagecheck.fastpath._framing import AnswerNow, Connection

log = logging.getLogger("imagecheck.webhook")

IDLE_TIMEOUT = 120.0
# Reading the rest of a body nobody wants (a 413, an unknown route) before closing, so that
# the client reads the answer instead of a reset.
LINGER = 2.0
# A TLS connection being closed waits this long at most for the peer's close_notify.
TLS_SHUTDOWN_TIMEOUT = 2.0
# When accept() fails (out of file descriptors), wait before the next try instead of spinning.
ACCEPT_RETRY_DELAY = 0.1
BACKLOG = 128

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def handler_options() -> dict[str, Any]:
    """``web.AppRunner`` keyword arguments for the ``RequestHandler`` of each connection
    (its keep-alive timer never fires: the listener closes idle connections)."""
    return {
        "access_log": None,
        "keepalive_timeout": NEVER,
        "lingering_time": LINGER,
    }


NEVER = 10.0 * 365 * 24 * 3600


@dataclass(eq=False)
class _Connection:
    """One accepted connection, from ``accept()`` until its socket is closed."""

    handshake: asyncio.Task[None] | None = None
    transport: asyncio.Transport | None = None
    protocol: Connection | None = None
    busy: bool = False  # a request is in progress
    served: bool = False  # a request was completed
    data_while_busy: bool = False  # bytes of a next request came in during this one
    header_timer: asyncio.TimerHandle | None = None
    idle: bool = False  # header_timer is the idle timer


class Listener:
    """Accepts connections for an aiohttp ``Server`` within the limits above.

    ``on_close(reason)`` is told of every connection the listener itself closes: ``refused``
    and ``evicted`` (the cap), ``header_timeout``.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None,
        max_connections: int,
        read_timeout: float,
        on_close: Callable[[str], None] = lambda reason: None,
        answer_now: AnswerNow = lambda body: None,
    ) -> None:
        self._ssl = ssl_context
        self._max = max(1, max_connections)
        self._read_timeout = read_timeout
        self._on_close = on_close
        self._answer_now = answer_now
        # Every open connection, oldest first (dicts keep insertion order).
        self._open: dict[_Connection, None] = {}
        # aiohttp's handler of a connection -> the connection (``request.protocol`` is the key).
        self._by_handler: dict[RequestHandler, _Connection] = {}
        self._server: Server | None = None
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def start(self, server: Server, host: str, port: int) -> None:
        """Bind ``host:port`` and accept connections for ``server``."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, *_, address = infos[0]
        sock = socket.create_server(address[:2], family=family, backlog=BACKLOG)
        sock.setblocking(False)
        self._server, self._socket = server, sock
        self._accepting = asyncio.ensure_future(self._accept(sock))

    async def stop(self) -> None:
        """Stop accepting; drop connections still in their TLS handshake."""
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self._socket is not None:
            self._socket.close()
        for conn in list(self._open):
            if conn.transport is None:
                self._close(conn, None)

    def abort_all(self) -> None:
        """Close whatever is still open (after the server's own graceful shutdown)."""
        for conn in list(self._open):
            self._close(conn, None)

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
            # which may be written inline (protocol.py), follows it on the wire.
            sent = await _send(request, response)
            return response
        finally:
            conn.busy, conn.served = False, True
            if conn.protocol is not None:
                conn.protocol.answered_by_aiohttp(sent)
            if conn.data_while_busy:  # a pipelined request has begun: its headers are timed
                conn.data_while_busy = False
                self._expect_headers(conn)
            else:
                self._expect_idle(conn)

    # -- accepting ------------------------------------------------------------------------

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, _ = await loop.sock_accept(sock)
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS, ECONNABORTED
                log.warning("accept failed", extra={"error": str(exc)})
                await asyncio.sleep(ACCEPT_RETRY_DELAY)
                continue
            self._admit(client)

    def _admit(self, client: socket.socket) -> None:
        if len(self._open) >= self._max:
            victim = self._victim()
            if victim is None:
                client.close()
                self._on_close("refused")
                return
            self._close(victim, "evicted")
        conn = _Connection()
        self._open[conn] = None
        conn.handshake = asyncio.ensure_future(self._handshake(conn, client))

    def _victim(self) -> _Connection | None:
        """The oldest connection without a request in progress, one never served first."""
        fallback = None
        for conn in self._open:
            if conn.busy:
                continue
            if not conn.served:
                return conn
            fallback = fallback or conn
        return fallback

    async def _handshake(self, conn: _Connection, client: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if self._ssl is not None:
            tls = {
                "ssl": self._ssl,
                "ssl_handshake_timeout": self._read_timeout,
                "ssl_shutdown_timeout": TLS_SHUTDOWN_TIMEOUT,
            }
        try:
            await loop.connect_accepted_socket(
                lambda: Connection(self, conn, self._answer_now), client, **tls
            )
        except OSError:  # a failed, reset or timed-out handshake; asyncio closed the socket
            pass
        finally:
            conn.handshake = None
            if conn.transport is None:  # never connected: nothing else will forget it
                self._forget(conn)

    # -- per connection -------------------------------------------------------------------

    def _connected(self, conn: _Connection, protocol: Connection, transport: Any) -> None:
        conn.transport, conn.protocol = transport, protocol
        self._by_handler[protocol.handler] = conn
        self._expect_headers(conn)

    def _received(self, conn: _Connection) -> None:
        if conn.busy:
            conn.data_while_busy = True
        elif conn.header_timer is None or conn.idle:
            self._expect_headers(conn)

    def _answered(self, conn: _Connection) -> None:
        """A review was answered inline (protocol.py)."""
        conn.served = True
        self._expect_idle(conn)

    def _expect_headers(self, conn: _Connection) -> None:
        _cancel(conn)
        loop = asyncio.get_running_loop()
        conn.header_timer = loop.call_later(self._read_timeout, self._headers_late, conn)

    def _expect_idle(self, conn: _Connection) -> None:
        """No request in progress: the connection may stay idle for ``IDLE_TIMEOUT``; but
        the bytes of a next request are timed as headers, and a request that aiohttp
        already holds starts at once (its end sets the timer)."""
        protocol = conn.protocol
        if protocol is not None and protocol.outstanding:
            _cancel(conn)
            return
        if protocol is not None and protocol.buffered:
            self._expect_headers(conn)
            return
        _cancel(conn)
        loop = asyncio.get_running_loop()
        conn.header_timer = loop.call_later(IDLE_TIMEOUT, self._idle_late, conn)
        conn.idle = True

    def _headers_late(self, conn: _Connection) -> None:
        conn.header_timer = None
        if conn.busy:
            return
        if conn.protocol is not None and conn.protocol.hand_over_body():
            return  # a framed head whose body trickles: aiohttp's body timeout answers it
        self._close(conn, "header_timeout")

    def _idle_late(self, conn: _Connection) -> None:
        conn.header_timer, conn.idle = None, False
        if not conn.busy and conn.transport is not None:
            self._forget(conn)
            conn.transport.close()

    def _close(self, conn: _Connection, reason: str | None) -> None:
        if conn not in self._open:
            return
        self._forget(conn)
        if conn.transport is not None:
            conn.transport.abort()  # no TLS close_notify exchange with a client we drop
        elif conn.handshake is not None:
            conn.handshake.cancel()  # asyncio aborts the handshake and closes the socket
        if reason is not None:
            self._on_close(reason)

    def _forget(self, conn: _Connection, handler: RequestHandler | None = None) -> None:
        self._open.pop(conn, None)
        _cancel(conn)
        if handler is not None:
            self._by_handler.pop(handler, None)

    def _new_handler(self) -> RequestHandler:
        assert self._server is not None
        return self._server()


def _cancel(conn: _Connection) -> None:
    if conn.header_timer is not None:
        conn.header_timer.cancel()
        conn.header_timer = None
    conn.idle = False


async def _send(request: web.Request, response: web.StreamResponse) -> bool:
    """Write ``response`` whole (aiohttp's own ``prepare``/``write_eof`` after the middleware
    then do nothing); False when the client has gone."""
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        return False
    return True
