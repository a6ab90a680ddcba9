"""Raw HTTP/1.1 on one connection, for differential tests of servers: :func:`converse` writes
bytes as given (in separate writes) and reads until the server closes or goes quiet;
:func:`transcript` splits what came back into the answers a client would read.

Reading ends on a *quiet* period rather than on a count of answers, so that a server that
answers twice, or not at all, or closes early, is seen doing so. Server and client must run in
one event loop: then a quiet loop means the server has nothing left to do (a fake registry
check takes a turn of the loop, not time).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

# Each write is followed by this pause, so that the server reads it on its own.
GAP = 0.005
# Reading stops after this many polls in a row brought no bytes.
QUIET_POLLS = 3
POLL = 0.01


@dataclass(frozen=True)
class Answer:
    """One answer as read: its status line and headers (but ``Date``: see :func:`transcript`),
    its body (de-chunked), and whether all of it came."""

    status: int
    head: tuple[bytes, ...]
    body: bytes
    complete: bool = True


@dataclass(frozen=True)
class Transcript:
    """Everything one connection was answered, and whether the server closed it."""

    answers: tuple[Answer, ...]
    closed: bool

    @property
    def statuses(self) -> list[int]:
        return [answer.status for answer in self.answers]

    def __str__(self) -> str:
        """A line to read in a failure: each answer's status and the start of its body."""
        said = [
            f"{a.status} {a.body[:60]!r}{'' if a.complete else ' (cut short)'}"
            for a in self.answers
        ]
        return f"[{', '.join(said)}]{' closed' if self.closed else ''}"


class _Client(asyncio.Protocol):
    """Takes every byte from the socket as soon as the loop sees it. A stream reader would
    not do: once the server resets the connection (it does when bytes come after it closed)
    ``read()`` raises, and what was answered before the reset is lost to the test."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.closed = False

    def data_received(self, data: bytes) -> None:
        self.received += data

    def eof_received(self) -> bool:
        self.closed = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True


async def converse(
    port: int, pieces: list[bytes], *, shut: bool = False, quiet_polls: int = QUIET_POLLS
) -> tuple[bytes, bool]:
    """Write each of ``pieces`` to ``127.0.0.1:port`` (then shut the writing side when
    ``shut``), and read until the server closes (True) or sends nothing for ``quiet_polls``
    polls (False): what came back, and which of the two ended it."""
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(_Client, "127.0.0.1", port)
    try:
        for piece in pieces:
            if not client.closed:
                transport.write(piece)
            await asyncio.sleep(GAP)
        if shut and not client.closed:
            transport.write_eof()
        quiet, seen = 0, len(client.received)
        while quiet < quiet_polls and not client.closed:
            await asyncio.sleep(POLL)
            quiet = quiet + 1 if len(client.received) == seen else 0
            seen = len(client.received)
        return bytes(client.received), client.closed
    finally:
        transport.close()


_HEADER = re.compile(rb"([^:\r\n]+):[ \t]*(.*?)[ \t]*\r?$")

# aiohttp's 400 for a head its parser refuses quotes the bytes around the error *in the read
# that held it* (``_http_parser.pyx``, ``parser_error_from_errno``): the same request cut
# into other reads is quoted otherwise. What is quoted, and the body's length, are masked.
_QUOTED_READ = re.compile(rb":\n\n  b(?:'[^\n]*'|\"[^\n]*\")\n *\^")
_MASK = b":\n\n  <the bytes of the read>"


def transcript(stream: bytes, closed: bool) -> Transcript:
    """``stream`` split into answers. ``Date`` is dropped from each head: it is the only
    header that differs between two servers giving the same answer (it names the second the
    answer was written); and a parser error's quote of a read is masked (above). A last
    answer cut short is kept, with ``complete`` false."""
    answers = []
    while stream:
        answer, stream = _one(stream)
        answers.append(_masked(answer))
    return Transcript(tuple(answers), closed)


def _masked(answer: Answer) -> Answer:
    body, quoted = _QUOTED_READ.subn(_MASK, answer.body)
    if not quoted:
        return answer
    head = tuple(
        b"Content-Length: -" if line.lower().startswith(b"content-length:") else line
        for line in answer.head
    )
    return Answer(answer.status, head, body, answer.complete)


def _one(stream: bytes) -> tuple[Answer, bytes]:
    end = stream.find(b"\r\n\r\n")
    if end < 0:
        return Answer(_status(stream), _lines(stream), b"", complete=False), b""
    head, rest = _lines(stream[:end]), stream[end + 4 :]
    status = _status(stream)
    fields = {m[1].strip().lower(): m[2] for line in head[1:] if (m := _HEADER.match(line))}
    if status < 200 or status in (204, 304):
        return Answer(status, head, b""), rest
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        return _chunked(status, head, rest)
    length = fields.get(b"content-length")
    if length is None or not length.isdigit():  # delimited by the close
        return Answer(status, head, rest), b""
    size = int(length)
    return Answer(status, head, rest[:size], complete=len(rest) >= size), rest[size:]


def _chunked(status: int, head: tuple[bytes, ...], rest: bytes) -> tuple[Answer, bytes]:
    body = bytearray()
    while True:
        line_end = rest.find(b"\r\n")
        size_text = rest[:line_end].partition(b";")[0].strip() if line_end >= 0 else b""
        if line_end < 0 or not re.fullmatch(rb"[0-9a-fA-F]+", size_text):
            return Answer(status, head, bytes(body), complete=False), b""
        size, rest = int(size_text, 16), rest[line_end + 2 :]
        if size == 0:
            trailer_end = rest.find(b"\r\n")  # no trailers from these servers
            if trailer_end < 0:
                return Answer(status, head, bytes(body), complete=False), b""
            return Answer(status, head, bytes(body)), rest[trailer_end + 2 :]
        if len(rest) < size + 2:
            return Answer(status, head, bytes(body + rest[:size]), complete=False), b""
        body += rest[:size]
        rest = rest[size + 2 :]


def _lines(head: bytes) -> tuple[bytes, ...]:
    lines = head.split(b"\r\n")
    return tuple(line for line in lines if not line.lower().startswith(b"date:"))


def _status(stream: bytes) -> int:
    match = re.match(rb"HTTP/\d\.\d (\d{3})", stream)
    return int(match[1]) if match else 0
