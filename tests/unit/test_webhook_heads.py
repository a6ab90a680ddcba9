"""``imagecheck.fastpath._heads``: the framer frames a request only as aiohttp's own parser
takes it, and reads each byte of a head once, however slowly the head and its body arrive.
(The differential suite shows the answers over HTTP; these pin the rules down.)"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from imagecheck.fastpath import _heads
from imagecheck.fastpath._heads import FOREIGN, MAX_INLINE_BODY, Framed, Heads, parse_head


@pytest.fixture
def handler() -> Iterator[RequestHandler]:
    """aiohttp's handler for one connection, with its default limits."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def nothing(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    yield RequestHandler(Server(nothing, loop=loop), loop=loop)
    asyncio.set_event_loop(None)
    loop.close()


def head(*lines: str, request: str = "POST /validate HTTP/1.1") -> bytes:
    return "\r\n".join([request, *lines, "", ""]).encode("latin-1")


def parsed(handler: RequestHandler, data: bytes) -> Framed | str:
    async def parse() -> Framed | str:
        return parse_head(data, handler)

    return asyncio.get_event_loop().run_until_complete(parse())


PLAIN = ("Host: t", "Content-Type: application/json", "Content-Length: 12")


def test_a_plain_review_head_is_framed_to_the_end_of_its_body(handler: RequestHandler) -> None:
    framed = parsed(handler, head(*PLAIN))
    assert isinstance(framed, Framed)
    assert (framed.head_size, framed.size, framed.inline) == (
        len(head(*PLAIN)),
        12 + len(head(*PLAIN)),
        True,
    )


@pytest.mark.parametrize(
    "data",
    [
        head("Content-Length: 2"),  # no Host: aiohttp's 400
        head(*PLAIN, "Host: u"),  # a second Host
        head(*PLAIN, "Content-Type: text/plain"),
        head(*PLAIN, "User-Agent: a", "User-Agent: b"),
        head(*PLAIN, *(f"X-{i}: v" for i in range(126))),  # 129 headers
        head(*PLAIN, "X-Long: " + "v" * 9000),  # one field over 8190 bytes
        head(*PLAIN, "X-Nul: a\0b"),
        head("Host: t", "Content-Length: +2"),
        head("Host: t", "Content-Length: 2", "Content-Length: 2"),
        head("Host: t", request="CONNECT t:443 HTTP/1.1"),
        head("Host: t", "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: A"),
        head("Host: t", "Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Key: a"),
        head("Host: t", "Upgrade: h2c"),
        head("Host: t", "Transfer-Encoding: chunked"),
        head("Host: t", "Expect: 100-continue", "Content-Length: 2"),
        head("Host: t", "Connection: keep-alive", "Content-Length: 2"),
        head("Host: t", "Content-Length: 2", request="POST /validate HTTP/1.0"),
        head("Host: t", f"Content-Length: {MAX_INLINE_BODY + 1}"),
        head("Host: t", " Content-Length: 2"),  # obs-fold as the first line
        head("Host: t", "Content-Length : 2"),
        b"\r\n\r\n",  # no request at all
    ],
    ids=[
        "no-host", "two-hosts", "two-types", "two-agents", "129-headers", "9000-bytes", "nul",
        "signed-length", "two-lengths", "connect", "h2c", "websocket", "upgrade-alone",
        "chunked", "expect", "connection", "http-1.0", "big-body", "fold", "space-colon",
        "empty",
    ],
)  # fmt: skip
def test_what_aiohttp_refuses_or_frames_otherwise_is_left_to_it(
    handler: RequestHandler, data: bytes
) -> None:
    assert parsed(handler, data) == FOREIGN


def test_128_headers_are_framed_as_aiohttp_takes_them(handler: RequestHandler) -> None:
    assert isinstance(parsed(handler, head(*PLAIN, *(f"X-{i}: v" for i in range(125)))), Framed)


@pytest.mark.parametrize(
    ("data", "inline"),
    [
        (head(*PLAIN, "Content-Encoding: gzip"), False),  # decoded by the webhook's own path
        (head(*PLAIN, "Content-Encoding: identity"), False),
        (head(*PLAIN, request="POST /?timeout=10s HTTP/1.1"), True),
        (head(*PLAIN, request="POST /%76alidate HTTP/1.1"), False),  # aiohttp's router decides
        (head(*PLAIN, request="POST http://t/validate HTTP/1.1"), False),
        (head("Host: t", request="GET /healthz HTTP/1.1"), False),
    ],
)
def test_only_a_plain_review_is_offered_to_the_inline_answer(
    handler: RequestHandler, data: bytes, inline: bool
) -> None:
    framed = parsed(handler, data)
    assert isinstance(framed, Framed)
    assert framed.inline is inline


class CountingPattern:
    """``_heads._BARE_LF`` with the bytes it is asked to search counted."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern = pattern
        self.searched = 0

    def search(self, data: Any, pos: int, endpos: int) -> re.Match[bytes] | None:
        self.searched += endpos - pos
        return self.pattern.search(data, pos, endpos)


def test_a_head_and_body_arriving_a_byte_at_a_time_are_scanned_once_and_parsed_once(
    handler: RequestHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack this stops: a 10 KiB head, then its body a byte per read. Re-parsing the
    head on every read cost one Python call per header per byte."""
    filler = [f"X-{i}: {'v' * 60}" for i in range(120)]
    request = head("Host: t", *filler, "Content-Length: 2000") + b"{" * 2000
    calls: list[int] = []
    real = _heads.parse_head

    def counted(
        data: bytes, handler: RequestHandler, paths: frozenset[str] = _heads.REVIEW_PATHS
    ) -> Framed | str:
        calls.append(len(data))
        return real(data, handler, paths)

    monkeypatch.setattr(_heads, "parse_head", counted)
    pattern = CountingPattern(_heads._BARE_LF)
    monkeypatch.setattr(_heads, "_BARE_LF", pattern)
    heads = Heads(handler)
    buffer = bytearray()
    answers = []

    async def trickle() -> None:
        for byte in request:
            buffer.append(byte)
            answers.append(heads.frame(buffer))

    asyncio.get_event_loop().run_until_complete(trickle())
    size = len(request) - 2000
    assert calls == [size]
    assert pattern.searched <= size
    assert answers[: size - 1] == [None] * (size - 1)
    assert {id(a) for a in answers[size - 1 :]} == {id(answers[-1])}


def test_a_bare_lf_hands_the_connection_over_before_the_head_is_complete(
    handler: RequestHandler,
) -> None:
    heads = Heads(handler)
    assert heads.frame(bytearray(b"POST /validate HTTP/1.1\r\nHost: t")) is None
    assert heads.frame(bytearray(b"POST /validate HTTP/1.1\r\nHost: t\nContent")) == FOREIGN
    assert Heads(handler).frame(bytearray(b"X" * (_heads.MAX_HEAD + 1))) == FOREIGN
