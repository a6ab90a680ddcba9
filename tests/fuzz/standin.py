"""A hostile registry stand-in: an HTTP/1.1 server on ``127.0.0.1`` whose every answer is
whatever the current hypothesis example says.

Each request is given a *role* from its path: ``ping`` (``/v2/``), ``token`` (``/token``),
``manifest`` (``/v2/<name>/manifests/...``), ``blob`` (``/v2/<name>/blobs/...``) or ``other``
(anything else, e.g. where a redirect pointed). A :class:`Script` maps each role to a list
of actions; the n-th request of a role gets the n-th action (the last one repeats), so a
retry can be answered differently from the first try. A role the script leaves out gets a
plain, well-behaved answer (:data:`DEFAULTS`).

Actions: :class:`Reply` (any status, headers and body, framed honestly or not),
:class:`Hang`, :class:`Trickle`, :class:`Drop` (part of an answer, then RST or FIN) and
:class:`Raw` (bytes that are not HTTP at all). Bodies may be bytes or generated lazily:
:class:`Endless` (tens of MiB), :class:`GzipBomb` (a small gzip stream that inflates to
256 MiB) and :class:`DeepJson` (hundreds of thousands of ``[``).

Markers in header values and bodies are filled in when a request is answered:
``@@SELF@@`` (this server, ``127.0.0.1:PORT``), ``@@ELSEWHERE@@`` (a second listener: another
origin, where credentials must never arrive), ``@@AUTH@@`` (the ``Authorization`` header this
request carried) and ``@@AUTHDECODED@@`` (a Basic header decoded: ``user:password``), so a
registry can echo back what it was sent.

A TLS ClientHello is answered with a plain 400, as Go's ``net/http`` does, so that the
client's HTTPS probe of a loopback registry falls back to HTTP at once. Every request is
journalled (:class:`Exchange`). Bounded: at most ``max_connections`` connections are served
at once; :meth:`StandIn.close` ends every hang, trickle and stream and joins every thread.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import http
import itertools
import json
import re
import socket
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from types import TracebackType
from typing import Literal, Self

Role = Literal["ping", "token", "manifest", "blob", "other", "elsewhere"]
ROLES: tuple[Role, ...] = ("ping", "token", "manifest", "blob", "other")
Framing = Literal["length", "chunked", "close", "short", "long", "none"]

SELF = "@@SELF@@"
ELSEWHERE = "@@ELSEWHERE@@"
AUTH = "@@AUTH@@"
AUTH_DECODED = "@@AUTHDECODED@@"

_TLS_HANDSHAKE = 0x16
_MAX_LINE = 64 * 1024
_MAX_HEADERS = 256 * 1024
_MAX_REQUEST_BODY = 1024 * 1024
_CHUNK = 64 * 1024
# How long any one answer may take, whatever the script says: the properties' bounds are a
# few seconds, and a stand-in thread must never outlive its example by much.
MAX_ANSWER_SECONDS = 6.0


# -- bodies ----------------------------------------------------------------------------------


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
    match body:
        case bytes():
            if body:
                yield body
        case Endless(size=size, pattern=pattern):
            block = (pattern or b"A") * (_CHUNK // max(1, len(pattern)) + 1)
            block = block[:_CHUNK]
            sent = 0
            while sent < size:
                piece = block[: min(_CHUNK, size - sent)]
                sent += len(piece)
                yield piece
        case GzipBomb(inflated=inflated):
            data = gzip_bomb(inflated)
            for start in range(0, len(data), _CHUNK):
                yield data[start : start + _CHUNK]
        case DeepJson(depth=depth, prefix=prefix, opener=opener):
            if prefix:
                yield prefix
            per_chunk = max(1, _CHUNK // max(1, len(opener)))
            left = depth
            while left > 0:
                n = min(left, per_chunk)
                left -= n
                yield opener * n


# -- actions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """An answer. ``framing``: ``length`` (a true Content-Length), ``chunked``, ``close``
    (no length: the body runs until the connection closes), ``short``/``long`` (a
    Content-Length that lies by ``lie`` bytes), ``none`` (no framing header, kept alive)."""

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
    """Read the request, answer nothing for ``seconds``, then close."""

    seconds: float


@dataclass(frozen=True)
class Trickle:
    """``reply``, ``chunk`` bytes every ``interval`` seconds (headers included)."""

    reply: Reply
    interval: float = 0.1
    chunk: int = 1


@dataclass(frozen=True)
class Drop:
    """Send ``partial``, then close: with RST when ``rst``, else FIN."""

    partial: bytes = b""
    rst: bool = True


@dataclass(frozen=True)
class Raw:
    """Send ``data`` (not HTTP) and close."""

    data: bytes


Action = Reply | Hang | Trickle | Drop | Raw


def _short(body: Body) -> str:
    if isinstance(body, bytes):
        return repr(body) if len(body) <= 120 else f"{body[:100]!r}...({len(body)} bytes)"
    return repr(body)


MANIFEST_BODY = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": "sha256:" + "a" * 64,
            "size": 2,
        },
        "layers": [],
    }
).encode()

DEFAULTS: Mapping[Role, Action] = {
    "ping": Reply(200, (("Content-Type", "application/json"),), b"{}"),
    "token": Reply(200, (("Content-Type", "application/json"),), b'{"token": "fuzz-token"}'),
    "manifest": Reply(
        200,
        (
            ("Content-Type", "application/vnd.oci.image.manifest.v1+json"),
            ("Docker-Content-Digest", "sha256:" + "0" * 64),
        ),
        MANIFEST_BODY,
    ),
    "blob": Reply(200, (("Content-Type", "application/octet-stream"),), b"{}"),
    "other": Reply(404, (("Content-Type", "text/plain"),), b"not here\n"),
    "elsewhere": Reply(404, (("Content-Type", "text/plain"),), b"elsewhere\n"),
}


@dataclass(frozen=True)
class Script:
    """What each role answers, in order; the last action of a role repeats."""

    actions: Mapping[Role, tuple[Action, ...]] = field(default_factory=dict)

    def pick(self, role: Role, n: int) -> Action:
        listed = self.actions.get(role, ())
        if not listed:
            return DEFAULTS[role]
        return listed[min(n, len(listed) - 1)]

    def __repr__(self) -> str:
        shown = ", ".join(f"{role}={list(acts)!r}" for role, acts in self.actions.items())
        return f"Script({shown})"


@dataclass(frozen=True)
class Exchange:
    """One request as the stand-in saw it, and the status it sent (None: no answer)."""

    listener: str  # "self" or "elsewhere"
    role: Role
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    status: int | None = None

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


# -- the wire --------------------------------------------------------------------------------


def role_of(path: str) -> Role:
    if path == "/v2/" or path == "/v2":
        return "ping"
    if path.startswith("/token"):
        return "token"
    if path.startswith("/v2/") and "/manifests/" in path:
        return "manifest"
    if path.startswith("/v2/") and "/blobs/" in path:
        return "blob"
    return "other"


@dataclass(frozen=True)
class _Request:
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    keep_alive: bool

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return ""


class _Reader:
    """Reads requests off a socket, bounded."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        data = self.sock.recv(_CHUNK)
        if not data:
            return False
        self.buffer += data
        return True

    def request(self) -> _Request | None:
        while b"\r\n\r\n" not in self.buffer:
            if len(self.buffer) > _MAX_HEADERS or not self._fill():
                return None
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return None
        headers = tuple(
            (name.strip(), value.strip())
            for name, sep, value in (line.partition(":") for line in lines[1:])
            if sep
        )
        request = _Request(parts[0].upper(), parts[1], headers, keep_alive=True)
        if request.header("transfer-encoding"):
            return None  # chunked request bodies: no registry client sends them
        length = request.header("content-length") or "0"
        if not length.isdigit() or int(length) > _MAX_REQUEST_BODY:
            return None
        while len(self.buffer) < int(length):
            if not self._fill():
                return None
        self.buffer = self.buffer[int(length) :]
        closing = request.header("connection").lower() == "close"
        return _Request(request.method, request.target, headers, keep_alive=not closing)


