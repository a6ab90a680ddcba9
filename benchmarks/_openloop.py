"""The webhook benchmark's open-loop load: reviews offered at a fixed rate, latency from each
review's *intended* send time (issue #14).

Why: wrk (``_wrk.py``) sends back to back over 50 connections, a closed loop: it measures the
server at saturation, and while the server stalls it sends nothing, so the reviews a stall
would have delayed are never sent (coordinated omission). A latency target at a stated load
("p99 <= 20 ms at 2,000 reviews/s") is measured by offering that load on a schedule and
charging every review for the time since it was due, as wrk2 does:

- ``connections`` keep-alive TLS connections, each with its own schedule: connection ``k``
  owes review ``n`` (``n = k, k + C, k + 2C...``) at ``start + n / rate``, so together they
  offer ``rate`` reviews a second, evenly spaced;
- one review at a time per connection (no pipelining): a review whose connection is still
  waiting for the previous answer goes out when that answer comes, and its latency still
  counts from when it was due;
- the client's own *lag*: how late a review went out after it was due on a free connection
  (a timer that fired late, a busy loop). A client that cannot keep the schedule says so
  (:attr:`OpenLoopRun.kept_schedule`) instead of offering less than asked.

It runs in a process of its own (:func:`open_loop`, spawned), on uvloop when installed, so
that it neither shares the server's process nor the benchmark's other clients' loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

# The client kept the schedule when its lag's p99 is under this, and it sent what was due.
# uvloop's (libuv's) timers count whole milliseconds: a send is up to 1 ms late by that alone.
# Lag is in the latency too (it counts from when a review was due): it is charged to the
# server, so a lagging client can only make the figures worse than the server's own.
MAX_LAG_P99_MS = 2.0
MAX_WRONG_KEPT = 5


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, from ``/proc/PID/stat`` (Linux; else None)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class OpenLoopRun:
    rate: float  # offered, reviews/s
    due: int  # reviews due in the schedule
    latencies_ms: list[float]  # one per answer, from the review's intended send time
    lag_ms: list[float]  # one per review sent: how late after due, on a free connection
    sent_seconds: float  # first send to last send
    answered_seconds: float  # first answer to last answer
    wrong: list[str]  # the first few wrong answers
    wrong_count: int
    client_cpu: float  # the client process's CPU over the run
    server_cpu: float | None  # the server's, over the same time

    def percentile(self, values: Sequence[float], q: int) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1]

    def latency(self, q: int) -> float:
        return self.percentile(self.latencies_ms, q)

    @property
    def offered(self) -> float:
        """Reviews/s actually sent."""
        return (len(self.lag_ms) - 1) / self.sent_seconds

    @property
    def answered(self) -> int:
        return len(self.latencies_ms)

    @property
    def achieved(self) -> float:
        """Reviews/s answered."""
        return (len(self.latencies_ms) - 1) / self.answered_seconds

    @property
    def kept_schedule(self) -> bool:
        return (
            len(self.lag_ms) == self.due
            and self.percentile(self.lag_ms, 99) <= MAX_LAG_P99_MS
            and self.offered >= self.rate * 0.99
        )


class _Connection(asyncio.Protocol):
    """One keep-alive connection's schedule (see the module docstring)."""

    def __init__(self, run: _Run, first: int) -> None:
        self.run = run
        self.n = first  # the review this connection owes next
        self.due = 0.0
        self.free_at = 0.0  # when the last answer came (the connection was free from then)
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def next(self) -> None:
        run = self.run
        if self.n >= run.due:
            self.done.set_result(None)
            return
        self.due = run.start + self.n / run.rate
        wait = self.due - time.perf_counter()
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self.send)
        else:
            self.send()

    def send(self) -> None:
        now = time.perf_counter()
        self.run.lag_ms.append((now - max(self.due, self.free_at)) * 1000)
        self.run.sent.append(now)
        assert self.transport is not None
        self.transport.write(self.run.requests[self.n % len(self.run.requests)])

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).lower()
        length = int(head.partition(b"content-length:")[2].split(b"\r\n", 1)[0])
        if len(self.buffer) < end + 4 + length:
            return
        now = time.perf_counter()
        status = int(head.split(b" ", 2)[1])
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self.run.answered(self.n, now - self.due, status, body)
        self.free_at = now
        self.n += self.run.connections
        self.next()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost: {exc}"))


