"""The trickle pass of ``webhook_attack.py``: attackers that send a big request head and then
its body one byte per TLS record, and the victim whose cached reviews they slow down.

The attackers run in a process of their own (:class:`Attackers`, spawned, on uvloop when
installed): 60 of them write about 6,000 TLS records a second, and in the victim's loop that
work would be charged to the server as latency. The victim (:func:`victim`) runs in the
benchmark's own process, one review at a time over one keep-alive TLS connection.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import ssl
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

from benchmarks._openloop import process_cpu_seconds
from benchmarks._webhook_reviews import Planned, read_response, wrong_answer
from benchmarks._webhook_server import EXIT_UNAVAILABLE, EXIT_WRONG, BenchmarkError, Server

# The body the attackers announce: at one byte per 5-20 ms it never completes within the
# server's read timeout (5 s by default), so every attacker is cut off by a timer, never
# answered on a whole request. It must stay under the framer's inline limit (64 KiB), or the
# framer hands the request to aiohttp at once and the attack is not the one measured.
BODY_LENGTH = 4096
# Pause before an attacker reconnects after the server closed its connection: a server that
# refuses the head at once (aiohttp alone, more than 128 headers) would otherwise be measured
# under a TLS handshake flood rather than a trickle.
RECONNECT_PAUSE = 1.0
READY_TIMEOUT = 30.0
VICTIM_TIMEOUT = 15.0  # longer than the read timeout plus the review deadline
# The victim sends a review this long after the previous one went out (at once when that
# one took longer): a webhook's API server is not a load generator, and the server's CPU in
# a window is then mostly the attack's, not the victim's own.
VICTIM_INTERVAL = 0.01


@dataclass(frozen=True)
class Head:
    """A request head an attacker sends whole before trickling its body."""

    name: str
    headers: int
    data: bytes


def head(name: str, headers: int, line_size: int) -> Head:
    """``POST /validate`` with ``headers`` padding fields of ``line_size`` bytes each (CRLF
    included) after the four real ones."""
    start = (
        b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {BODY_LENGTH}\r\n".encode()
    )
    pad = []
    for i in range(headers):
        field_name = f"X{i:04d}: ".encode()
        pad.append(field_name + b"a" * (line_size - len(field_name) - 2) + b"\r\n")
    return Head(name, headers + 3, start + b"".join(pad) + b"\r\n")


# Both just under the framer's 16 KiB head limit. aiohttp answers 400 to more than 128 fields
# or a field over 8190 bytes, so a patient attacker keeps to the second shape.
HEADS = (
    head("16 KiB head, 1,300 headers", 1297, 12),
    head("14 KiB head, 120 headers", 117, 120),
)


@dataclass
class AttackFigures:
    """What the attackers saw, from the first head to the stop."""

    connections: int = 0
    failed_connects: int = 0
    bytes_trickled: int = 0
    closed_by_server: int = 0
    answers: dict[str, int] = field(default_factory=dict)  # status line -> count
    cpu_seconds: float = 0.0  # the attackers' process
    seconds: float = 0.0


# -- the attackers (a child process) ---------------------------------------------------------


async def _attacker(
    port: int, verify: ssl.SSLContext, data: bytes, interval: float, figures: AttackFigures,
    sent_head: asyncio.Event,
) -> None:  # fmt: skip
    body = (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",' * 100)[:BODY_LENGTH]
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=verify)
        except OSError:
            figures.failed_connects += 1
            await asyncio.sleep(RECONNECT_PAUSE)
            continue
        figures.connections += 1
        # The server's answer (a 400 or a 408) or its close ends this connection's trickle.
        answer = asyncio.ensure_future(reader.read(64))
        try:
            writer.write(data)
            sent_head.set()
            for i in range(BODY_LENGTH):
                await asyncio.sleep(interval)
                if answer.done():
                    break
                writer.write(body[i : i + 1])  # one byte, one TLS record
                figures.bytes_trickled += 1
            first = await answer
        except OSError:
            first = b""
        finally:
            answer.cancel()
            writer.close()
        figures.closed_by_server += 1
        status = first.split(b"\r\n", 1)[0].decode(errors="replace") if first else "closed"
        figures.answers[status] = figures.answers.get(status, 0) + 1
        await asyncio.sleep(RECONNECT_PAUSE)


async def _attack(
    port: int, ca: str, data: bytes, count: int, interval: float, ready: Event, stop: Event
) -> AttackFigures:
    verify = ssl.create_default_context(cafile=ca)
    figures = AttackFigures()
    heads = [asyncio.Event() for _ in range(count)]
    tasks = [
        asyncio.ensure_future(_attacker(port, verify, data, interval, figures, sent))
        for sent in heads
    ]
    await asyncio.gather(*(sent.wait() for sent in heads))
    started, cpu = time.perf_counter(), time.process_time()
    ready.set()
    while not stop.is_set():
        await asyncio.sleep(0.05)
    figures.seconds = time.perf_counter() - started
    figures.cpu_seconds = time.process_time() - cpu
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return figures


def _child(
    port: int, ca: str, data: bytes, count: int, interval: float, ready: Event, stop: Event,
    out: Queue[AttackFigures],
) -> None:  # fmt: skip
    try:
        import uvloop  # noqa: PLC0415 -- optional: the attackers' own CPU is less on it

        uvloop.install()
    except ImportError:
        pass
    out.put(asyncio.run(_attack(port, ca, data, count, interval, ready, stop)))


class Attackers:
    """``count`` trickling attackers in a spawned process, from :meth:`start` (returns once
    every one has sent its head) to :meth:`stop` (returns their figures)."""

    def __init__(self, server: Server, ca: str, data: bytes, count: int, interval: float):
        context = multiprocessing.get_context("spawn")
        self._ready, self._stop = context.Event(), context.Event()
        self._out: Queue[AttackFigures] = context.Queue()
        args = (server.port, ca, data, count, interval, self._ready, self._stop, self._out)
        self._process: Any = context.Process(target=_child, args=args, daemon=True)

    def start(self) -> None:
        self._process.start()
        if not self._ready.wait(READY_TIMEOUT):
            self._process.kill()
            raise BenchmarkError("the attackers could not all connect", EXIT_UNAVAILABLE)

    def stop(self) -> AttackFigures:
        self._stop.set()
        figures = self._out.get(timeout=READY_TIMEOUT)
        self._process.join(READY_TIMEOUT)
        return figures


# -- the victim ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The victim's reviews over one window, and the server's CPU in it."""

    latencies_ms: list[float]
    failed: int  # answers that were not HTTP 200, connections lost, no answer in time
    seconds: float
    server_cpu: float | None

    def percentile(self, q: int) -> float:
        if len(self.latencies_ms) < 2:
            return self.latencies_ms[0] if self.latencies_ms else float("nan")
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[q - 1]

    def summary(self) -> dict[str, Any]:
        cpu = None if self.server_cpu is None else round(self.server_cpu, 2)
        return {
            "reviews": len(self.latencies_ms),
            "failed": self.failed,
            "p50_ms": round(self.percentile(50), 2),
            "p99_ms": round(self.percentile(99), 2),
            "max_ms": round(max(self.latencies_ms, default=float("nan")), 2),
            "seconds": round(self.seconds, 2),
            "server_cpu_seconds": cpu,
        }