_BIG = re.compile(rb"@@BIG(\d+)\*(.)@@")


def big(n: int, char: str = "x") -> str:
    """A marker the stand-in expands to ``char`` repeated ``n`` times (keeps the reprs of
    examples short)."""
    return f"@@BIG{n}*{char}@@"


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Whatever"


def _decoded_basic(authorization: str) -> str:
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(value.strip(), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


class _Connection:
    def __init__(self, standin: StandIn, sock: socket.socket, listener: str) -> None:
        self.standin = standin
        self.sock = sock
        self.listener = listener
        self.deadline = 0.0

    def serve(self) -> None:
        self.sock.settimeout(MAX_ANSWER_SECONDS)
        try:
            first = self.sock.recv(1, socket.MSG_PEEK)
        except OSError:
            return
        if first and first[0] == _TLS_HANDSHAKE:
            self.standin.count_tls()
            with contextlib.suppress(OSError):
                self.sock.sendall(
                    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS "
                    b"server.\n"
                )
            return
        reader = _Reader(self.sock)
        while not self.standin.stopping.is_set():
            try:
                request = reader.request()
            except OSError:
                return
            if request is None:
                return
            role: Role = "elsewhere" if self.listener == "elsewhere" else role_of(request.path)
            action, index = self.standin.decide(self.listener, role, request)
            self.deadline = time.monotonic() + MAX_ANSWER_SECONDS
            try:
                status, keep = self._perform(action, request)
            except OSError:
                return
            self.standin.answered(index, status)
            if not keep or not request.keep_alive:
                return

    # -- actions ----------------------------------------------------------------------------

    def _perform(self, action: Action, request: _Request) -> tuple[int | None, bool]:
        stopping = self.standin.stopping
        match action:
            case Reply():
                keep = self._reply(action, request, trickle=None)
                return action.status, keep
            case Trickle(reply=reply):
                self._reply(reply, request, trickle=action)
                return reply.status, False
            case Hang(seconds=seconds):
                stopping.wait(min(seconds, MAX_ANSWER_SECONDS))
                return None, False
            case Drop(partial=partial, rst=rst):
                if partial:
                    self.sock.sendall(partial)
                if rst:
                    self.sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                else:
                    self.sock.shutdown(socket.SHUT_RDWR)
                return None, False
            case Raw(data=data):
                self.sock.sendall(self._fill(data, request))
                return None, False

    def _fill(self, data: bytes, request: _Request) -> bytes:
        if b"@@" not in data:
            return data
        authorization = request.header("authorization")
        data = _BIG.sub(lambda m: m.group(2) * int(m.group(1)), data)
        return (
            data.replace(SELF.encode(), self.standin.host.encode())
            .replace(ELSEWHERE.encode(), self.standin.elsewhere_host.encode())
            .replace(AUTH_DECODED.encode(), _decoded_basic(authorization).encode())
            .replace(AUTH.encode(), authorization.encode("utf-8", "replace"))
        )

    def _reply(self, reply: Reply, request: _Request, trickle: Trickle | None) -> bool:
        """Send ``reply``; whether the connection may be kept alive after it."""
        body = reply.body
        headers = list(reply.headers)
        names = {name.lower() for name, _ in headers}
        if isinstance(body, GzipBomb) and "content-encoding" not in names:
            headers.append(("Content-Encoding", "gzip"))
        if isinstance(body, bytes):
            body = self._fill(body, request)
        size = body_size(body)
        framing = reply.framing
        keep = True
        match framing:
            case "length":
                headers.append(("Content-Length", str(size)))
            case "short":
                headers.append(("Content-Length", str(max(0, size - reply.lie))))
            case "long":
                headers.append(("Content-Length", str(size + reply.lie)))
                keep = False
            case "chunked":
                headers.append(("Transfer-Encoding", "chunked"))
            case "close":
                headers.append(("Connection", "close"))
                keep = False
            case "none":
                pass
        reason = reply.reason if reply.reason is not None else _reason(reply.status)
        head = f"HTTP/1.1 {reply.status} {reason}\r\n".encode("utf-8", "replace")
        for name, value in headers:
            head += self._fill(f"{name}: {value}\r\n".encode("utf-8", "replace"), request)
        head += b"\r\n"
        send_body = request.method != "HEAD"
        chunks: Iterator[bytes] = body_chunks(body) if send_body else iter(())
        if framing == "chunked" and send_body:
            chunks = itertools.chain(
                (b"%x\r\n%s\r\n" % (len(c), c) for c in body_chunks(body)), (b"0\r\n\r\n",)
            )
        self._send(itertools.chain((head,), chunks), trickle)
        return keep and trickle is None

    def _send(self, pieces: Iterator[bytes], trickle: Trickle | None) -> None:
        stopping = self.standin.stopping
        for piece in pieces:
            if trickle is None:
                if stopping.is_set() or time.monotonic() > self.deadline:
                    raise OSError("stand-in: answer cut short")
                self.sock.sendall(piece)
                continue
            step = max(1, trickle.chunk)
            for start in range(0, len(piece), step):
                if stopping.wait(trickle.interval) or time.monotonic() > self.deadline:
                    raise OSError("stand-in: trickle cut short")
                self.sock.sendall(piece[start : start + step])


# -- the server ------------------------------------------------------------------------------


class StandIn:
    """The hostile registry on ``127.0.0.1:<port>`` (and a second listener, ``elsewhere``).

    ``configure(script)`` before each example; ``exchanges()`` after it.
    """

    def __init__(self, *, max_connections: int = 128) -> None:
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._script = Script()
        self._counts: Counter[Role] = Counter()
        self._journal: list[Exchange] = []
        self._tls_hellos = 0
        self._first_contact: float | None = None
        self._slots = threading.BoundedSemaphore(max_connections)
        self._live: dict[threading.Thread, socket.socket] = {}
        self._listeners = {
            "self": socket.create_server(("127.0.0.1", 0), backlog=128),
            "elsewhere": socket.create_server(("127.0.0.1", 0), backlog=128),
        }
        self._threads = [
            threading.Thread(target=self._accept, args=(name,), daemon=True, name=f"standin-{name}")
            for name in self._listeners
        ]
        self.errors: list[BaseException] = []

    @property
    def port(self) -> int:
        return int(self._listeners["self"].getsockname()[1])

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def elsewhere_host(self) -> str:
        return f"127.0.0.1:{self._listeners['elsewhere'].getsockname()[1]}"

    def ref(self, name: str) -> str:
        return f"{self.host}/{name}"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        for listener in self._listeners.values():
            listener.settimeout(0.1)
        for thread in self._threads:
            thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        for thread in self._threads:
            thread.join(timeout)
        for listener in self._listeners.values():
            listener.close()
        self.drop_connections(timeout)

    def drop_connections(self, timeout: float = 10.0) -> None:
        """Shut every open connection and join its thread (between examples)."""
        with self._lock:
            live = dict(self._live)
        for sock in live.values():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        end = time.monotonic() + timeout
        for thread in live:
            thread.join(max(0.0, end - time.monotonic()))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self, name: str) -> None:
        listener = self._listeners[name]
        while not self.stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                if self._first_contact is None:
                    self._first_contact = time.monotonic()
            while not self._slots.acquire(timeout=0.1):
                if self.stopping.is_set():
                    sock.close()
                    return
            thread = threading.Thread(target=self._serve, args=(sock, name), daemon=True)
            with self._lock:  # registered and started together: drop_connections joins it
                self._live[thread] = sock
                thread.start()

    def _serve(self, sock: socket.socket, name: str) -> None:
        try:
            _Connection(self, sock, name).serve()
        except OSError:
            pass
        except Exception as exc:  # a stand-in bug: surfaced by the fixture
            with self._lock:
                self.errors.append(exc)
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            with self._lock:
                del self._live[threading.current_thread()]
            self._slots.release()

    # -- scripting and the journal ---------------------------------------------------------

    def configure(self, script: Script) -> None:
        """A new example: drop connections the last one left, then the new script."""
        self.drop_connections()
        with self._lock:
            self._script = script
            self._counts.clear()
            self._journal.clear()
            self._tls_hellos = 0
            self._first_contact = None

    def decide(self, listener: str, role: Role, request: _Request) -> tuple[Action, int]:
        with self._lock:
            n = self._counts[role]
            self._counts[role] += 1
            action = self._script.pick(role, n)
            self._journal.append(
                Exchange(listener, role, request.method, request.target, request.headers)
            )
            return action, len(self._journal) - 1

    def answered(self, index: int, status: int | None) -> None:
        with self._lock:
            if index < len(self._journal):
                old = self._journal[index]
                self._journal[index] = Exchange(
                    old.listener, old.role, old.method, old.target, old.headers, status
                )

    def count_tls(self) -> None:
        with self._lock:
            self._tls_hellos += 1

    def first_contact(self) -> float | None:
        """When (``time.monotonic()``) this example's first connection came in: the client's
        start-up was over by then."""
        with self._lock:
            return self._first_contact

    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._journal)


def statuses_sent(exchanges: Sequence[Exchange]) -> set[int]:
    return {e.status for e in exchanges if e.status is not None}
