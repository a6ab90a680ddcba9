"""The base of the cloud stand-ins (STS, the ECR API, the GCE metadata server, Google STS,
Azure AD, ACR's exchange): a small threaded HTTP(S) server on 127.0.0.1 that answers each
request from the stand-in's :meth:`CloudStandIn.answer`, records what it received, and
can be told to misbehave for the next requests, as a real endpoint does on a bad day.

A stand-in subclass answers as its cloud's documentation says (cite it in the subclass's
docstring); this base only carries requests and faults:

* :attr:`CloudStandIn.requests`: every request as received (method, path, query, headers
  with lower-case names, body), so tests assert on what the server got;
* :meth:`CloudStandIn.fail_next`: the next ``times`` requests get a :class:`Fault` instead:
  a status with a body (403, a throttling 400, 500), a delay before answering (slow), a body
  of ``size`` bytes (oversized), or raw bytes (malformed);
* TLS when given a server context (the fixtures' CA signs it), plain HTTP otherwise (the
  metadata servers are plain HTTP).
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ssl import SSLContext
from types import TracebackType
from typing import Any, Self

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP
from imagecheck.errors import CloudAuthError

MAX_REQUEST_BODY = 1024 * 1024


@dataclass(frozen=True)
class Received:
    """One request as the stand-in saw it. Header names are lower-case."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    @property
    def form(self) -> dict[str, str]:
        """The body as a form (``application/x-www-form-urlencoded``), last value wins."""
        parsed = urllib.parse.parse_qs(self.body.decode("utf-8", "replace"), keep_blank_values=True)
        return {k: v[-1] for k, v in parsed.items()}

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None


@dataclass(frozen=True)
class Reply:
    """An answer: status, headers, body."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Fault:
    """How to misbehave for one request: ``reply`` instead of the real answer, after
    ``delay`` seconds; or ``size`` bytes of ``x`` as the body (oversized)."""

    reply: Reply | None = None
    delay: float = 0.0
    size: int = 0


class CloudStandIn:
    """Subclass and define :meth:`answer`. Use as a context manager."""

    def __init__(self, ssl_context: SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self._lock = threading.Lock()
        self._requests: list[Received] = []
        self._faults: list[Fault] = []
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread: threading.Thread | None = None

    # -- to define ------------------------------------------------------------------------

    def answer(self, request: Received) -> Reply:
        raise NotImplementedError

    # -- to use ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._faults.clear()

    def fail_next(self, fault: Fault, times: int = 1) -> None:
        with self._lock:
            self._faults.extend([fault] * times)

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- the server's side ----------------------------------------------------------------

    def _serve(self, request: Received) -> Reply:
        with self._lock:
            self._requests.append(request)
            fault = self._faults.pop(0) if self._faults else None
        if fault is None:
            return self.answer(request)
        if fault.delay:
            time.sleep(fault.delay)
        if fault.size:
            return Reply(200, b"x" * fault.size, {"Content-Type": "application/json"})
        return fault.reply if fault.reply is not None else self.answer(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, owner: CloudStandIn) -> None:
        super().__init__(address, handler)
        self.owner = owner

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        ctx = self.owner._ssl
        if ctx is not None:
            sock.settimeout(10)
            sock = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-answer (a test's deadline): not the test's failure


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = min(int(self.headers.get("Content-Length") or 0), MAX_REQUEST_BODY)
        body = self.rfile.read(length) if length else b""
        split = urllib.parse.urlsplit(self.path)
        received = Received(
            method=self.command,
            path=split.path,
            query=urllib.parse.parse_qs(split.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        reply = self.server.owner._serve(received)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)


@dataclass(frozen=True)
class RecordingHTTP(CloudHTTP):
    """Sends nothing: records each request's (method, URL, headers), then answers ``answer``,
    or fails it as unreachable (where the default endpoints are, which no test may reach)."""

    answer: CloudAnswer | None = None
    sent: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    async def send(
        self,
        method: str,
        url: str,
        *,
        what: str,
        deadline: Deadline,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> CloudAnswer:
        self.sent.append((method, url, dict(headers or {})))
        if self.answer is None:
            raise CloudAuthError(f"cannot reach {what}: recorded, not sent", temporary=True)
        return self.answer
