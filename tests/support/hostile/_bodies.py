"""Answer bodies made as they are sent, never held whole: what a hostile server streams."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

CHUNK = 64 * 1024
NO_END = 1 << 62  # an Endless size no client reads to the end of: sent chunked, never ends


@dataclass(frozen=True)
class Endless:
    """``size`` bytes of ``pattern`` repeated, generated as they are sent."""

    size: int
    pattern: bytes = b"A"


@dataclass(frozen=True)
class GzipBomb:
    """gzip of ``inflated`` zero bytes (about 1/1000 of that on the wire); the reply gets
    ``Content-Encoding: gzip`` unless its headers say otherwise."""

    inflated: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class DeepJson:
    """``prefix`` then ``depth`` opening brackets: JSON nested past any recursion limit."""

    depth: int
    prefix: bytes = b""
    opener: bytes = b"["


Body = bytes | Endless | GzipBomb | DeepJson


@cache
def gzip_bomb(inflated: int) -> bytes:
    """A gzip member inflating to ``inflated`` zero bytes, built in milliseconds: after a full
    flush the compressor starts afresh, so every 1 MiB block of zeros compresses to the same
    bytes, which are repeated rather than recomputed (compressing 256 MiB takes seconds)."""
    block = 1024 * 1024
    zeros = bytes(block)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    segment = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    count, rest = divmod(inflated, block)
    tail = compressor.compress(bytes(rest)) + compressor.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(zeros, crc)
    crc = zlib.crc32(bytes(rest), crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, inflated & 0xFFFFFFFF)
    return header + segment * count + tail + trailer


def body_size(body: Body) -> int:
    match body:
        case bytes():
            return len(body)
        case Endless(size=size):
            return size
        case GzipBomb(inflated=inflated):
            return len(gzip_bomb(inflated))
        case DeepJson(depth=depth, prefix=prefix, opener=opener):
            return len(prefix) + depth * len(opener)


def body_chunks(body: Body) -> Iterator[bytes]:
    """The body, at most :data:`CHUNK` bytes at a time."""
    match body:
        case bytes():
            if body:
                yield body
        case Endless(size=size, pattern=pattern):
            block = (pattern or b"A") * (CHUNK // max(1, len(pattern)) + 1)
            block = block[:CHUNK]
            sent = 0
            while sent < size:
                piece = block[: min(CHUNK, size - sent)]
                sent += len(piece)
                yield piece
        case GzipBomb(inflated=inflated):
            data = gzip_bomb(inflated)
            for start in range(0, len(data), CHUNK):
                yield data[start : start + CHUNK]
        case DeepJson(depth=depth, prefix=prefix, opener=opener):
            if prefix:
                yield prefix
            per_chunk = max(1, CHUNK // max(1, len(opener)))
            left = depth
            while left > 0:
                n = min(left, per_chunk)
                left -= n
                yield opener * n