class _Run:
    def __init__(
        self, requests: Sequence[bytes], uids: Sequence[str], rate: float, seconds: float, c: int
    ) -> None:
        self.requests, self.uids = requests, uids
        self.rate, self.connections = rate, c
        self.due = round(rate * seconds)
        self.start = 0.0
        self.latencies_ms: list[float] = []
        self.lag_ms: list[float] = []
        self.sent: list[float] = []
        self.answers: list[float] = []
        self.wrong: list[str] = []
        self.wrong_count = 0

    def answered(self, n: int, seconds: float, status: int, body: bytes) -> None:
        self.answers.append(time.perf_counter())
        self.latencies_ms.append(seconds * 1000)
        problem = None
        if status != 200:
            problem = f"HTTP {status}: {body[:200]!r}"
        else:
            answer = json.loads(body).get("response", {})
            uid = self.uids[n % len(self.uids)]
            if answer.get("uid") != uid or answer.get("allowed") is not True:
                problem = f"expected uid {uid} allowed, got {answer}"
        if problem:
            self.wrong_count += 1
            if len(self.wrong) < MAX_WRONG_KEPT:
                self.wrong.append(problem)


async def _load(port: int, ca: str, run: _Run, server_pid: int) -> tuple[float, float | None]:
    loop = asyncio.get_running_loop()
    verify = ssl.create_default_context(cafile=ca)
    connections = []
    for k in range(run.connections):
        _, conn = await loop.create_connection(
            functools.partial(_Connection, run, k), "127.0.0.1", port, ssl=verify
        )
        connections.append(conn)
    cpu, server_cpu = time.process_time(), process_cpu_seconds(server_pid)
    run.start = time.perf_counter() + 0.05  # every connection's first timer set before it
    for conn in connections:
        conn.next()
    try:
        await asyncio.gather(*(conn.done for conn in connections))
    finally:
        for conn in connections:
            if conn.transport is not None:
                conn.transport.close()
    server_end = process_cpu_seconds(server_pid)
    if server_cpu is not None and server_end is not None:
        server_cpu = server_end - server_cpu
    return time.process_time() - cpu, server_cpu


def _child(
    port: int, ca: str, requests: list[bytes], uids: list[str], rate: float, seconds: float,
    connections: int, server_pid: int,
) -> OpenLoopRun:  # fmt: skip
    try:
        import uvloop  # noqa: PLC0415 -- optional: the client's own CPU is less on it

        uvloop.install()
    except ImportError:
        pass
    run = _Run(requests, uids, rate, seconds, connections)
    client_cpu, server_cpu = asyncio.run(_load(port, ca, run, server_pid))
    return OpenLoopRun(
        rate, run.due, run.latencies_ms, run.lag_ms, run.sent[-1] - run.sent[0],
        run.answers[-1] - run.answers[0], run.wrong, run.wrong_count, client_cpu, server_cpu,
    )  # fmt: skip


def open_loop(
    port: int, ca: Path, requests: Sequence[bytes], uids: Sequence[str], *, rate: float,
    seconds: float, connections: int, server_pid: int,
) -> OpenLoopRun:  # fmt: skip
    """Offer the POSTs ``requests`` (answers expected allowed, with ``uids``, in the same
    order; taken round-robin) at ``rate`` a second for ``seconds`` over ``connections``
    keep-alive TLS connections to 127.0.0.1:``port``, from a process of its own."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        future = pool.submit(
            _child, port, str(ca), list(requests), list(uids), rate, seconds, connections,
            server_pid,
        )  # fmt: skip
        return future.result()
