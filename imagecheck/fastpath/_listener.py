"""Accepting the webhook's connections: a cap on how many are open, and the time limits of
``_phases.py`` on every phase in which a client holds one without a request in progress.

aiohttp's server has neither. A client that connects and sends its headers a byte at a time
keeps its connection for as long as it likes, and each one costs about half a MiB (asyncio
gives every TLS connection a 256 KiB read buffer from the moment it is accepted): 1,000 such
clients held 468 MB. So the accept loop is ours, and it hands each connection to aiohttp's
own ``RequestHandler``, through the request framer (``_framing.py``) when the fast path is
on, directly when it is off (``IMAGECHECK_FASTPATH=0``): the bounds hold either way.

- a connection is counted from ``accept()``, before its TLS handshake, which must end within
  ``read_timeout`` (asyncio's ``ssl_handshake_timeout``);
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
from collections.abc import Callable
from typing import Any

from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from imagecheck.fastpath._framing import AnswerNow, Connection
from imagecheck.fastpath._heads import REVIEW_PATHS
from imagecheck.fastpath._phases import Accepted, Phases
from imagecheck.fastpath._switch import enabled

log = logging.getLogger("imagecheck.webhook")

# Reading the rest of a body nobody wants (a 413, an unknown route) before closing, so that
# the client reads the answer instead of a reset.
LINGER = 2.0
# A TLS connection being closed waits this long at most for the peer's close_notify.
TLS_SHUTDOWN_TIMEOUT = 2.0
# When accept() fails (out of file descriptors), wait before the next try instead of spinning.
ACCEPT_RETRY_DELAY = 0.1
BACKLOG = 128
# The kernel's buffers of a connection (Linux doubles each), fixed rather than grown by the
# kernel to megabytes: that memory is the pod's too, and a client that pipelines without
# reading its answers would fill both. Reviews are small; a 3 MiB one takes a few more turns.
SOCKET_SEND_BUFFER = 64 * 1024
SOCKET_RECEIVE_BUFFER = 128 * 1024


def handler_options() -> dict[str, Any]:
    """``web.AppRunner`` keyword arguments for the ``RequestHandler`` of each connection:
    its keep-alive timer never fires (the listener closes idle connections), and bodies come
    as sent (the webhook decodes them within its own limit: ``webhook/_body.py``)."""
    return {
        "access_log": None,
        "auto_decompress": False,
        "keepalive_timeout": NEVER,
        "lingering_time": LINGER,
    }


NEVER = 10.0 * 365 * 24 * 3600


class Listener(Phases):
    """Accepts connections for an aiohttp ``Server`` within the limits above.

    ``on_close(reason)`` is told of every connection the listener itself closes: ``refused``
    and ``evicted`` (the cap), ``header_timeout``. ``framing`` (by default the switch,
    ``fastpath.enabled()``, read once here) puts the request framer in front of aiohttp;
    POSTs to ``review_paths`` are offered to ``answer_now``.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None,
        max_connections: int,
        read_timeout: float,
        on_close: Callable[[str], None] = lambda reason: None,
        answer_now: AnswerNow = lambda body: None,
        framing: bool | None = None,
        review_paths: frozenset[str] = REVIEW_PATHS,
    ) -> None:
        super().__init__(read_timeout=read_timeout, on_close=on_close)
        self._ssl = ssl_context
        self._max = max(1, max_connections)
        self._answer_now = answer_now
        self._paths = review_paths
        self._framing = enabled() if framing is None else framing
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
        conn = Accepted()
        self._open[conn] = None
        conn.handshake = asyncio.ensure_future(self._handshake(conn, client))

    def _victim(self) -> Accepted | None:
        """The oldest connection without a request in progress, one never served first."""
        fallback = None
        for conn in self._open:
            if conn.busy:
                continue
            if not conn.served:
                return conn
            fallback = fallback or conn
        return fallback

    async def _handshake(self, conn: Accepted, client: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BUFFER)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_RECEIVE_BUFFER)
        tls: dict[str, Any] = {}
        if self._ssl is not None:
            tls = {
                "ssl": self._ssl,
                "ssl_handshake_timeout": self._read_timeout,
                "ssl_shutdown_timeout": TLS_SHUTDOWN_TIMEOUT,
            }
        try:
            await loop.connect_accepted_socket(
                lambda: Connection(
                    self, conn, self._answer_now, framing=self._framing, paths=self._paths
                ),
                client,
                **tls,
            )
        except OSError:  # a failed, reset or timed-out handshake; asyncio closed the socket
            pass
        finally:
            conn.handshake = None
            if conn.transport is None:  # never connected: nothing else will forget it
                self.forget(conn)

    # -- per connection -------------------------------------------------------------------

    def new_handler(self) -> RequestHandler:
        assert self._server is not None
        return self._server()