async def victim(
    server: Server, verify: ssl.SSLContext, reviews: Sequence[Planned], seconds: float,
    *, must_answer: bool,
) -> Window:  # fmt: skip
    """Cached reviews one at a time, ``VICTIM_INTERVAL`` apart, over one keep-alive
    connection for ``seconds``; a new connection when the server closes it. Latency:
    ``perf_counter`` around each review. With ``must_answer`` (no attack) anything but a
    right HTTP 200 is exit 1; under attack a refusal (a 408, a lost connection, no answer
    within ``VICTIM_TIMEOUT``) is counted instead."""
    latencies: list[float] = []
    failed = 0
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    cpu = process_cpu_seconds(server.process.pid)
    started = time.perf_counter()
    n, sent = 0, started - VICTIM_INTERVAL
    while time.perf_counter() - started < seconds:
        item = reviews[n % len(reviews)]
        n += 1
        await asyncio.sleep(max(0.0, sent + VICTIM_INTERVAL - time.perf_counter()))
        sent = time.perf_counter()
        try:
            async with asyncio.timeout(VICTIM_TIMEOUT):
                if connection is None:
                    connection = await asyncio.open_connection("127.0.0.1", server.port, ssl=verify)
                    sent = time.perf_counter()  # the handshake is not the review's latency
                connection[1].write(item.request)
                status, body = await read_response(connection[0])
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            status, body = 0, repr(exc).encode()
        latencies.append((time.perf_counter() - sent) * 1000)
        problem = wrong_answer(item, status, body)
        if problem and (must_answer or status == 200):
            raise BenchmarkError(f"victim: {problem}", EXIT_WRONG)
        if problem:
            failed += 1
            if connection is not None:
                connection[1].close()
            connection = None
    elapsed = time.perf_counter() - started
    if connection is not None:
        connection[1].close()
    end = process_cpu_seconds(server.process.pid)
    server_cpu = None if cpu is None or end is None else end - cpu
    return Window(latencies, failed, elapsed, server_cpu)
