"""A fault-injecting HTTP/1.1 reverse proxy to put in front of the real registry.

It forwards every request to an upstream base URL and relays the answer, unless a *rule*
matches (method and path regex, ``times`` or forever; first match wins)::

    with FaultProxy(registry_plain.url) as proxy:
        proxy.on("HEAD", MANIFESTS, Respond(503), times=2)
        run_cli(["check", proxy.ref("sample/app:1.0.0")], home)
        assert proxy.count(path=MANIFESTS) == 3

Actions: :class:`Forward`, :class:`Respond` (any status, headers and body),
:class:`Hang` (read the request, never answer), :class:`Trickle` (send the answer a few bytes
at a time), :class:`Reset` (send part of an answer, then RST or FIN), :class:`StripHeaders`
(forward, minus some upstream headers), :class:`SetHeaders` (forward, with some headers set),
:class:`Rewrite` (forward, with the body rewritten), :class:`Replace` (forward, but answer
otherwise when upstream answers some statuses), :class:`Flood` (a huge or endless body,
made on the fly and never held), :class:`RandomFailures` (seeded; a share of the
requests get one of its failures, the rest are forwarded) and :class:`Handle` (a function of
the whole :class:`Request`, headers and body included, picks one of the above: how a test
plays a registry or token service that checks ``Authorization``, counts, or challenges).

Every request is journalled (:class:`Exchange`: method, path, monotonic time, action, status
sent), so tests assert on what the proxy *saw*. A TLS ClientHello is answered with a plain
400 and journalled as method ``"TLS"``, as Go's ``net/http`` does: imagecheck tries HTTPS
first on loopback hosts and must fall back to HTTP at once, not wait for a read timeout.

Bounded: at most ``max_connections`` client connections are served at once (the accept loop
waits for a free slot), and :meth:`FaultProxy.close` wakes every hang and trickle, shuts
every client socket and joins every thread (each with a timeout). The raw socket server is
hand-written rather than ``http.server`` because resets and partial status lines need the
socket itself.
"""

from __future__ import annotations

import contextlib
import email.utils
import http
import http.client
import io
import json
import random
import re
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

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
_TLS_HANDSHAKE = 0x16  # first byte of a TLS record carrying a ClientHello
_MAX_LINE = 65536
_MAX_REQUEST_BODY = 16 * 1024 * 1024
_FLOOD_PIECE = 64 * 1024

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


