"""One client connection of a hostile server: reading requests, bounded, and carrying out
the actions every way of answering shares (reply, hang, trickle, reset)."""

from __future__ import annotations

import email.parser
import http.client
import io
import itertools
import math
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tests.support.hostile._actions import Reply, Trickle, reason
from tests.support.hostile._bodies import GzipBomb, body_chunks, body_size

if TYPE_CHECKING:
    from tests.support.hostile._proxying import Upstream

MAX_HEAD = 256 * 1024
MAX_REQUEST_BODY = 16 * 1024 * 1024
_TLS_HANDSHAKE = 0x16  # first byte of a TLS record carrying a ClientHello


@dataclass(frozen=True)
class Request:
    """One request as the server read it."""

    method: str
    target: str
    headers: http.client.HTTPMessage
    body: bytes
    keep_alive: bool

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(urlsplit(self.target).query, keep_blank_values=True)

    @property
    def form(self) -> dict[str, list[str]]:
        """The body as ``application/x-www-form-urlencoded`` fields (empty otherwise)."""
        if self.headers.get_content_type() != "application/x-www-form-urlencoded":
            return {}
        return urllib.parse.parse_qs(self.body.decode("latin-1"), keep_blank_values=True)

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


def read_request(rfile: io.BufferedIOBase) -> Request | None:
    """The next request on a connection; ``None`` at end of stream, on garbage or past the
    bounds (:data:`MAX_HEAD` for the request line and headers together)."""
    head = _read_head(rfile)
    if head is None:
        return None
    line, _, fields = head.partition(b"\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    method, target, version = parts
    # What http.client.parse_headers does, over the lines already read.
    headers = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(
        fields.decode("iso-8859-1")
    )
    assert isinstance(headers, http.client.HTTPMessage)
    if "Transfer-Encoding" in headers:
        return None  # chunked request bodies: no registry client sends them, not parsed
    length = headers.get("Content-Length", "0")
    if not length.isdigit() or int(length) > MAX_REQUEST_BODY:
        return None
    body = rfile.read(int(length)) if int(length) else b""
    if len(body) < int(length):
        return None
    connection = headers.get("Connection", "").lower()
    keep_alive = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
    return Request(method.upper(), target, headers, body, keep_alive)


def _read_head(rfile: io.BufferedIOBase) -> bytes | None:
    """The request line and header lines, up to the blank line; ``None`` past the bound."""
    lines: list[bytes] = []
    budget = MAX_HEAD
    while True:
        line = rfile.readline(budget + 1)
        budget -= len(line)
        if budget < 0 or not line or (not lines and not line.strip()):
            return None
        if line in (b"\r\n", b"\n"):
            return b"".join(lines)
        lines.append(line)


def _unchanged(data: bytes) -> bytes:
    return data


class CutShort(OSError):
    """An answer the server stopped sending: it is closing, or the answer bound passed."""


class Connection:
    """One accepted socket. ``answer_bound``: the most seconds any one answer (hang, trickle,
    stream) may take, whatever was asked; ``encoding``: of status lines and headers."""

    def __init__(
        self,
        sock: socket.socket,
        listener: str,
        stopping: threading.Event,
        *,
        answer_bound: float | None,
        encoding: str,
    ) -> None:
        self.sock = sock
        self.listener = listener
        self.stopping = stopping
        self.answer_bound = answer_bound
        self.encoding = encoding
        self.deadline = math.inf
        self.upstream: Upstream | None = None  # opened by a forwarding server on first use
        self.rfile = sock.makefile("rb")

    def is_tls_hello(self) -> bool:
        try:
            first = self.sock.recv(1, socket.MSG_PEEK)
        except OSError:
            return False
        return first == bytes([_TLS_HANDSHAKE])

    def next_request(self) -> Request | None:
        request = read_request(self.rfile)
        bound = self.answer_bound
        self.deadline = math.inf if bound is None else time.monotonic() + bound
        return request

    def close(self) -> None:
        if self.upstream is not None:
            self.upstream.close()
        self.rfile.close()
        self.sock.close()

    # -- the shared actions ---------------------------------------------------------------

    def hang(self, seconds: float | None) -> None:
        bound = self.answer_bound
        if bound is not None:
            seconds = bound if seconds is None else min(seconds, bound)
        self.stopping.wait(seconds)

    def reset(self, partial: bytes, *, rst: bool) -> None:
        if partial:
            self.sock.sendall(partial)
        if rst:
            # Linger on, timeout 0: close() discards unsent data and sends RST, not FIN.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            self.sock.shutdown(socket.SHUT_RDWR)
        # rfile holds a reference on the socket; the fd closes (and RST goes out) only once
        # both are closed.
        self.rfile.close()
        self.sock.close()

    def reply(
        self,
        reply: Reply,
        *,
        head_only: bool,
        trickle: Trickle | None = None,
        fill: Callable[[bytes], bytes] = _unchanged,
    ) -> bool:
        """Send ``reply`` (``fill`` applied to its header lines and a bytes body); whether the
        connection may be kept alive after it."""
        body = reply.body
        headers = list(reply.headers)
        names = {name.lower() for name, _ in headers}
        if isinstance(body, GzipBomb) and "content-encoding" not in names:
            headers.append(("Content-Encoding", "gzip"))
        if isinstance(body, bytes):
            body = fill(body)
        keep = True
        match reply.framing:
            case "auto" if "content-length" in names:
                pass
            case "length" | "auto":
                headers.append(("Content-Length", str(body_size(body))))
            case "short":
                headers.append(("Content-Length", str(max(0, body_size(body) - reply.lie))))
            case "long":
                headers.append(("Content-Length", str(body_size(body) + reply.lie)))
                keep = False
            case "chunked":
                headers.append(("Transfer-Encoding", "chunked"))
            case "close":
                headers.append(("Connection", "close"))
                keep = False
            case "none":
                pass
        said = reply.reason if reply.reason is not None else reason(reply.status)
        head = self._encode(f"HTTP/1.1 {reply.status} {said}\r\n")
        for name, value in headers:
            head += fill(self._encode(f"{name}: {value}\r\n"))
        head += b"\r\n"
        chunks: Iterator[bytes] = iter(()) if head_only else body_chunks(body)
        if reply.framing == "chunked" and not head_only:
            framed = (b"%x\r\n%s\r\n" % (len(c), c) for c in body_chunks(body))
            chunks = itertools.chain(framed, (b"0\r\n\r\n",))
        self.send(itertools.chain((head,), chunks), trickle)
        return keep

    def send(self, pieces: Iterator[bytes], trickle: Trickle | None = None) -> None:
        """Send ``pieces`` (a few bytes at a time if ``trickle``); :class:`CutShort` when the
        server closes or the answer bound passes first."""
        for piece in pieces:
            if trickle is None:
                if self.stopping.is_set() or time.monotonic() > self.deadline:
                    raise CutShort("answer cut short")
                self.sock.sendall(piece)
                continue
            step = max(1, trickle.chunk)
            for start in range(0, len(piece), step):
                if self.stopping.wait(trickle.interval) or time.monotonic() > self.deadline:
                    raise CutShort("trickle cut short")
                self.sock.sendall(piece[start : start + step])

    def _encode(self, line: str) -> bytes:
        # Headers relayed from upstream were read as latin-1 and go back out byte for byte;
        # scripted ones are text, any of it, sent as UTF-8.
        return line.encode(self.encoding, "replace" if self.encoding == "utf-8" else "strict")
