"""A registry served under a path prefix, as Artifactory (``/artifactory/api/docker/<repo>/v2``)
and Harbor's proxy projects serve one: what containerd's ``override_path`` is for.

:class:`PathProxy` answers ``/<prefix>/<rest>`` with the upstream registry's ``/v2/<rest>``
(method, headers, body and status passed through) and 404 for any other path, and records
every request it receives (method, path, query, the headers named in ``recorded_headers``)
so tests can assert what a client sent: the ``ns`` query parameter, configured headers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

import httpx

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]


class PathProxy:
    """``http://127.0.0.1:PORT/<prefix>/...`` in front of ``upstream`` (``http://HOST:PORT``)."""

    def __init__(self, upstream: str, prefix: str, recorded_headers: tuple[str, ...] = ()) -> None:
        self.upstream = upstream.rstrip("/")
        self.prefix = "/" + prefix.strip("/")
        self.recorded_headers = tuple(h.lower() for h in recorded_headers)
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(proxy: PathProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._forward()

        def do_HEAD(self) -> None:
            self._forward()

        def _forward(self) -> None:
            parts = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            proxy.record(
                Seen(
                    self.command,
                    parts.path,
                    parts.query,
                    {k: v for k, v in headers.items() if k in proxy.recorded_headers},
                )
            )
            if not (parts.path + "/").startswith(proxy.prefix + "/"):
                self._answer(404, {}, b"")
                return
            rest = parts.path[len(proxy.prefix) :] or "/"
            url = f"{proxy.upstream}/v2{rest}" + (f"?{parts.query}" if parts.query else "")
            sent = {k: v for k, v in headers.items() if k not in _HOP_BY_HOP}
            with httpx.Client(trust_env=False, timeout=10.0) as client:
                answer = client.request(self.command, url, headers=sent)
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
            body = b"" if self.command == "HEAD" else answer.content
            length = answer.headers.get("content-length", str(len(body)))
            self._answer(answer.status_code, {**kept, "Content-Length": length}, body)

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            headers.setdefault("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    return Handler
