"""A hypothesis grammar of what a client may send the webhook on one connection: one to three
pipelined requests, well-formed by default and hostile by choice (method, target, version,
each header of a pool, body, line endings), cut into writes at drawn points.

Each choice lists the well-formed value first: hypothesis shrinks towards it, so a failing
example shrinks to the one odd part that matters.
"""

from __future__ import annotations

import gzip
import itertools
import zlib
from dataclasses import dataclass

from hypothesis import strategies as st

from tests.support.webhookpair import CACHED, MISSING, UNCACHED, review

METHODS = [b"POST", b"GET", b"PUT", b"CONNECT", b"post"]
TARGETS = [
    b"/validate",
    b"/",
    b"/validate?timeout=10s",
    b"/healthz",
    b"/%76alidate",
    b"http://host/validate",
    b"/nowhere",
]
VERSIONS = [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0"]
BODIES = [
    review(CACHED, uid="cached"),
    review(UNCACHED, uid="uncached"),
    review(CACHED, MISSING, uid="missing"),
    b"not json",
    gzip.compress(review(CACHED, uid="gzipped")),
    zlib.compress(review(CACHED, uid="deflated")),
    b"\x1f\x8b\x08\x00garbage",
    b"",
]
HOSTS = [[b"Host: t"], [], [b"Host: t", b"Host: u"]]
LENGTHS = ["right", "none", "short", "long", "twice", "text", "signed", "spaced"]
ENCODINGS = [None, b"gzip", b"deflate", b"br", b"identity", b"gzip, identity"]
CONNECTIONS = [None, b"keep-alive", b"close", b"Upgrade"]
UPGRADES = [None, b"h2c", b"websocket"]
ODD_LINES = [
    b"X-Fold: a\r\n  folded",  # obs-fold
    b"Content-Type : application/json",  # space before the colon
    b"X-Nul: a\x00b",
    b"Expect: 100-continue",
    b"User-Agent: a",
]


@dataclass(frozen=True)
class Conversation:
    requests: list[bytes]  # each request's bytes, as the client meant them
    pieces: list[bytes]  # the same bytes, joined and cut into the writes that carry them


def _length_lines(kind: str, size: int) -> list[bytes]:
    value = {
        "right": b"%d" % size,
        "short": b"%d" % max(size - 1, 0),
        "long": b"%d" % (size + 5),
        "text": b"ten",
        "signed": b"+%d" % size,
        "spaced": b"%d %d" % (size, size),
    }
    if kind == "none":
        return []
    if kind == "twice":
        return [b"Content-Length: %d" % size] * 2
    return [b"Content-Length: " + value[kind]]


@st.composite
def request(draw: st.DrawFn) -> bytes:
    body = draw(st.sampled_from(BODIES))
    start = [draw(st.sampled_from(pool)) for pool in (METHODS, TARGETS, VERSIONS)]
    lines = [b" ".join(start), *draw(st.sampled_from(HOSTS)), b"Content-Type: application/json"]
    if draw(st.booleans()):  # chunked: the length lines below then say what they say
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
        lines.append(b"Transfer-Encoding: chunked")
    lines += _length_lines(draw(st.sampled_from(LENGTHS)), len(body))
    for name, pool in ((b"Content-Encoding", ENCODINGS), (b"Connection", CONNECTIONS)):
        value = draw(st.sampled_from(pool))
        lines += [] if value is None else [name + b": " + value]
    upgrade = draw(st.sampled_from(UPGRADES))
    lines += [] if upgrade is None else [b"Upgrade: " + upgrade]
    lines += draw(st.lists(st.sampled_from(ODD_LINES), max_size=2))
    lines += [b"X-Filler-%d: v" % i for i in range(draw(st.sampled_from([0, 3, 127, 140])))]
    long_value = draw(st.sampled_from([0, 100, 8100, 9000]))
    lines += [b"X-Long: " + b"a" * long_value] if long_value else []
    head = b"".join(line + b"\r\n" for line in lines) + b"\r\n"
    if draw(st.integers(0, 9)) == 0:  # sometimes bare LF: all lines, or the first only
        head = head.replace(b"\r\n", b"\n", -1 if draw(st.booleans()) else 1)
    return head + body


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    requests = draw(st.lists(request(), min_size=1, max_size=3))
    stream = b"".join(requests)
    cuts = sorted(set(draw(st.lists(st.integers(1, len(stream) - 1), max_size=3))))
    bounds = [0, *cuts, len(stream)]
    return Conversation(requests, [stream[a:b] for a, b in itertools.pairwise(bounds)])
