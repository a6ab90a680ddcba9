"""The one place untrusted bodies, JSON and text are bounded (imagecheck/bounded.py)."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import httpx
import pytest

from imagecheck.bounded import (
    parse_json,
    parse_json_object,
    printable,
    read_capped,
    read_prefix,
)
from imagecheck.errors import CredentialsError, ProtocolError

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class _Endless(httpx.AsyncByteStream):
    """A body that never ends: only a bounded reader finishes on it."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.sent += 65536
            yield b"x" * 65536


def _response(body: bytes | httpx.AsyncByteStream, **headers: str) -> httpx.Response:
    if isinstance(body, bytes):
        return httpx.Response(200, headers=headers, stream=httpx.ByteStream(body))
    return httpx.Response(200, headers=headers, stream=body)


def test_read_capped_refuses_an_endless_body_early() -> None:
    stream = _Endless()
    with pytest.raises(ProtocolError, match="manifest is larger than 1000000 bytes"):
        run(read_capped(_response(stream), 1_000_000, "manifest"))
    assert stream.sent <= 1_000_000 + 65536


def test_read_capped_refuses_a_declared_length_before_reading() -> None:
    stream = _Endless()
    with pytest.raises(ProtocolError, match="larger than 10 bytes"):
        run(read_capped(_response(stream, **{"Content-Length": "11"}), 10, "token response"))
    assert stream.sent == 0


def test_read_capped_returns_a_body_within_the_cap() -> None:
    assert run(read_capped(_response(b"0123456789"), 10, "x")) == b"0123456789"


def test_read_capped_caps_a_gzip_bomb_after_decoding() -> None:
    bomb = gzip.compress(b"\0" * 10_000_000)
    assert len(bomb) < 20_000
    response = _response(bomb, **{"Content-Encoding": "gzip"})
    with pytest.raises(ProtocolError, match="larger than 1000 bytes"):
        run(read_capped(response, 1000, "token response"))


def test_read_capped_decodes_gzip_within_the_cap() -> None:
    response = _response(gzip.compress(b'{"token": "t"}'), **{"Content-Encoding": "gzip"})
    assert run(read_capped(response, 1000, "token response")) == b'{"token": "t"}'


def test_read_capped_refuses_an_unknown_encoding() -> None:
    response = _response(b"abc", **{"Content-Encoding": "zz\x1b[31m"})
    with pytest.raises(ProtocolError, match=r"unsupported Content-Encoding 'zz\?\[31m'"):
        run(read_capped(response, 1000, "manifest"))


def test_read_prefix_stops_reading() -> None:
    stream = _Endless()
    prefix = run(read_prefix(_response(stream), 100_000))
    assert len(prefix) == 100_000
    assert stream.sent <= 100_000 + 65536


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[" * 60_000 + "]" * 60_000, "nested too deeply", id="deep-array"),
        pytest.param('{"a":' * 60_000, "nested too deeply", id="deep-object"),
        pytest.param("[" * 16_384, "nested too deeply", id="open-brackets"),
        pytest.param("1" * 5000, "not valid JSON", id="5000-digit-number"),
        pytest.param(b"\xff\xfe{", "not valid JSON", id="bad-utf8"),
        pytest.param("{'a': 1}", "not valid JSON", id="syntax"),
        pytest.param("", "not valid JSON", id="empty"),
    ],
)
def test_parse_json_raises_only_the_typed_error(text: str | bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_json(text, "token response")


def test_parse_json_object_requires_an_object_and_takes_the_error_type() -> None:
    assert parse_json_object(b'{"a": [1]}', "x") == {"a": [1]}
    with pytest.raises(CredentialsError, match=r"config\.json is not a JSON object"):
        parse_json_object("[1]", "config.json", error=CredentialsError)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("plain", "plain", id="plain"),
        pytest.param("a\nfound x", "a?found x", id="newline"),
        pytest.param("\x1b[32mok\x1b[0m", "?[32mok?[0m", id="ansi"),
        pytest.param("x\ry", "x?y", id="carriage-return"),
        pytest.param("a\u202eb", "a?b", id="bidi-override"),
        pytest.param("a\u2028b", "a?b", id="line-separator"),
        pytest.param("é ü 中", "é ü 中", id="letters-kept"),
    ],
)
def test_printable_replaces_control_characters(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_caps_length() -> None:
    assert printable("a" * 1000, 10) == "a" * 10 + "..."
