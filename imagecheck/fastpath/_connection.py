"""One HTTP/1.1 connection of the fast transport (``_client.py``): asyncio's callbacks, a
request written, its answer awaited as llhttp parses it (``_response.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import httptools
import httpx

from imagecheck.fastpath._response import MAX_HEAD_BYTES, READ_BUFFER, Refused, ResponseParse

Origin = tuple[bytes, str, int]


class StaleConnection(Exception):
    """The connection ended before any byte of the answer: maybe closed by the server while
    idle. ``error`` is what to raise when the request cannot be sent again."""

    def __init__(self, error: httpx.TransportError) -> None:
        self.error = error


class Connection(ResponseParse, asyncio.Protocol):
    """One HTTP/1.1 connection: a request at a time, its answer parsed as it arrives."""

    def __init__(self, origin: Origin) -> None:
        super().__init__()
        self.origin = origin
        self.idle_since = 0.0
        self._closed = False
        self._lost: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None

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
            reason = ours if isinstance(ours, Refused) else exc
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

    # -- used by the transport ------------------------------------------------------------

    async def send(
        self, head: bytes, method: bytes, read_timeout: float | None
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """Write the request and wait for the answer's head."""
        self._start(method)
        self._error = None
        if self._transport is None or self._closed or self._transport.is_closing():
            raise StaleConnection(httpx.RemoteProtocolError("the connection was closed"))
        self._transport.write(head)
        while not self._head_done:
            if self._error is not None:
                raise self._error
            if self._lost is not None:
                error = httpx.RemoteProtocolError("the server disconnected without an answer")
                error.__cause__ = self._lost
                if self._received == 0:
                    raise StaleConnection(error)
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
