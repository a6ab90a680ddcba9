"""The HTTP/1.1 transport under imagecheck's httpx clients: asyncio protocols, a connection pool
with keep-alive (here), one connection each (``_connection.py``), and ``httptools`` (llhttp,
Node.js's C parser) reading the responses (``_response.py``).

Why not httpx's own transport (httpcore on anyio, h11): per request it costs more than the
request itself. Checking 1,100 images on a loopback registry, httpcore's pool, anyio's stream
wrappers and h11's pure-Python state machine were about half of imagecheck's CPU, and their
imports a fifth of a cold ``check``'s start-up. A check sends one small request and reads one
small answer, so the transport only needs what that takes, done at C speed where it parses:

* **requests**: ``GET``/``HEAD`` (any method, with a small body, works); the head is written in
  one ``write``; a header name or value a server could read as two headers (CR, LF, NUL)
  refuses the request (``httpx.LocalProtocolError``) before a byte is sent;
* **responses**: parsed by llhttp, which refuses what request smuggling feeds on (two
  Content-Lengths, Content-Length with Transfer-Encoding, folded or malformed headers). Its
  head is capped (``MAX_HEAD_BYTES``, ``MAX_HEADERS``); the body is read as the caller asks,
  never more than ``READ_BUFFER`` ahead (reading pauses, TCP pushes back); the answer to a
  ``HEAD``, a 204 or a 304 has no body whatever its headers say; 1xx answers are skipped;
* **the pool**: at most ``max_connections`` connections, opening or open, for all hosts
  together (more requests wait, within httpx's pool timeout); idle ones are kept per origin
  for ``keepalive_expiry`` and reused newest first; a full pool closes an idle connection to
  another origin to open one. A connection the server closed is known from asyncio's
  callbacks (``connection_lost``), so nothing is probed per request. A request that fails on a
  *reused* connection before any byte of the answer came (the server closed it as it was
  picked) is sent once more on a new connection, when its method is idempotent, as Go's
  ``net/http`` does;
* **errors** are httpx's (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``,
  ``RemoteProtocolError``...), the original as ``__cause__``: ``registry/_exceptions.py``
  classifies them.

Not here, on purpose: proxies (the seam, ``_switch.py``, keeps httpx's own transport when the
environment names one), HTTP/2, ``Expect: 100-continue``, upgrades.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator

import httpx

from imagecheck.fastpath._connection import Connection, Origin, StaleConnection

# How long an idle connection is kept (httpx's default); a server's own keep-alive is longer.
KEEPALIVE_EXPIRY = 5.0
_IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})
_BAD_IN_HEADER = (b"\r", b"\n", b"\0")


class WireTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` over asyncio, HTTP/1.1 only (see the module's text)."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        *,
        max_connections: int,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        self._ssl = ssl_context
        self._max = max(1, max_connections)
        self._expiry = keepalive_expiry
        self._idle: dict[Origin, list[Connection]] = {}
        self._open = 0  # connections open or being opened
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._all: set[Connection] = set()
        self._closed = False
        self.opened = 0  # connections opened in all (for tests and benchmarks)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        if self._closed:
            raise RuntimeError("the transport is closed")
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        head = await _request_head(request)
        host = url.raw_host.decode("ascii")  # IDNA-encoded: what DNS and SNI take
        origin: Origin = (url.raw_scheme, host, url.port or _default_port(url.raw_scheme))
        method = request.method.encode("ascii")
        connection, reused = await self._acquire(origin, timeouts)
        try:
            return await self._exchange(connection, head, method, timeouts)
        except StaleConnection as stale:
            if not (reused and method in _IDEMPOTENT):
                raise stale.error from stale.error.__cause__
        # The server closed the reused connection as it was picked: once more, on a new one.
        connection, _ = await self._acquire(origin, timeouts, fresh=True)
        try:
            return await self._exchange(connection, head, method, timeouts)
        except StaleConnection as stale:
            raise stale.error from stale.error.__cause__

    async def _exchange(
        self, connection: Connection, head: bytes, method: bytes, timeouts: dict[str, float | None]
    ) -> httpx.Response:
        try:
            status, reason, headers = await connection.send(head, method, timeouts.get("read"))
        except BaseException:
            self._release(connection, reusable=False)
            raise
        stream = _Body(self, connection, timeouts.get("read"))
        return httpx.Response(
            status,
            headers=headers,
            stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    async def aclose(self) -> None:
        self._closed = True
        for connection in list(self._all):
            connection.close()
        self._all.clear()
        self._idle.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(RuntimeError("the transport is closed"))
        self._waiters.clear()

    # -- the pool ---------------------------------------------------------------------------

    async def _acquire(
        self, origin: Origin, timeouts: dict[str, float | None], *, fresh: bool = False
    ) -> tuple[Connection, bool]:
        """A connection to ``origin`` and whether it was reused: an idle one, else a new one
        while the pool has room, else (full) a new one in place of another origin's idle one,
        else the first that comes free."""
        while True:
            idle = None if fresh else self._take_idle(origin)
            if idle is not None:
                return idle, True
            if self._open < self._max or self._evict_idle():
                self._open += 1
                try:
                    return await self._connect(origin, timeouts.get("connect")), False
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
            await self._wait_for_room(timeouts.get("pool"))

    def _take_idle(self, origin: Origin) -> Connection | None:
        stack = self._idle.get(origin)
        now = time.monotonic()
        while stack:
            connection = stack.pop()
            if connection.usable(now - self._expiry):
                return connection
            self._discard(connection)
        return None

    def _evict_idle(self) -> bool:
        """Close the oldest idle connection of any origin, to make room; whether there was one."""
        oldest: Connection | None = None
        for stack in self._idle.values():
            if stack and (oldest is None or stack[0].idle_since < oldest.idle_since):
                oldest = stack[0]
        if oldest is None:
            return False
        self._idle[oldest.origin].remove(oldest)
        self._discard(oldest)
        return True

    async def _wait_for_room(self, timeout: float | None) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except BaseException as exc:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():
                self._wake()  # woken, but leaving: the room goes to the next in line
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout("no connection came free in time") from None
            raise

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _connect(self, origin: Origin, timeout: float | None) -> Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._ssl if scheme == b"https" else None
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: Connection(origin),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls else None,
                    ssl_handshake_timeout=timeout if tls and timeout else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        self.opened += 1
        self._all.add(connection)
        return connection

    def _release(self, connection: Connection, *, reusable: bool) -> None:
        if reusable and not self._closed and connection.reusable():
            connection.idle_since = time.monotonic()
            self._idle.setdefault(connection.origin, []).append(connection)
            # Room for a waiter to another origin: it closes this one if it must.
        else:
            self._discard(connection)
        self._wake()

    def _discard(self, connection: Connection) -> None:
        connection.close()
        if connection in self._all:
            self._all.remove(connection)
            self._open -= 1


class _Body(httpx.AsyncByteStream):
    """A response body read from its connection as the caller asks; closing it gives the
    connection back to the pool when the body was read to its end, else closes it."""

    def __init__(self, pool: WireTransport, connection: Connection, timeout: float | None):
        self._pool = pool
        self._connection: Connection | None = connection
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx.StreamClosed()
        try:
            async for chunk in connection.body(self._timeout):
                yield chunk
        except BaseException:
            self._give_back(reusable=False)
            raise
        self._give_back(reusable=True)

    async def aclose(self) -> None:
        self._give_back(reusable=True)  # reused only if the body was read to its end

    def _give_back(self, *, reusable: bool) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool._release(connection, reusable=reusable)


async def _request_head(request: httpx.Request) -> bytes:
    """The request line, headers and body (small: imagecheck sends none), as bytes."""
    body = b"".join([part async for part in request.stream])  # type: ignore[union-attr]
    lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), request.url.raw_path)]
    chunked = False
    for name, value in request.headers.raw:
        if any(bad in name or bad in value for bad in _BAD_IN_HEADER) or not name:
            raise httpx.LocalProtocolError("a request header holds a line break or NUL")
        if name.lower() == b"transfer-encoding":
            chunked = True
            continue
        lines.append(b"%s: %s\r\n" % (name, value))
    if chunked:  # sent whole, so with its length
        lines.append(b"Content-Length: %d\r\n" % len(body))
    lines.append(b"\r\n")
    return b"".join(lines) + body


def _default_port(scheme: bytes) -> int:
    return 443 if scheme == b"https" else 80
