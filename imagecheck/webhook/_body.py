"""A review's body, read and decoded within bounds, or the reason it gets no review answer.

aiohttp's own decompression is off (``fastpath.handler_options``): a body is read as sent, at
most ``limit`` bytes, and its ``Content-Encoding`` undone here, each coding's output held to
the same ``limit`` (a few KiB of gzip can inflate to gigabytes). ``gzip`` (``x-gzip``, several
members), ``deflate`` (the zlib format RFC 9110 names, or the raw deflate some clients send)
and ``identity`` are decoded, in the reverse of the order they were applied (RFC 9110 §8.4);
any other coding is a 415 naming the ones accepted (RFC 9110 §15.5.16), data that does not
decode a 400 that says so. The request framer never answers a body with a coding itself, so
every path gives these answers.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import hdrs, web

from imagecheck.webhook._limits import MAX_REVIEW_BYTES
from imagecheck.webhook._review import BadReview, load_json

# Codings applied one over another, and gzip members one after another, beyond which a body
# is refused rather than decoded (no client stacks them; each costs a decompressor).
MAX_CODINGS = 4
MAX_GZIP_MEMBERS = 64
ACCEPTED = "gzip, deflate"
# A body this small is read without a read slot (``ReadSlot``).
SMALL_BODY = 64 * 1024
_GZIP = 16 + zlib.MAX_WBITS
T = TypeVar("T")
_ZLIB = zlib.MAX_WBITS
_RAW_DEFLATE = -zlib.MAX_WBITS


class Unreadable(Exception):
    """A request that gets no review answer: 400 (not a review), 408 (too slow), 413 (too
    big), 415 (a content coding not accepted)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason

    @property
    def headers(self) -> dict[str, str]:
        """What the answer carries besides its body: the codings accepted, with a 415."""
        return {hdrs.ACCEPT_ENCODING: ACCEPTED} if self.status == 415 else {}


class ReadSlot:
    """One request's claim on the server's read slots, taken only when its body proves big.

    The slots bound what bodies in flight hold (each up to the body limit, and what parsing
    it makes). A slot held from a body's first byte was a slot held for as long as a client
    cared to trickle it: sixteen slow clients stopped every review for the read timeout. A
    body of at most ``SMALL_BODY`` bytes (nearly every review) needs no slot: what those hold
    is bounded by the connections' own cap. A bigger one takes a slot once that many bytes
    have come, whatever its ``Content-Length`` says, and one to decode before it is decoded;
    either holds it until :meth:`release` (after its parse)."""

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self._held = False

    async def take(self) -> None:
        if not self._held:
            await self._slots.acquire()
            self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots.release()


async def read_body(request: web.Request, limit: int, slot: ReadSlot) -> bytes:
    """The whole body, decoded, refusing more than ``limit`` bytes before or after decoding
    (aiohttp's ``request.read()`` would keep a copy on the request while the review runs)."""
    codings = content_codings(request.headers.getall(hdrs.CONTENT_ENCODING, []))
    if request.content_length is not None and request.content_length > limit:
        raise Unreadable(413, f"body is larger than {limit} bytes")
    body = bytearray()
    try:
        async for chunk in request.content.iter_any():
            body += chunk
            if len(body) > limit:
                raise Unreadable(413, f"body is larger than {limit} bytes")
            if len(body) > SMALL_BODY:
                await slot.take()
    except web.RequestPayloadError as exc:  # chunks that do not parse, a body cut short
        raise Unreadable(400, f"request body is malformed: {exc}") from None
    if codings:  # what it decodes to may be as big as any
        await slot.take()
    return decoded(bytes(body), codings, limit)


async def read_review_body(request: web.Request, slot: ReadSlot, budget: float) -> bytes:
    """:func:`read_body` of a review (at most ``MAX_REVIEW_BYTES``), within ``budget``
    seconds: a 408 after."""
    try:
        async with asyncio.timeout(budget):
            return await read_body(request, MAX_REVIEW_BYTES, slot)
    except TimeoutError:
        raise Unreadable(408, f"request body not received within {budget:.1f}s") from None


def parsed_review(
    body: bytes, parse: Callable[[Any], T], load: Callable[[bytes], Any] = load_json
) -> T:
    """``parse`` of the JSON in ``body``: a 400 when it is not JSON or ``parse`` finds no
    review (``BadReview``); ``RecursionError`` when it nests too deeply for ``load``."""
    try:
        data = load(body)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise Unreadable(400, "body is not JSON") from None
    try:
        return parse(data)
    except BadReview as exc:
        raise Unreadable(400, str(exc)) from None


def content_codings(values: list[str]) -> list[str]:
    """The codings ``Content-Encoding`` header lines name, in the order applied; a 415 for
    one not accepted."""
    codings = [c.strip().lower() for value in values for c in value.split(",") if c.strip()]
    unknown = [c for c in codings if c not in {"gzip", "x-gzip", "deflate", "identity"}]
    if unknown:
        shown = unknown[0].encode("ascii", "backslashreplace").decode()[:40]
        raise Unreadable(415, f"Content-Encoding {shown!r} is not accepted (use {ACCEPTED})")
    if len(codings) > MAX_CODINGS:
        raise Unreadable(415, f"more than {MAX_CODINGS} content codings")
    return codings


def decoded(body: bytes, codings: list[str], limit: int) -> bytes:
    """``body`` with ``codings`` undone, last applied first, each output at most ``limit``."""
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip"):
            body = _gunzip(body, limit)
        elif coding == "deflate":
            body = _inflate(body, _ZLIB if _zlib_header(body) else _RAW_DEFLATE, limit, coding)
    return body


def _gunzip(body: bytes, limit: int) -> bytes:
    out = bytearray()
    rest = body
    for _ in range(MAX_GZIP_MEMBERS):
        decompressor = zlib.decompressobj(_GZIP)
        out += _inflate_with(decompressor, rest, limit - len(out), limit, "gzip")
        rest = decompressor.unused_data
        if not rest:
            return bytes(out)
    raise Unreadable(400, f"body has more than {MAX_GZIP_MEMBERS} gzip members")


def _inflate(body: bytes, wbits: int, limit: int, coding: str) -> bytes:
    decompressor = zlib.decompressobj(wbits)
    out = _inflate_with(decompressor, body, limit, limit, coding)
    if decompressor.unused_data:
        raise Unreadable(400, f"body has data after its {coding} stream")
    return out


def _inflate_with(
    decompressor: zlib._Decompress, data: bytes, room: int, limit: int, coding: str
) -> bytes:
    try:
        out = decompressor.decompress(data, room + 1)
    except zlib.error:
        raise Unreadable(400, f"body is not valid {coding} data") from None
    if len(out) > room or decompressor.unconsumed_tail:
        raise Unreadable(413, f"body is larger than {limit} bytes once decoded")
    if not decompressor.eof:
        raise Unreadable(400, f"body is not complete {coding} data")
    return out


def _zlib_header(data: bytes) -> bool:
    """A zlib stream's first two bytes (RFC 1950 §2.2: deflate, and a check on both)."""
    return len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
