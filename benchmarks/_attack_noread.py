"""The no-read pass of ``webhook_attack.py``: what the server holds for a client that never
reads its answers, and for one that connects and sends nothing.

Both kinds of client run in the benchmark's own process: nothing here is timed, and the
server's memory (``VmRSS``) does not depend on which process the clients are in.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._openloop import process_cpu_seconds
from benchmarks._webhook_server import EXIT_UNAVAILABLE, BenchmarkError, Server

IDLE_CONNECTIONS = 100
# The clients have stalled when every one is blocked (its write buffer over the high-water
# mark, or closed) and none has been able to write for this long.
STALL_QUIET = 1.0
# The fast path reads and answers until the kernel's socket buffers are full (megabytes a
# connection): 20 clients take a minute of a core. Past this, say so, and measure anyway.
STALL_LIMIT = 15.0
SETTLE = 2.0  # after the stall, before RSS is read: let the server finish what it read
BATCH = 32  # reviews per write


def rss_mib(pid: int) -> float:
    """``VmRSS`` of a process, from ``/proc/PID/status``."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchmarkError(f"no VmRSS for process {pid}", EXIT_UNAVAILABLE)


class _Unread(asyncio.Protocol):
    """Pipelines ``request`` for as long as the connection takes it; reads nothing."""

    def __init__(self, request: bytes) -> None:
        self.batch = request * BATCH
        self.request_size = len(request)
        self.transport: Any = None
        self.paused = False
        self.closed = False
        self.written = 0  # bytes handed to the transport
        self.last_write = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.pause_reading()  # type: ignore[attr-defined]
        self._fill()

    def _fill(self) -> None:
        # A bounded burst, then the loop's other work: write() may not call pause_writing
        # until the TCP transport has tried the socket.
        burst = 0
        while not self.paused and not self.closed and burst < 1 << 20:
            self.transport.write(self.batch)
            self.written += len(self.batch)
            burst += len(self.batch)
            self.last_write = time.monotonic()
        if not self.paused and not self.closed:
            asyncio.get_running_loop().call_soon(self._fill)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._fill()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    @property
    def requests_sent(self) -> int:
        """Reviews that left this process (written, less what its transport still holds)."""
        if self.closed:
            return self.written // self.request_size
        buffered: int = self.transport.get_write_buffer_size()
        return (self.written - buffered) // self.request_size


@dataclass(frozen=True)
class NoRead:
    """The server's RSS (MiB) around ``clients`` connections that never read."""

    clients: int
    before: float
    stalled: float  # after every client stalled, and SETTLE
    held: float  # ``hold`` seconds later, the clients still open
    closed: float  # SETTLE after the clients closed
    stall_seconds: float | None  # None: they never all stalled within STALL_LIMIT
    requests_per_client: float
    closed_by_server: int  # during the whole pass
    hold: float
    cpu_stalled: float | None  # the server's CPU seconds from the first connection to ``stalled``
    cpu_held: float | None  # and from ``stalled`` to ``held``

    def per_client(self, rss: float) -> float:
        return (rss - self.before) / self.clients

    def summary(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "rss_before_mib": round(self.before, 1),
            "rss_stalled_mib": round(self.stalled, 1),
            "rss_held_mib": round(self.held, 1),
            "rss_closed_mib": round(self.closed, 1),
            "per_client_stalled_mib": round(self.per_client(self.stalled), 2),
            "per_client_held_mib": round(self.per_client(self.held), 2),
            "per_client_closed_mib": round(self.per_client(self.closed), 2),
            "stall_seconds": None if self.stall_seconds is None else round(self.stall_seconds, 1),
            "requests_per_client": round(self.requests_per_client),
            "closed_by_server": self.closed_by_server,
            "hold_seconds": self.hold,
            "server_cpu_to_stalled_seconds": _round(self.cpu_stalled),
            "server_cpu_held_seconds": _round(self.cpu_held),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _since(pid: int, cpu: float | None) -> float | None:
    now = process_cpu_seconds(pid)
    return None if now is None or cpu is None else now - cpu


async def _connect(server: Server, verify: ssl.SSLContext, protocol: Any) -> Any:
    """The protocol of a new TLS connection (its transport, for an ``asyncio.Protocol``)."""
    loop = asyncio.get_running_loop()
    transport, connected = await loop.create_connection(
        protocol, "127.0.0.1", server.port, ssl=verify
    )
    return transport if type(connected) is asyncio.Protocol else connected


async def no_read(
    server: Server, verify: ssl.SSLContext, request: bytes, clients: int, hold: float
) -> NoRead:
    """``clients`` connections pipelining ``request`` without reading; RSS once they stall,
    ``hold`` seconds later, and after they close."""
    pid = server.process.pid
    before = rss_mib(pid)
    cpu = process_cpu_seconds(pid)
    started = time.monotonic()
    unread: list[_Unread] = await asyncio.gather(
        *(_connect(server, verify, lambda: _Unread(request)) for _ in range(clients))
    )
    stall_seconds = None
    while time.monotonic() - started < STALL_LIMIT:
        await asyncio.sleep(0.1)
        now = time.monotonic()
        if all((u.paused or u.closed) and now - u.last_write >= STALL_QUIET for u in unread):
            stall_seconds = now - started - STALL_QUIET
            break
    await asyncio.sleep(SETTLE)
    stalled, cpu_stalled = rss_mib(pid), _since(pid, cpu)
    cpu = process_cpu_seconds(pid)
    await asyncio.sleep(hold)
    held, cpu_held = rss_mib(pid), _since(pid, cpu)
    sent = sum(u.requests_sent for u in unread) / clients
    closed_by_server = sum(u.closed for u in unread)
    for u in unread:
        if not u.closed:
            u.transport.abort()  # close() would wait for the unread answers to drain
    await asyncio.sleep(SETTLE)
    return NoRead(
        clients, before, stalled, held, rss_mib(pid), stall_seconds, sent, closed_by_server,
        hold, cpu_stalled, cpu_held,
    )  # fmt: skip


@dataclass(frozen=True)
class Idle:
    connections: int
    before: float
    after: float

    @property
    def per_connection(self) -> float:
        return (self.after - self.before) / self.connections


async def idle(server: Server, verify: ssl.SSLContext, connections: int) -> Idle:
    """RSS for ``connections`` TLS connections that complete their handshake and send
    nothing (read within the server's read timeout, which closes them)."""
    pid = server.process.pid
    before = rss_mib(pid)
    opened = await asyncio.gather(
        *(_connect(server, verify, asyncio.Protocol) for _ in range(connections))
    )
    await asyncio.sleep(0.5)
    after = rss_mib(pid)
    for transport in opened:
        transport.abort()
    return Idle(connections, before, after)
