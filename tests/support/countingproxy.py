"""A TCP proxy that counts the connections it accepts: put it in front of a registry or a
token service to see how many connections a client opened (issue #14: connection reuse).

Bytes pass through untouched, TLS included (the test certificates name 127.0.0.1, which the
proxy listens on too). One thread per direction of each connection; ``close()`` ends them.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from typing import Self


class CountingProxy:
    """Listens on a free 127.0.0.1 port and forwards every connection to ``upstream``."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._accepted = 0
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def accepted(self) -> int:
        """Connections accepted since the start or the last ``reset()``."""
        with self._lock:
            return self._accepted

    def reset(self) -> None:
        with self._lock:
            self._accepted = 0

    def count(self) -> None:
        with self._lock:
            self._accepted += 1

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, proxy: CountingProxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Pipe)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up is normal


class _Pipe(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.proxy.count()
        client: socket.socket = self.request
        try:
            upstream = socket.create_connection(self.server.proxy.upstream, timeout=10)
        except OSError:
            return
        upstream.settimeout(None)  # a kept-alive connection may idle for long
        with upstream:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join(timeout=10)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until ``source`` ends, then end ``sink``'s writing half."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