# -- actions ---------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer: until the proxy closes, or ``seconds`` (then the
    connection is closed without an answer)."""

    seconds: float | None = None


@dataclass(frozen=True)
class Trickle:
    """Send the answer (upstream's, or ``response``) ``chunk`` bytes every ``interval`` s,
    status line and headers included."""

    interval: float = 0.2
    chunk: int = 1
    response: Respond | None = None


@dataclass(frozen=True)
class Reset:
    """Send ``partial`` (the start of an answer, may be empty), then drop the connection:
    with RST (``SO_LINGER`` 0) when ``rst``, else with an orderly FIN."""

    partial: bytes = b"HTTP/1.1 200 OK\r\nContent-Ty"
    rst: bool = True


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


class RandomFailures:
    """Answer about ``probability`` of the requests with one of ``failures`` and forward the
    rest.

    Each decision comes from a ``random.Random`` seeded with ``(seed, method, path, n)``,
    ``n`` counting the earlier matching requests for that method and path. So a given
    request's fate does not depend on how concurrent requests for *other* images interleave:
    the same seed fails the same attempts of the same image, run after run.
    """

    def __init__(
        self,
        probability: float,
        seed: int,
        failures: tuple[Respond | Reset, ...] = (Respond(503), Reset()),
    ) -> None:
        if not 0.0 <= probability <= 1.0 or not failures:
            raise ValueError("probability must be in [0, 1] and failures non-empty")
        self.probability = probability
        self.seed = seed
        self.failures = failures
        self._seen: Counter[tuple[str, str]] = Counter()

    def pick(self, method: str, path: str) -> Forward | Respond | Reset:
        """Called by the proxy under its lock."""
        n = self._seen[method, path]
        self._seen[method, path] += 1
        rng = random.Random(f"{self.seed}|{method}|{path}|{n}")
        if rng.random() < self.probability:
            return rng.choice(self.failures)
        return Forward()

    def __repr__(self) -> str:
        return f"RandomFailures(p={self.probability}, seed={self.seed})"


Concrete = (
    Forward
    | Respond
    | Hang
    | Trickle
    | Reset
    | StripHeaders
    | SetHeaders
    | Rewrite
    | Replace
    | Flood
)


@dataclass(frozen=True)
class Request:
    """One request as the proxy read it (what a :class:`Handle` function is given)."""

    method: str
    target: str
    headers: http.client.HTTPMessage
    body: bytes
    keep_alive: bool

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(urlsplit(self.target).query, keep_blank_values=True)

    @property
    def form(self) -> dict[str, list[str]]:
        """The body as ``application/x-www-form-urlencoded`` fields (empty otherwise)."""
        if self.headers.get_content_type() != "application/x-www-form-urlencoded":
            return {}
        return urllib.parse.parse_qs(self.body.decode("latin-1"), keep_blank_values=True)

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


@dataclass(frozen=True)
class Handle:
    """Let ``decide(request)`` pick the action for this request, from everything in it.

    Called outside the proxy's lock, once per request, on that connection's thread: state it
    keeps across requests needs a lock of its own. A ``decide`` that raises is a test bug: the
    client gets a 500 and the exception lands in :attr:`FaultProxy.errors`."""

    decide: Callable[[Request], Concrete]


Action = Concrete | RandomFailures | Handle


@dataclass
class Rule:
    """``action`` for requests whose method is ``method`` (any when ``None``) and whose path
    (query excluded) matches the regex ``path`` (``re.search``), ``times`` times or forever."""

    action: Action
    method: str | None = None
    path: str = ""
    times: int | None = None
    hits: int = 0

    def applies(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        return re.search(self.path, path) is not None


@dataclass(frozen=True)
class Exchange:
    """One request as the proxy saw it, and what it did about it. ``status`` is the status
    sent to the client (``None`` when none was: hang, reset, client gone)."""

    method: str
    path: str
    at: float  # time.monotonic() when the request had been read
    action: str
    status: int | None = None


def _describe(action: Concrete) -> str:
    match action:
        case Forward():
            return "forward"
        case Respond(status=status):
            return f"respond {status}"
        case Hang():
            return "hang"
        case Trickle():
            return "trickle"
        case Reset(rst=rst):
            return "reset" if rst else "close"
        case StripHeaders(names=names):
            return "strip " + ",".join(names)
        case SetHeaders(headers=headers):
            return "set " + ",".join(headers)
        case Rewrite():
            return "rewrite"
        case Replace(statuses=statuses):
            return "replace " + ",".join(str(s) for s in statuses)
        case Flood(status=status, size=size):
            return f"flood {status} {'endless' if size is None else size}"


# -- the wire ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def encode(self, *, head: bool) -> bytes:
        reason = _reason(self.status)
        lines = [f"HTTP/1.1 {self.status} {reason}"]
        lines += [f"{name}: {value}" for name, value in self.headers]
        if not any(name.lower() == "content-length" for name, _ in self.headers):
            lines.append(f"Content-Length: {len(self.body)}")
        wire = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return wire if head else wire + self.body


def _altered(
    action: Forward | StripHeaders | SetHeaders | Rewrite | Replace, answer: _Answer
) -> _Answer:
    """The upstream ``answer`` as ``action`` changes it."""
    match action:
        case StripHeaders(names=names):
            drop = {name.lower() for name in names}
            return replace(
                answer, headers=[(k, v) for k, v in answer.headers if k.lower() not in drop]
            )
        case SetHeaders(headers=headers):
            drop = {name.lower() for name in headers}
            kept = [(k, v) for k, v in answer.headers if k.lower() not in drop]
            return replace(answer, headers=kept + list(headers.items()))
        case Rewrite(body=rewrite):
            kept = [(k, v) for k, v in answer.headers if k.lower() != "content-length"]
            return replace(answer, headers=kept, body=rewrite(answer.body))
        case Replace(statuses=statuses) if answer.status in statuses:
            instead = statuses[answer.status]
            return _Answer(instead.status, list(instead.headers.items()), instead.body)
    return answer


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _read_request(rfile: io.BufferedIOBase) -> Request | None:
    """The next request on a connection; ``None`` at end of stream or on garbage."""
    line = rfile.readline(_MAX_LINE + 1)
    if not line.strip():
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    method, target, version = parts
    try:
        headers = http.client.parse_headers(rfile)
    except http.client.HTTPException:
        return None
    if "Transfer-Encoding" in headers:
        return None  # chunked request bodies: not needed for a registry client, not parsed
    length = headers.get("Content-Length", "0")
    if not length.isdigit() or int(length) > _MAX_REQUEST_BODY:
        return None
    body = rfile.read(int(length)) if int(length) else b""
    connection = headers.get("Connection", "").lower()
    keep_alive = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
    return Request(method.upper(), target, headers, body, keep_alive)


class _Upstream:
    """One keep-alive connection to the upstream registry per client connection."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self._address = (host, port)
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def ask(self, request: Request) -> _Answer:
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
            return _Answer(response.status, kept, body)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _Connection(socketserver.StreamRequestHandler):
    """Serves one client connection: requests in a loop while it is kept alive."""

    server: _Server
    timeout = 60.0  # idle keep-alive connections; close() does not wait for this

    def handle(self) -> None:
        proxy = self.server.proxy
        if proxy.ssl_context is None and self._is_tls_hello():
            # As Go's net/http answers TLS on a plain port: the client fails fast, then
            # retries over HTTP.
            proxy._journal_add(Exchange("TLS", "", time.monotonic(), "reject-tls", 400))
            self.wfile.write(
                b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
            )
            return
        upstream = _Upstream(proxy.upstream_host, proxy.upstream_port, proxy.upstream_timeout)
        try:
            while not proxy.stopping.is_set():
                request = _read_request(self.rfile)
                if request is None:
                    return
                action = proxy._decide(request)
                index = proxy._journal_add(
                    Exchange(request.method, request.path, time.monotonic(), _describe(action))
                )
                status = self._perform(action, request, upstream)
                proxy._journal_status(index, status)
                if status is None or not request.keep_alive:
                    return
        finally:
            upstream.close()

    def _is_tls_hello(self) -> bool:
        try:
            first: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return False
        return first == bytes([_TLS_HANDSHAKE])

    def _perform(self, action: Concrete, request: Request, upstream: _Upstream) -> int | None:
        """Carry ``action`` out; the status sent, or ``None`` when the connection is done."""
        head = request.method == "HEAD"
        stopping = self.server.proxy.stopping
        match action:
            case Forward() | StripHeaders() | SetHeaders() | Rewrite() | Replace():
                answer = _altered(action, self._forward(request, upstream))
                self.wfile.write(answer.encode(head=head))
                return answer.status
            case Flood():
                return self._flood(action, head=head)
            case Respond():
                answer = _Answer(action.status, list(action.headers.items()), action.body)
                self.wfile.write(answer.encode(head=head))
                return action.status
            case Hang(seconds=seconds):
                stopping.wait(seconds)
                return None
            case Trickle():
                if action.response is None:
                    answer = self._forward(request, upstream)
                else:
                    r = action.response
                    answer = _Answer(r.status, list(r.headers.items()), r.body)
                wire = answer.encode(head=head)
                for start in range(0, len(wire), max(1, action.chunk)):
                    if stopping.wait(action.interval):
                        return None
                    self.wfile.write(wire[start : start + max(1, action.chunk)])
                return answer.status
            case Reset():
                self._drop(action)
                return None

    def _forward(self, request: Request, upstream: _Upstream) -> _Answer:
        try:
            return upstream.ask(request)
        except (http.client.HTTPException, OSError) as exc:
            body = f"faultproxy: upstream failed: {exc}\n".encode()
            return _Answer(502, [("Content-Type", "text/plain")], body)

    def _flood(self, action: Flood, *, head: bool) -> int | None:
        headers = list(action.headers.items())
        named = {name.lower() for name, _ in headers}
        chunked = action.size is None
        if chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        elif "content-length" not in named:
            headers.append(("Content-Length", str(action.size)))
        lines = [f"HTTP/1.1 {action.status} {_reason(action.status)}"]
        lines += [f"{name}: {value}" for name, value in headers]
        piece = (action.fill * (_FLOOD_PIECE // max(1, len(action.fill)) + 1))[:_FLOOD_PIECE]
        stopping = self.server.proxy.stopping
        try:
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            sent = 0
            while not head and (action.size is None or sent < action.size):
                if stopping.is_set():
                    return None
                data = piece if action.size is None else piece[: action.size - sent]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                sent += len(data)
            if chunked and not head:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            return None  # the client hung up: what a bounded reader does
        return action.status

    def _drop(self, action: Reset) -> None:
        if action.partial:
            self.wfile.write(action.partial)
        sock = self.connection
        if action.rst:
            # Linger on, timeout 0: close() discards unsent data and sends RST, not FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            sock.shutdown(socket.SHUT_RDWR)
        # rfile holds a reference on the socket; the fd closes (and RST goes out) only once
        # both are closed.
        self.rfile.close()
        sock.close()


class _Server(socketserver.TCPServer):
    """Accepts on 127.0.0.1:0; one thread per connection, at most ``slots`` at once."""

    allow_reuse_address = True

    def __init__(self, proxy: FaultProxy, max_connections: int) -> None:
        self.proxy = proxy
        self._slots = threading.BoundedSemaphore(max_connections)
        self._live: dict[threading.Thread, socket.socket] = {}
        self._live_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Connection)

    def process_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: object
    ) -> None:
        assert isinstance(request, socket.socket)
        while not self._slots.acquire(timeout=0.1):
            if self.proxy.stopping.is_set():
                self.shutdown_request(request)
                return
        thread = threading.Thread(
            target=self._serve, args=(request, client_address), name="faultproxy-conn"
        )
        thread.daemon = True
        with self._live_lock:
            self._live[thread] = request
        thread.start()

    def _serve(self, request: socket.socket, client_address: object) -> None:
        try:
            context = self.proxy.ssl_context
            if context is None:
                self.finish_request(request, client_address)
            else:
                request.settimeout(10.0)  # the handshake; _Connection sets its own after
                self.finish_request(context.wrap_socket(request, server_side=True), client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            with self._live_lock:
                del self._live[threading.current_thread()]
            self._slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return  # the client went away (or we reset it): expected here
        if exc is not None:
            with self._live_lock:
                self.proxy.errors.append(exc)

    def close_connections(self, timeout: float) -> list[threading.Thread]:
        """Shut every client socket (waking blocked reads) and join the threads; the
        threads still alive after ``timeout``."""
        with self._live_lock:
            live = dict(self._live)
        for sock in live.values():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        end = time.monotonic() + timeout
        for thread in live:
            thread.join(max(0.0, end - time.monotonic()))
        return [t for t in live if t.is_alive()]


# -- the proxy -------------------------------------------------------------------------------


class FaultProxy:
    """A reverse proxy on ``127.0.0.1:<random port>`` in front of ``upstream`` (a plain-HTTP
    base URL such as ``http://127.0.0.1:5000``). A context manager; see the module doc."""

    def __init__(
        self,
        upstream: str,
        *,
        max_connections: int = 64,
        upstream_timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://HOST:PORT, not {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port
        self.upstream_timeout = upstream_timeout
        # Serve HTTPS with this context (a registry behind a TLS-terminating proxy); the
        # upstream is still asked over plain HTTP.
        self.ssl_context = ssl_context
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []  # proxy bugs, not client hang-ups
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._journal: list[Exchange] = []
        self._server = _Server(self, max_connections)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._started = False
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``, the registry part of an image reference."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{'http' if self.ssl_context is None else 'https'}://{self.host}"

    def ref(self, name: str) -> str:
        """``ref("sample/app:1.0.0")`` -> ``127.0.0.1:PORT/sample/app:1.0.0``."""
        return f"{self.host}/{name}"

    def start(self) -> Self:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every hang and trickle, close every connection, join every
        thread. Idempotent. Raises when a thread outlives ``timeout`` (a proxy bug)."""
        if self._closed:
            return
        self._closed = True
        self.stopping.set()
        if self._started:
            self._server.shutdown()
            self._thread.join(timeout)
        stuck = self._server.close_connections(timeout)
        self._server.server_close()
        if stuck or self._thread.is_alive():
            raise RuntimeError(f"faultproxy: {len(stuck)} connection thread(s) did not stop")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- rules -----------------------------------------------------------------------------

    def on(
        self, method: str | None, path: str, action: Action, *, times: int | None = None
    ) -> Rule:
        """Add a rule (after the existing ones: the first that applies wins)."""
        re.compile(path)  # fail here, in the test, on a bad pattern
        rule = Rule(action, method, path, times)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """Drop every rule and the journal."""
        with self._lock:
            self._rules.clear()
            self._journal.clear()

    def _decide(self, request: Request) -> Concrete:
        method, path = request.method, request.path
        with self._lock:
            for rule in self._rules:
                if rule.applies(method, path):
                    rule.hits += 1
                    action = rule.action
                    if isinstance(action, RandomFailures):
                        return action.pick(method, path)
                    break
            else:
                return Forward()
        if not isinstance(action, Handle):
            return action
        try:
            return action.decide(request)  # outside the lock: it may take its time
        except Exception as exc:  # a test's handler failed: say so, answer 500
            with self._lock:
                self.errors.append(exc)
            return Respond(500, {"Content-Type": "text/plain"}, b"faultproxy: handler failed\n")

    # -- the journal ---------------------------------------------------------------------

    def _journal_add(self, exchange: Exchange) -> int:
        with self._lock:
            self._journal.append(exchange)
            return len(self._journal) - 1

    def _journal_status(self, index: int, status: int | None) -> None:
        with self._lock:
            if index < len(self._journal):  # clear() may have run meanwhile
                self._journal[index] = replace(self._journal[index], status=status)

    def exchanges(self, method: str | None = None, path: str | None = None) -> list[Exchange]:
        """The journal (a copy), in arrival order, filtered by exact method and path regex."""
        with self._lock:
            seen = list(self._journal)
        return [
            e
            for e in seen
            if (method is None or e.method == method.upper())
            and (path is None or re.search(path, e.path))
        ]

    def count(self, method: str | None = None, path: str | None = None) -> int:
        return len(self.exchanges(method, path))

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges())
