"""A TLS front that serves one registry name from several servers here, as ACR serves
``<name>.azurecr.io``: the registry API (``/v2/...``), its token service (``/oauth2/token``)
and the AAD exchange (``/oauth2/exchange``) all on the registry's own host. Distribution
serves only the first, so the front sends each path prefix to the server that has it (the real
registry, its :class:`~tests.support.tokenserver.TokenServer`, the exchange stand-in), over
plain HTTP, optionally under another path (``/oauth2/token`` -> ``/token``).

Forwarding is faithful, so what the client meets is what those servers said:

* the method, path and query, every header but the hop-by-hop ones (RFC 9110 7.6.1), repeated
  ones (``WWW-Authenticate``) kept apart, ``Host`` as the client sent it (Distribution builds
  its ``Location`` URLs from it, pointing back at the front);
* bodies streamed both ways, 64 KiB at a time, never held whole: a request body by its
  ``Content-Length`` (a chunked request body is refused, 411: no client here sends one), an
  answer by its own ``Content-Length``, else re-chunked;
* status and reason as sent, no header of the front's own.

Each exchange is journalled (:attr:`RegistryFront.seen`: method, path, status).

:class:`AcrTokenServer` is the token service behind ``/oauth2/token``: it takes only the
refresh tokens ACR's exchange (``tests/support/azurecloud.py``) issued, handed to it with
:meth:`~AcrTokenServer.accept`, and grants ``pull`` (the AcrPull role) to the identities in
``pullers``; anonymous callers get the test token server's policy.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from tests.support.hostile._proxying import _HOP_BY_HOP
from tests.support.pki import TokenSigner
from tests.support.tokenserver import TokenServer, _parse_scope

_CHUNK = 64 * 1024
_NO_BODY = frozenset({204, 304})


class RegistryFront:
    """HTTPS on ``127.0.0.1:<port>`` (``ssl_context``), forwarding by path prefix
    (:meth:`route`; the longest prefix wins). A context manager."""

    def __init__(self, ssl_context: ssl.SSLContext, *, upstream_timeout: float = 30.0) -> None:
        self.ssl_context = ssl_context
        self.upstream_timeout = upstream_timeout
        self._lock = threading.Lock()
        self._routes: list[tuple[str, str, int, str]] = []
        self._seen: list[tuple[str, str, int]] = []
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def seen(self) -> list[tuple[str, str, int]]:
        with self._lock:
            return list(self._seen)

    def route(self, prefix: str, upstream: str, *, to: str | None = None) -> None:
        """Send paths under ``prefix`` to ``upstream`` (``http://host:port``), the prefix
        replaced by ``to`` when given."""
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://HOST:PORT, not {upstream!r}")
        with self._lock:
            self._routes.append((prefix, parts.hostname, parts.port, prefix if to is None else to))
            self._routes.sort(key=lambda r: len(r[0]), reverse=True)

    def pick(self, target: str) -> tuple[str, int, str] | None:
        """Where ``target`` (path and query) goes: upstream host, port and target there."""
        with self._lock:
            for prefix, host, port, to in self._routes:
                if target.startswith(prefix):
                    return host, port, to + target[len(prefix) :]
        return None

    def record(self, method: str, target: str, status: int) -> None:
        with self._lock:
            self._seen.append((method, urlsplit(target).path, status))

    def __enter__(self) -> Self:
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
        self._thread.join(timeout=10)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, owner: RegistryFront) -> None:
        super().__init__(address, handler)
        self.owner = owner

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        sock.settimeout(30)
        # The handshake happens on the connection's own thread, at its first read.
        tls = self.owner.ssl_context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        )
        return tls, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up: not the test's failure


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._forward()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        owner = self.server.owner
        where = owner.pick(self.path)
        if where is None or "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            status = 404 if where is None else 411
            self.send_response_only(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            owner.record(self.command, self.path, status)
            return
        host, port, target = where
        upstream = http.client.HTTPConnection(host, port, timeout=owner.upstream_timeout)
        try:
            self._send_upstream(upstream, target)
            response = upstream.getresponse()
            self._relay(response)
            owner.record(self.command, self.path, response.status)
        finally:
            upstream.close()

    def _send_upstream(self, upstream: http.client.HTTPConnection, target: str) -> None:
        upstream.putrequest(self.command, target, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            if name.lower() not in _HOP_BY_HOP:
                upstream.putheader(name, value)
        upstream.endheaders()
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            chunk = self.rfile.read(min(_CHUNK, left))
            if not chunk:
                break
            upstream.send(chunk)
            left -= len(chunk)

    def _relay(self, response: http.client.HTTPResponse) -> None:
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        has_body = self.command != "HEAD" and response.status not in _NO_BODY
        chunked = has_body and response.getheader("Content-Length") is None
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while has_body and (chunk := response.read1(_CHUNK)):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class AcrTokenServer(TokenServer):
    """The registry's token server as ACR's ``/oauth2/token``: refresh tokens only, and only
    those :meth:`accept` was given; ``pull`` for the identities in ``pullers``."""

    def __init__(self, *, signer: TokenSigner, service: str, pullers: Iterable[str]) -> None:
        super().__init__(ssl_context=None, signer=signer, service=service, users={})
        self.pullers = frozenset(pullers)

    def accept(self, token: str, subject: str) -> None:
        with self._lock:
            self.refresh_tokens[token] = subject

    def grant(self, subject: str | None, scope: str) -> dict[str, Any] | None:
        parsed = _parse_scope(scope)
        if subject is None or subject not in self.pullers or parsed is None:
            return super().grant(None, scope)
        kind, name, wanted = parsed
        pull = [action for action in wanted if action == "pull"]
        return {"type": kind, "name": name, "actions": pull} if pull else None
