"""The webhook benchmark's reviews and its checking client (``webhook_load.py``, issue #14).

Deployment AdmissionReviews of given images, planned beforehand as whole raw HTTP/1.1 POSTs
(:func:`plan`: a client library costs more CPU per review than the server does), each with
the answer it must get (:func:`wrong_answer`); :func:`send_all`, ``concurrency`` workers
sending them back to back over keep-alive TLS connections and checking every answer, the
latencies and CPU it took as a :class:`Phase`.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks._openloop import process_cpu_seconds
from benchmarks._webhook_server import EXIT_WRONG, BenchmarkError, Server


def deployment_review(images: Sequence[str]) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "bench"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": containers},
            },
        },
    }
    kind = {"group": "apps", "version": "v1", "kind": "Deployment"}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "namespace": "bench",
        "operation": "CREATE",
        "userInfo": {"username": "bench"},
        "object": obj,
        "oldObject": None,
        "dryRun": False,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@dataclass(frozen=True)
class Planned:
    request: bytes  # the whole POST
    body: bytes
    uid: str
    allowed: bool


def plan(image_sets: Sequence[Sequence[str]], present: frozenset[str]) -> list[Planned]:
    planned = []
    for images in image_sets:
        review = deployment_review(images)
        body = json.dumps(review).encode()
        planned.append(
            Planned(
                post(b"/validate", body),
                body,
                review["request"]["uid"],
                all(i in present for i in images),
            )
        )
    return planned


def wrong_answer(item: Planned, status: int, body: bytes) -> str | None:
    """What is wrong with the answer to one review (None: nothing)."""
    if status != 200:
        return f"HTTP {status}: {body[:200]!r}"
    answer = json.loads(body).get("response", {})
    if answer.get("uid") != item.uid:
        return f"uid {answer.get('uid')!r}, expected {item.uid!r}"
    if answer.get("allowed") is not item.allowed:
        return f"allowed={answer.get('allowed')}, expected {item.allowed}: {answer}"
    if not item.allowed and answer.get("status", {}).get("code") != 403:
        return f"refused without status.code 403: {answer}"
    return None


@dataclass(frozen=True)
class Phase:
    latencies_ms: list[float]
    seconds: float
    server_cpu: float | None  # seconds of CPU the server process used in the phase
    client_cpu: float  # seconds of CPU this process (the client) used in the phase

    def cpu_ms_per_review(self, seconds: float | None) -> str:
        return "n/a" if seconds is None else f"{seconds / len(self.latencies_ms) * 1000:.2f} ms"

    def percentile(self, q: int) -> float:
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[q - 1]

    @property
    def throughput(self) -> float:
        return len(self.latencies_ms) / self.seconds


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a ``Content-Length``: its status and body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length)


def post(path: bytes, body: bytes) -> bytes:
    """A whole ``POST`` request, keep-alive."""
    head = (
        b"POST "
        + path
        + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    return head + body


async def send_all(
    server: Server, verify: ssl.SSLContext, items: Sequence[Planned], concurrency: int
) -> Phase:
    """``concurrency`` workers send ``items`` back to back, each over its own keep-alive TLS
    connection, as raw HTTP/1.1 (requests built beforehand): a client library costs more CPU
    per review than the server does, and on 2 cores the client would set the pace."""
    queue = list(reversed(items))
    latencies: list[float] = []
    wrong: list[str] = []

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=verify)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await read_response(reader)
        return reader, writer

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while queue:
            item = queue.pop()
            started = time.perf_counter()
            writer.write(item.request)
            status, body = await read_response(reader)
            latencies.append((time.perf_counter() - started) * 1000)
            problem = wrong_answer(item, status, body)
            if problem:
                wrong.append(problem)

    # Open every connection first: TLS handshakes are not review latency.
    connections = await asyncio.gather(*(connect() for _ in range(concurrency)))
    try:
        server_cpu = process_cpu_seconds(server.process.pid)
        client_cpu = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker(*connection) for connection in connections))
        seconds = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
        server_end = process_cpu_seconds(server.process.pid)
        if server_cpu is not None and server_end is not None:
            server_cpu = server_end - server_cpu
    finally:
        for _, writer in connections:
            writer.close()
    if wrong:
        raise BenchmarkError(f"{len(wrong)} wrong answer(s); first: {wrong[0]}", EXIT_WRONG)
    return Phase(latencies, seconds, server_cpu, client_cpu)
