"""What llhttp tells a connection of one answer (``_connection.py``): its head, capped, and
its body, buffered at most ``READ_BUFFER`` ahead of the reader; the answer's own parse state,
apart from the socket it arrives on."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import httptools

# The head of a response (status line and headers) and how many headers: far above any
# registry's (a few hundred bytes, a dozen headers), far below what would hurt.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 256
# Body bytes read from the socket ahead of the caller, before reading pauses.
READ_BUFFER = 256 * 1024
_NO_BODY_STATUS = frozenset({204, 304})


class Refused(Exception):
    """Raised in an llhttp callback: the answer breaks one of our own limits or rules."""


class ResponseParse:
    """The parse of the answer to the request in progress: llhttp's callbacks and what they
    found. A connection (the subclass) owns the socket; ``_transport`` is paused here when
    the body runs ahead of its reader."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._broken = False  # bytes out of turn, a parse error: never reused
        self._parser: Any = None
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

    @property
    def complete(self) -> bool:
        return self._complete and not self._chunks

    # -- llhttp's callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._head_done:  # a second answer to one request: the framing cannot be trusted
            raise Refused("more than one response to one request")

    def on_status(self, status: bytes) -> None:
        self._reason += status
        self._head_size += len(status)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        if len(self._headers) >= MAX_HEADERS:
            raise Refused(f"more than {MAX_HEADERS} headers")
        if self._head_size > MAX_HEAD_BYTES:
            raise Refused("response headers too large")
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status == 101:
            raise Refused("the server switched protocols unasked")
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

    def _start(self, method: bytes) -> None:
        """A new answer to parse, to a request of ``method``."""
        self._parser = httptools.HttpResponseParser(self)
        self._method = method
        self._received = 0
        self._head_done = self._complete = self._keep_alive = False
        self._no_body = self._until_close = False
        self._status, self._reason, self._headers = 0, b"", []
        self._head_size = 0
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
