"""The HTTP/1.1 transport under imagecheck's httpx clients: asyncio protocols, a connection pool
with keep-alive, and ``httptools`` (llhttp, Node.js's C parser) reading the responses (issue #14).

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
  ``RemoteProtocolError``...), the original as ``__cause__``: ``transport.py`` classifies them.

Not here, on purpose: proxies (``client.py`` keeps httpx's own transport when the environment
names one), HTTP/2, ``Expect: 100-continue``, upgrades.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, cast

import httptools
import httpx

# The head of a response (status line and headers) and how many headers: far above any
# registry's (a few hundred bytes, a dozen headers), far below what would hurt.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 256
# Body bytes read from the socket ahead of the caller, before reading pauses.
READ_BUFFER = 256 * 1024
# How long an idle connection is kept (httpx's default); a server's own keep-alive is longer.
KEEPALIVE_EXPIRY = 5.0
_IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})
_NO_BODY_STATUS = frozenset({204, 304})
_FRAMING = (b"content-length", b"transfer-encoding")
_BAD_IN_HEADER = (b"\r", b"\n", b"\0")

Origin = tuple[bytes, str, int]


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
        self._idle: dict[Origin, list[_Connection]] = {}
        self._open = 0  # connections open or being opened
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._all: set[_Connection] = set()
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
        except _StaleConnection as stale:
            if not (reused and method in _IDEMPOTENT):
                raise stale.error from stale.error.__cause__
        # The server closed the reused connection as it was picked: once more, on a new one.
        connection, _ = await self._acquire(origin, timeouts, fresh=True)
        try:
            return await self._exchange(connection, head, method, timeouts)
        except _StaleConnection as stale:
            raise stale.error from stale.error.__cause__

    async def _exchange(
        self, connection: _Connection, head: bytes, method: bytes, timeouts: dict[str, float | None]
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
    ) -> tuple[_Connection, bool]:
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

    def _take_idle(self, origin: Origin) -> _Connection | None:
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
        oldest: _Connection | None = None
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

    async def _connect(self, origin: Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._ssl if scheme == b"https" else None
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(origin),
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

    def _release(self, connection: _Connection, *, reusable: bool) -> None:
        if reusable and not self._closed and connection.reusable():
            connection.idle_since = time.monotonic()
            self._idle.setdefault(connection.origin, []).append(connection)
            # Room for a waiter to another origin: it closes this one if it must.
        else:
            self._discard(connection)
        self._wake()

    def _discard(self, connection: _Connection) -> None:
        connection.close()
        if connection in self._all:
            self._all.remove(connection)
            self._open -= 1


class _Refused(Exception):
    """Raised in an llhttp callback: the answer breaks one of our own limits or rules."""


class _StaleConnection(Exception):
    """The connection ended before any byte of the answer: maybe closed by the server while
    idle. ``error`` is what to raise when the request cannot be sent again."""

    def __init__(self, error: httpx.TransportError) -> None:
        self.error = error


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: a request at a time, its answer parsed as it arrives."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.idle_since = 0.0
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._broken = False  # bytes out of turn, a parse error: never reused
        self._lost: BaseException | None = None
        self._parser: Any = None
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._received = 0  # bytes of this answer so far
        self._head_done = False
        self._no_body = False
        self._method = b""
        self._status = 0
        self._reason = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_size = 0
        self._until_close = False
        self._complete = False
        self._keep_alive = False
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's (serve) is not an asyncio.Transport subclass.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._parser is None or self._complete:
            self._broken = True  # nothing was asked: a server talking out of turn
            self.close()
            return
        self._received += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols unasked"))
        except httptools.HttpParserError as exc:
            ours = exc.__context__  # a callback's own refusal, below
            reason = ours if isinstance(ours, _Refused) else exc
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP response: {reason}"))
        else:
            if not self._head_done and self._received > MAX_HEAD_BYTES:  # still no end to it
                self._fail(httpx.RemoteProtocolError("invalid HTTP response: headers too large"))
        self._notify()

    def eof_received(self) -> bool:
        if self._parser is not None and not self._complete:
            if self._head_done and self._until_close:
                self._complete = True  # a body delimited by the end of the connection
            else:
                self._lost = self._lost or ConnectionResetError("the server closed the connection")
        self._notify()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._parser is not None and not self._complete:
            self._lost = exc or ConnectionResetError("the server closed the connection")
        self._notify()

    def pause_writing(self) -> None:  # requests are a few hundred bytes: never waits
        pass

    def resume_writing(self) -> None:
        pass

    # -- llhttp's callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._head_done:  # a second answer to one request: the framing cannot be trusted
            raise _Refused("more than one response to one request")

    def on_status(self, status: bytes) -> None:
        self._reason += status
        self._head_size += len(status)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        if len(self._headers) >= MAX_HEADERS:
            raise _Refused(f"more than {MAX_HEADERS} headers")
        if self._head_size > MAX_HEAD_BYTES:
            raise _Refused("response headers too large")
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status == 101:
            raise _Refused("the server switched protocols unasked")
        if 100 <= status < 200:
            self._reason, self._headers = b"", []  # informational: the answer comes next
            return
        self._status = status
        self._head_done = True
        self._no_body = self._method == b"HEAD" or status in _NO_BODY_STATUS
        framed = any(
            n.lower() in (b"content-length", b"transfer-encoding") for n, _ in self._headers
        )
        self._until_close = not self._no_body and not framed
        if self._no_body:
            self._complete = True
            self._keep_alive = self._persistent()

    def on_body(self, body: bytes) -> None:
        if self._no_body:
            self._broken = True  # a body where none may be: the framing cannot be trusted
            return
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > READ_BUFFER and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def on_message_complete(self) -> None:
        if self._head_done and not self._no_body:
            self._complete = True
            self._keep_alive = self._persistent()

    # -- used by the transport ------------------------------------------------------------

    async def send(
        self, head: bytes, method: bytes, read_timeout: float | None
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """Write the request and wait for the answer's head."""
        self._start(method)
        if self._transport is None or self._closed or self._transport.is_closing():
            raise _StaleConnection(httpx.RemoteProtocolError("the connection was closed"))
        self._transport.write(head)
        while not self._head_done:
            if self._error is not None:
                raise self._error
            if self._lost is not None:
                error = httpx.RemoteProtocolError("the server disconnected without an answer")
                error.__cause__ = self._lost
                if self._received == 0:
                    raise _StaleConnection(error)
                raise error
            await self._wait(read_timeout)
        return self._status, self._reason, self._headers

    async def body(self, read_timeout: float | None) -> AsyncIterator[bytes]:
        while True:
            if self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._paused and self._buffered <= READ_BUFFER // 2 and self._transport:
                    self._paused = False
                    self._transport.resume_reading()
                yield chunk
            elif self._complete:
                return
            elif self._error is not None:
                raise self._error
            elif self._lost is not None:
                raise httpx.ReadError("the connection ended inside the response body")
            else:
                await self._wait(read_timeout)

    @property
    def complete(self) -> bool:
        return self._complete and not self._chunks

    def usable(self, expired_before: float) -> bool:
        """Idle, open and not expired."""
        return (
            not (self._closed or self._broken)
            and self.idle_since >= expired_before
            and (self._transport is not None and not self._transport.is_closing())
        )

    def reusable(self) -> bool:
        """The answer was read to its end, the server keeps the connection, nothing is amiss."""
        return self.complete and self._keep_alive and not (self._closed or self._broken)

    def close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    # -- inside -----------------------------------------------------------------------------

    def _start(self, method: bytes) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._method = method
        self._received = 0
        self._head_done = self._complete = self._keep_alive = False
        self._no_body = self._until_close = False
        self._status, self._reason, self._headers = 0, b"", []
        self._head_size = 0
        self._error = None
        self._chunks.clear()
        self._buffered = 0

    def _persistent(self) -> bool:
        """Whether the server keeps the connection after this answer (RFC 9112, 9.3)."""
        if self._until_close:
            return False
        tokens = {
            token.strip().lower()
            for name, value in self._headers
            if name.lower() == b"connection"
            for token in value.split(b",")
        }
        if self._parser.get_http_version() == "1.0":
            return b"keep-alive" in tokens
        return b"close" not in tokens

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._broken = True
        self.close()

    def _notify(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self, timeout: float | None) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._waiter
        except TimeoutError:
            self._broken = True
            raise httpx.ReadTimeout("the server did not answer in time") from None
        finally:
            self._waiter = None


class _Body(httpx.AsyncByteStream):
    """A response body read from its connection as the caller asks; closing it gives the
    connection back to the pool when the body was read to its end, else closes it."""

    def __init__(self, pool: WireTransport, connection: _Connection, timeout: float | None):
        self._pool = pool
        self._connection: _Connection | None = connection
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
