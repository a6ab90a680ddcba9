"""Capped reads of untrusted bodies, and JSON that never raises past the parser.

Everything a registry, token service, credential helper, Kubernetes API server or admission
client sends is hostile until bounded:

* **Bodies** are streamed, never read whole: :func:`read_capped` refuses a body over its
  limit (a manifest, a token answer), :func:`read_prefix` keeps only the start of one whose
  content does not matter beyond a reason (an error page, a ping answer) and stops reading.
  :func:`read_capped_sync` is :func:`read_capped` for a synchronous client. Bodies httpx
  reads by itself (a redirect, a 401 the auth flow answers with a token) are made harmless
  first, by :func:`bound_body` in a response hook.
* **JSON** goes through :func:`parse_json`: 60,000-deep nesting (``RecursionError``), a
  5,000-digit number (``ValueError`` from CPython's integer-string limit), invalid UTF-8,
  ``NaN``/``Infinity`` (not JSON, though Python's parser takes them) and bad syntax all
  become one typed error naming what was parsed, never a traceback.
  :func:`parse_json_object` also requires an object, the shape every protocol document has.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Any, NoReturn

import httpx

from imagecheck._text import printable
from imagecheck.errors import ImagecheckError, ProtocolError

# Enough of an error body or a ping answer to read a reason from; the rest is not worth holding.
MAX_ERROR_BODY = 16 * 1024
# Distribution refuses manifests over 4 MiB; nothing larger is a manifest (or an image config).
MAX_MANIFEST_SIZE = 4 * 1024 * 1024
# A token answer is a small JSON object; anything larger is not one.
MAX_TOKEN_RESPONSE = 64 * 1024
# A credential helper's answer is a small JSON object too; anything larger is not one.
MAX_HELPER_OUTPUT = 64 * 1024


async def read_capped(
    response: httpx.Response,
    limit: int,
    what: str,
    *,
    error: type[ImagecheckError] = ProtocolError,
) -> bytes:
    """The whole body, refusing to hold more than ``limit`` bytes of it.

    A ``Content-Length`` over the limit is refused before a byte is read; a body that runs
    past it (chunked, or lying about its length) is refused as soon as it does.
    """
    body = _Capped(response, limit, what, error)
    if body.done:
        return body.content
    async for chunk in response.aiter_raw():
        body.add(chunk)
    return body.decoded()


def read_capped_sync(
    response: httpx.Response,
    limit: int,
    what: str,
    *,
    error: type[ImagecheckError] = ProtocolError,
) -> bytes:
    """:func:`read_capped` for a response of a synchronous ``httpx.Client``."""
    body = _Capped(response, limit, what, error)
    if body.done:
        return body.content
    for chunk in response.iter_raw():
        body.add(chunk)
    return body.decoded()


class _Capped:
    """One body being read under a cap: the part :func:`read_capped` and
    :func:`read_capped_sync` share (only how they iterate differs)."""

    def __init__(
        self, response: httpx.Response, limit: int, what: str, error: type[ImagecheckError]
    ) -> None:
        _check_length(response, limit, what, error)
        self.response, self.limit, self.what, self.error = response, limit, what, error
        self.chunks: list[bytes] = []
        self.size = 0
        # Read before it got here (a mock transport reads every body first): only content.
        self.done = response.is_stream_consumed
        self.content = _capped_content(response, limit, what, error) if self.done else b""

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            _too_large(self.limit, self.what, self.error)
        self.chunks.append(chunk)

    def decoded(self) -> bytes:
        return _decoded(self.response, b"".join(self.chunks), self.limit, self.what, self.error)


def _check_length(
    response: httpx.Response, limit: int, what: str, error: type[ImagecheckError]
) -> None:
    length = response.headers.get("Content-Length", "").strip()
    if length.isdigit() and int(length) > limit:
        _too_large(limit, what, error)


def _capped_content(
    response: httpx.Response, limit: int, what: str, error: type[ImagecheckError]
) -> bytes:
    """The body of a response that was read before it got here: a mock transport (respx)
    reads every body first. No stream is left, only the content, already decoded."""
    if len(response.content) > limit:
        _too_large(limit, what, error)
    return response.content


def _too_large(limit: int, what: str, error: type[ImagecheckError]) -> NoReturn:
    raise error(f"{what} is larger than {limit} bytes")


async def read_prefix(response: httpx.Response, limit: int = MAX_ERROR_BODY) -> bytes:
    """At most the first ``limit`` bytes of the body; the rest is never read.

    The caller closes the response; a body left unread closes its connection rather than
    returning it to the pool, which is the right price for a body nobody wants.
    """
    if response.is_stream_consumed:
        return response.content[:limit]  # read before it got here (see _capped_content)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    raw = b"".join(chunks)[:limit]
    try:
        return _decoded(response, raw, limit, "body", ProtocolError)[:limit]
    except ProtocolError:
        return b""  # a compressed prefix that does not decode alone: no reason to show


def bound_body(response: httpx.Response, *, limit: int, drop: bool) -> None:
    """Bound every later read of ``response``'s body, whoever reads it.

    httpx reads some bodies whole by itself, before the caller sees the response: a redirect
    (``follow_redirects``) and a response an auth flow answers with a new request (a 401 met
    with a token). Called from a response hook, this bounds those reads too:

    * ``drop``: at most ``limit`` raw bytes are read (so a short body still leaves its
      connection reusable) and none is kept or decoded. For bodies nobody uses.
    * otherwise: reading past ``limit`` raw bytes raises :class:`ProtocolError`. A backstop
      under the callers' own, smaller caps.
    """
    if not isinstance(response.stream, httpx.AsyncByteStream):
        raise TypeError("bound_body works with httpx.AsyncClient responses")
    response.stream = _BoundedStream(response.stream, limit, drop=drop)


class _BoundedStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, limit: int, *, drop: bool) -> None:
        self._stream = stream
        self._limit = limit
        self._drop = drop

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._stream:
            size += len(chunk)
            for kept in self._bounded(chunk, size):
                yield kept
            if self._drop and size >= self._limit:
                return

    def _bounded(self, chunk: bytes, size: int) -> Iterable[bytes]:
        if self._drop:
            return ()
        if size > self._limit:
            _too_large(self._limit, "response body", ProtocolError)
        return (chunk,)

    async def aclose(self) -> None:
        await self._stream.aclose()


def _decoded(
    response: httpx.Response, raw: bytes, limit: int, what: str, error: type[ImagecheckError]
) -> bytes:
    """``raw`` with the response's ``Content-Encoding`` undone, still within ``limit``.

    Registries rarely compress, but a gzip bomb must not get past the cap: the decoder is fed
    the raw bytes and its output is capped too.
    """
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if not raw or encoding in ("", "identity"):
        return raw
    decoder = _decoder(encoding)
    if decoder is None:
        raise error(f"{what} has an unsupported Content-Encoding {printable(encoding)!r}")
    try:
        out: bytes = decoder.decompress(raw, limit + 1)
    except zlib.error:
        raise error(f"{what} could not be decoded ({printable(encoding)})") from None
    if len(out) > limit:
        raise error(f"{what} is larger than {limit} bytes")
    return out


def _decoder(encoding: str) -> Any:
    """A capped decoder for the encodings a server may use unasked (we ask for identity)."""
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    return None


def parse_json(
    data: bytes | str,
    what: str,
    *,
    error: type[ImagecheckError] = ProtocolError,
) -> Any:
    """``data`` as JSON, or ``error`` saying ``what`` is not valid JSON. Never raises anything
    else: not RecursionError (deep nesting), not ValueError (huge integers), not
    UnicodeDecodeError."""
    try:
        return json.loads(data, parse_constant=_not_json)
    except RecursionError:
        raise error(f"{what} is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON (line {exc.lineno} column {exc.colno})") from None
    except (ValueError, UnicodeDecodeError, TypeError):
        # ValueError: "Exceeds the limit (4300 digits) for integer string conversion".
        raise error(f"{what} is not valid JSON") from None


def _not_json(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def parse_json_object(
    data: bytes | str,
    what: str,
    *,
    error: type[ImagecheckError] = ProtocolError,
) -> dict[str, Any]:
    """Like :func:`parse_json`, and the document must be a JSON object."""
    value = parse_json(data, what, error=error)
    if not isinstance(value, dict):
        raise error(f"{what} is not a JSON object")
    return value
