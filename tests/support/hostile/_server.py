"""The core every hostile test server shares: listeners on ``127.0.0.1``, a thread per
connection, at most ``max_connections`` of them, TLS ClientHellos refused as Go refuses
them, requests read with bounds, the journal, and a close that ends every hang, trickle and
stream and joins every thread.

What it answers is the subclass's: :meth:`HostileServer.decide` picks an action for a
request (and journals it), :meth:`HostileServer.perform` carries it out on the
:class:`~tests.support.hostile._wire.Connection`, whose methods do the shared actions.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from types import TracebackType
from typing import Self

from tests.support.hostile._actions import TLS_REJECTION
from tests.support.hostile._journal import Exchange, Journal
from tests.support.hostile._wire import Connection, Request


class HostileServer:
    """Listeners named by ``listeners`` (the first is the server's own address), each on
    ``127.0.0.1:<random port>``. A context manager.

    ``idle_timeout``: how long a connection may wait for its next request (and a send may
    block); ``answer_bound``: the most seconds one answer may take, whatever was asked
    (``None``: as long as asked, until close); ``ssl_context``: serve HTTPS with it;
    ``encoding``: of the status lines and headers sent.
    """

    def __init__(
        self,
        *,
        listeners: tuple[str, ...] = ("self",),
        max_connections: int = 64,
        idle_timeout: float = 60.0,
        answer_bound: float | None = None,
        ssl_context: ssl.SSLContext | None = None,
        encoding: str = "utf-8",
    ) -> None:
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []  # server bugs, not client hang-ups
        self.journal = Journal()
        self.ssl_context = ssl_context
        self.idle_timeout = idle_timeout
        self.answer_bound = answer_bound
        self.encoding = encoding
        self._lock = threading.Lock()
        self._first_contact: float | None = None
        self._slots = threading.BoundedSemaphore(max_connections)
        self._live: dict[threading.Thread, socket.socket] = {}
        self._listeners = {
            name: socket.create_server(("127.0.0.1", 0), backlog=128) for name in listeners
        }
        self._accepting = [
            threading.Thread(target=self._accept, args=(name,), daemon=True, name=f"hostile-{name}")
            for name in listeners
        ]
        self._started = False
        self._closed = False

    # -- what a subclass answers -----------------------------------------------------------

    def decide(self, conn: Connection, request: Request) -> tuple[object, int]:
        """The action for ``request`` and the index of its :class:`Exchange` in the journal."""
        raise NotImplementedError

    def perform(
        self, conn: Connection, action: object, request: Request
    ) -> tuple[int | None, bool]:
        """Carry ``action`` out: the status sent (``None``: none, the connection is done) and
        whether the connection may serve another request."""
        raise NotImplementedError

    # -- addresses -------------------------------------------------------------------------

    def address(self, listener: str = "self") -> str:
        """``127.0.0.1:PORT`` of a listener."""
        return f"127.0.0.1:{self._listeners[listener].getsockname()[1]}"

    @property
    def port(self) -> int:
        return int(next(iter(self._listeners.values())).getsockname()[1])

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

    def first_contact(self) -> float | None:
        """When (``time.monotonic()``) the first connection came in since the journal was
        last cleared: the client's start-up was over by then."""
        with self._lock:
            return self._first_contact

    def clear_journal(self) -> None:
        self.journal.clear()
        with self._lock:
            self._first_contact = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        if not self._started:
            self._started = True
            for listener in self._listeners.values():
                listener.settimeout(0.1)
            for thread in self._accepting:
                thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop accepting, end every hang, trickle and stream, close every connection, join
        every thread. Idempotent. Raises when a thread outlives ``timeout`` (a server bug)."""
        if self._closed:
            return
        self._closed = True
        self.stopping.set()
        for thread in self._accepting:
            if thread.is_alive():
                thread.join(timeout)
        for listener in self._listeners.values():
            listener.close()
        stuck = self.drop_connections(timeout)
        stuck += [t for t in self._accepting if t.is_alive()]
        if stuck:
            raise RuntimeError(f"{type(self).__name__}: {len(stuck)} thread(s) did not stop")

    def drop_connections(self, timeout: float = 10.0) -> list[threading.Thread]:
        """Shut every open connection (waking blocked reads) and join its thread; the
        threads still alive after ``timeout``."""
        with self._lock:
            live = dict(self._live)
        for sock in live.values():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        end = time.monotonic() + timeout
        for thread in live:
            thread.join(max(0.0, end - time.monotonic()))
        return [t for t in live if t.is_alive()]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- connections -----------------------------------------------------------------------

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
            while not self._slots.acquire(timeout=0.1):  # at most max_connections at once
                if self.stopping.is_set():
                    sock.close()
                    return
            thread = threading.Thread(target=self._serve, args=(sock, name), daemon=True)
            with self._lock:  # registered and started together: drop_connections joins it
                self._live[thread] = sock
                thread.start()

    def _serve(self, sock: socket.socket, name: str) -> None:
        conn: Connection | None = None
        try:
            sock.settimeout(self.idle_timeout)
            if self.ssl_context is not None:
                sock.settimeout(10.0)  # the handshake
                sock = self.ssl_context.wrap_socket(sock, server_side=True)
                sock.settimeout(self.idle_timeout)
                with self._lock:  # the plain socket is detached now: shut this one on close
                    self._live[threading.current_thread()] = sock
            conn = Connection(
                sock, name, self.stopping, answer_bound=self.answer_bound, encoding=self.encoding
            )
            _converse(self, conn)
        except OSError:
            pass  # the client went away (or was reset): expected here
        except Exception as exc:  # a server bug: the fixture that owns the server fails
            with self._lock:
                self.errors.append(exc)
        finally:
            with contextlib.suppress(OSError):
                if conn is not None:
                    conn.close()
                sock.close()
            with self._lock:
                del self._live[threading.current_thread()]
            self._slots.release()


def _converse(server: HostileServer, conn: Connection) -> None:
    """Serve requests on ``conn`` while it is kept alive."""
    if server.ssl_context is None and conn.is_tls_hello():
        # As Go's net/http answers TLS on a plain port: the client fails fast, then
        # retries over HTTP (imagecheck tries HTTPS first on loopback hosts).
        exchange = Exchange("TLS", "", time.monotonic(), "reject-tls", 400, conn.listener)
        server.journal.add(exchange)
        conn.sock.sendall(TLS_REJECTION)
        return
    while not server.stopping.is_set():
        request = conn.next_request()
        if request is None:
            return
        action, index = server.decide(conn, request)
        status, keep = server.perform(conn, action, request)
        server.journal.answered(index, status)
        if status is None or not keep or not request.keep_alive:
            return
