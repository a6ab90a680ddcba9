"""Answering by forwarding: the upstream connection, and the actions that relay upstream's
answer or stand in for it (:class:`Respond`, :class:`Flood`)."""

from __future__ import annotations

import email.utils
import http.client
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from tests.support.hostile._actions import Reply
from tests.support.hostile._bodies import NO_END, Endless
from tests.support.hostile._wire import Request

# RFC 9110 7.6.1: connection-scoped headers a proxy must not relay.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

HTML_502_PAGE = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n"
    b"</body>\r\n</html>\r\n"
)


def oci_errors(code: str, message: str) -> bytes:
    """An OCI distribution-spec error body: ``{"errors": [{"code", "message", "detail"}]}``."""
    return json.dumps({"errors": [{"code": code, "message": message, "detail": None}]}).encode()


def http_date(seconds_from_now: float) -> str:
    """An IMF-fixdate (RFC 9110 5.6.7), e.g. for ``Retry-After``."""
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


@dataclass(frozen=True)
class Forward:
    """Relay the upstream answer unchanged (what happens when no rule matches)."""


@dataclass(frozen=True)
class Respond:
    """Answer ``status`` without asking upstream. ``Content-Length`` is added unless given;
    a HEAD answer carries it but not the body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    @classmethod
    def oci(cls, status: int, code: str, message: str, **headers: str) -> Respond:
        headers.setdefault("Content-Type", "application/json; charset=utf-8")
        return cls(status, headers, oci_errors(code, message))

    def reply(self) -> Reply:
        return Reply(self.status, tuple(self.headers.items()), self.body, framing="auto")


@dataclass(frozen=True)
class Flood:
    """Answer ``status`` with ``headers`` and a body of ``size`` bytes of ``fill`` (``None``:
    endless, sent chunked), made 64 KiB at a time and never held whole: the body a hostile
    or broken server sends. Ends when the body does, the client hangs up or the proxy
    closes. ``Content-Length`` says ``size`` unless ``headers`` says otherwise."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    size: int | None = None
    fill: bytes = b"x"

    def reply(self) -> Reply:
        headers = tuple(self.headers.items())
        if self.size is None:
            return Reply(self.status, headers, Endless(NO_END, self.fill), framing="chunked")
        return Reply(self.status, headers, Endless(self.size, self.fill), framing="auto")


@dataclass(frozen=True)
class StripHeaders:
    """Relay the upstream answer without the named headers (case-insensitive)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class SetHeaders:
    """Relay the upstream answer with ``headers`` set (replacing upstream's of those names)."""

    headers: Mapping[str, str]


@dataclass(frozen=True)
class Rewrite:
    """Relay the upstream answer with its body replaced by ``body(upstream body)`` (and its
    ``Content-Length`` fixed): a real answer with one part made hostile."""

    body: Callable[[bytes], bytes]


@dataclass(frozen=True)
class Replace:
    """Relay the upstream answer, unless its status is a key of ``statuses``: then answer that
    :class:`Respond` instead (a registry that words an answer its own way, e.g. 403 where
    Distribution says 404)."""

    statuses: Mapping[int, Respond]


Relayed = Forward | StripHeaders | SetHeaders | Rewrite | Replace


def altered(action: Relayed, answer: Reply) -> Reply:
    """The upstream ``answer`` as ``action`` changes it."""
    match action:
        case StripHeaders(names=names):
            drop = {name.lower() for name in names}
            return replace(
                answer, headers=tuple((k, v) for k, v in answer.headers if k.lower() not in drop)
            )
        case SetHeaders(headers=headers):
            drop = {name.lower() for name in headers}
            kept = tuple((k, v) for k, v in answer.headers if k.lower() not in drop)
            return replace(answer, headers=kept + tuple(headers.items()))
        case Rewrite(body=rewrite):
            kept = tuple((k, v) for k, v in answer.headers if k.lower() != "content-length")
            assert isinstance(answer.body, bytes)
            return replace(answer, headers=kept, body=rewrite(answer.body))
        case Replace(statuses=statuses) if answer.status in statuses:
            return statuses[answer.status].reply()
    return answer


class Upstream:
    """One keep-alive connection to the upstream server per client connection."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self._address = (host, port)
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def relay(self, request: Request) -> Reply:
        """Upstream's answer to ``request``, or a 502 saying why there is none."""
        try:
            return self._ask(request)
        except (http.client.HTTPException, OSError) as exc:
            body = f"faultproxy: upstream failed: {exc}\n".encode()
            return Reply(502, (("Content-Type", "text/plain"),), body, framing="auto")

    def _ask(self, request: Request) -> Reply:
        # A header sent on several lines (skopeo sends one Accept line per media type) is
        # relayed as one comma-joined line (RFC 9110 5.3), not cut down to its last value.
        headers: dict[str, str] = {}
        for name in request.headers:
            if name.lower() not in _HOP_BY_HOP and name not in headers:
                headers[name] = ", ".join(request.headers.get_all(name) or [])
        for attempt in (1, 2):  # a kept-alive connection upstream closed: one fresh try
            if self._conn is None:
                self._conn = http.client.HTTPConnection(*self._address, timeout=self._timeout)
            try:
                self._conn.request(request.method, request.target, request.body or None, headers)
                response = self._conn.getresponse()
                body = response.read()
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt == 2 or request.method not in ("GET", "HEAD"):
                    raise
                continue
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            if request.method != "HEAD":  # re-framed: the body was read whole
                kept = [(k, v) for k, v in kept if k.lower() != "content-length"]
            return Reply(response.status, tuple(kept), body, framing="auto")
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
