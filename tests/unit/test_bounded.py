"""Where untrusted bodies, JSON and text are bounded: ``imagecheck._capped``, ``_text``."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

import httpx
import pytest

from imagecheck._capped import (
    bound_body,
    parse_json,
    parse_json_object,
    read_capped,
    read_capped_sync,
    read_prefix,
)
from imagecheck._text import authorization_secrets, printable, redact
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


class _Counted(httpx.AsyncByteStream):
    """A short body that says whether it was read to its end."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.finished = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.body
        self.finished = True


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


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}'])
def test_parse_json_refuses_what_is_not_json(text: str) -> None:
    # Python's parser takes these; Go's (docker, containerd) does not, nor does the RFC.
    with pytest.raises(ProtocolError, match="not valid JSON"):
        parse_json(text, "token response")


def test_bound_body_drop_reads_a_prefix_and_keeps_nothing() -> None:
    stream = _Endless()
    response = _response(stream, **{"Content-Encoding": "gzip"})
    bound_body(response, limit=100_000, drop=True)
    assert run(response.aread()) == b""  # what httpx does with a redirect's body
    assert stream.sent <= 100_000 + 65536


def test_bound_body_drop_reads_a_short_body_to_its_end() -> None:
    body = _Counted(b"moved")
    response = _response(body)
    bound_body(response, limit=100_000, drop=True)
    assert run(response.aread()) == b""
    assert body.finished


def test_bound_body_cap_refuses_past_the_limit() -> None:
    stream = _Endless()
    response = _response(stream)
    bound_body(response, limit=1_000_000, drop=False)
    with pytest.raises(ProtocolError, match="larger than 1000000 bytes"):
        run(response.aread())
    assert stream.sent <= 1_000_000 + 65536


def test_bound_body_cap_passes_a_body_within_the_limit() -> None:
    response = _response(b"0123456789")
    bound_body(response, limit=10, drop=False)
    assert run(read_capped(response, 10, "manifest")) == b"0123456789"


class _SyncEndless(httpx.SyncByteStream):
    def __init__(self) -> None:
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        while True:
            self.sent += 65536
            yield b"x" * 65536


def test_read_capped_sync_refuses_an_endless_body_early() -> None:
    stream = _SyncEndless()
    response = httpx.Response(200, stream=stream)
    with pytest.raises(CredentialsError, match="pod is larger than 1000000 bytes"):
        read_capped_sync(response, 1_000_000, "pod", error=CredentialsError)
    assert stream.sent <= 1_000_000 + 65536


def test_read_capped_sync_returns_a_body_within_the_cap() -> None:
    response = httpx.Response(200, stream=httpx.ByteStream(b'{"kind": "Pod"}'))
    assert read_capped_sync(response, 100, "pod") == b'{"kind": "Pod"}'


def test_readers_take_a_body_read_before_they_see_it() -> None:
    """A mock transport (respx) reads every body first: the content is capped instead."""
    response = httpx.Response(200, content=b"x" * 100)
    response.read()
    assert run(read_prefix(response, 10)) == b"x" * 10
    assert run(read_capped(response, 100, "manifest")) == b"x" * 100
    with pytest.raises(ProtocolError, match="larger than 99 bytes"):
        run(read_capped(response, 99, "manifest"))


def test_redact_removes_every_form_of_the_sent_credentials() -> None:
    import base64  # noqa: PLC0415

    basic = "Basic " + base64.b64encode(b"fuzz:S3cr3t-pw").decode()
    secrets = authorization_secrets(basic)
    echoed = f"X: {basic} fuzz:S3cr3t-pw and S3cr3t-pw"
    assert redact(echoed, secrets) == "X: Basic [redacted] [redacted] and [redacted]"
    assert redact("Bearer tok-123456 bad", authorization_secrets("Bearer tok-123456")) == (
        "Bearer [redacted] bad"
    )
    assert redact("no credentials", authorization_secrets(None)) == "no credentials"
    # Too short to redact without blanking ordinary words.
    assert redact("a b c", ["a"]) == "a b c"
