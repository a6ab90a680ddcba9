"""Loopback networking for tests and benchmarks."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (nothing listens on it now).

    Another process may take it before the caller binds it; a caller that starts a server on
    it must be ready to try again.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
