"""What a hostile server may do with a request, whichever way it answers: reply (framed
honestly or not), hang, trickle, reset."""

from __future__ import annotations

import http
from dataclasses import dataclass
from typing import Literal

from tests.support.hostile._bodies import Body

# ``auto``: a true Content-Length unless the headers give one (a relayed HEAD answer keeps
# upstream's); the others as :class:`Reply` says.
Framing = Literal["auto", "length", "chunked", "close", "short", "long", "none"]

TLS_REJECTION = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"


def reason(status: int) -> str:
    """The reason phrase of ``status`` (RFC 9110 15), or one for a status no RFC names."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


@dataclass(frozen=True)
class Reply:
    """An answer. ``framing``: ``length`` (a true Content-Length), ``chunked``, ``close``
    (no length: the body runs until the connection closes), ``short``/``long`` (a
    Content-Length that lies by ``lie`` bytes), ``none`` (no framing header, kept alive),
    ``auto`` (``length``, unless the headers already give one)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: Body = b""
    framing: Framing = "length"
    lie: int = 1
    reason: str | None = None

    def __repr__(self) -> str:
        parts = [str(self.status)]
        if self.headers:
            parts.append(f"headers={self.headers!r}")
        if self.body != b"":
            parts.append(f"body={_short(self.body)}")
        if self.framing != "length":
            parts.append(f"framing={self.framing!r}")
        if self.reason is not None:
            parts.append(f"reason={self.reason!r}")
        return f"Reply({', '.join(parts)})"


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer: until the server closes, or ``seconds`` (then the
    connection is closed without an answer). A server with an answer bound caps it."""

    seconds: float | None = None


@dataclass(frozen=True)
class Trickle:
    """Send ``reply`` (``None``: the upstream answer, when there is one) ``chunk`` bytes every
    ``interval`` seconds, status line and headers included."""

    reply: Reply | None = None
    interval: float = 0.2
    chunk: int = 1


@dataclass(frozen=True)
class Reset:
    """Send ``partial`` (the start of an answer, may be empty), then drop the connection:
    with RST (``SO_LINGER`` 0) when ``rst``, else with an orderly FIN."""

    partial: bytes = b"HTTP/1.1 200 OK\r\nContent-Ty"
    rst: bool = True


def _short(body: Body) -> str:
    if isinstance(body, bytes):
        return repr(body) if len(body) <= 120 else f"{body[:100]!r}...({len(body)} bytes)"
    return repr(body)
