"""``imagecheck audit --serve``: an audit every interval, its results as Prometheus metrics.

- ``GET /metrics``: the availability gauges and the audits' own (``exporter.py``).
- ``GET /healthz``: 200 while the process serves (liveness). Not tied to the audits: the
  first audit of a large cluster over slow registries can outlast a liveness probe, and a
  restart mends neither an unreachable API nor a 403; those are ``imagecheck_audit_*``
  metrics and log lines instead.
- ``GET /readyz``: 503 until the first audit has ended, done or failed, then 200: a Service
  sends scrapes only once there is something to read, and a failed first audit is readable
  (``imagecheck_audit_last_failed 1``), so it does not hold readiness back.

An audit starts every ``interval`` from the previous one's start (the first at once); one that
outlasts the interval is followed at once by the next, never overlapped. A failed audit (a
:class:`~imagecheck.errors.ImagecheckError`: the API unreachable, a 403) keeps the last good
metrics and is counted.

Why aiohttp: ``imagecheck serve`` serves its metrics with it already, and it runs in the loop
the audits run in (no thread; the snapshot is swapped between scrapes). A page of
``DEFAULT_MAX_SERIES`` series takes long enough to render that the loop would stall, so it is
rendered in a thread, off the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from imagecheck._text import printable
from imagecheck.cluster._audit import AuditReport
from imagecheck.cluster._exporter import AuditMetrics
from imagecheck.cluster._limits import DEFAULT_INTERVAL
from imagecheck.errors import ImagecheckError

log = logging.getLogger("imagecheck.audit")


class Auditor:
    """Runs audits and keeps the metrics up to date. ``audit`` is one whole audit."""

    def __init__(
        self,
        audit: Callable[[], Awaitable[AuditReport]],
        metrics: AuditMetrics,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.audit, self.metrics, self.clock, self.wall = audit, metrics, clock, wall
        self.audits = 0  # ended, done or failed

    async def once(self) -> None:
        """One audit; its outcome in the metrics and one log line."""
        started = self.clock()
        try:
            report = await self.audit()
        except ImagecheckError as exc:
            self.metrics.failed(self.clock() - started)
            log.error("audit failed, metrics kept from the last good audit: %s", printable(exc))
        else:
            seconds = self.clock() - started
            self.metrics.succeeded(report, seconds, self.wall())
            log.info("audit done in %.1fs: %d containers, %s", seconds, len(report.uses),
                     _counts(report))  # fmt: skip
        self.audits += 1

    async def forever(
        self, interval: float, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        while True:
            started = self.clock()
            await self.once()
            await sleep(max(0.0, interval - (self.clock() - started)))


def _counts(report: AuditReport) -> str:
    counts = Counter(result.status.value for result in report.results.values())
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no images"


def app(auditor: Auditor) -> web.Application:
    """The three GET endpoints; no request has a body worth reading."""

    async def metrics(request: web.Request) -> web.Response:
        page = await asyncio.to_thread(generate_latest, auditor.metrics.registry)
        return web.Response(body=page, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        if auditor.audits:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="the first audit is running\n")

    application = web.Application(client_max_size=1024)
    application.add_routes(
        [web.get("/metrics", metrics), web.get("/healthz", healthz), web.get("/readyz", readyz)]
    )
    return application


@dataclass(frozen=True)
class ServeSettings:
    host: str
    port: int
    interval: float = DEFAULT_INTERVAL


async def serve(settings: ServeSettings, auditor: Auditor) -> None:
    """Listen, then audit until cancelled. ``OSError`` when the address cannot be bound."""
    runner = web.AppRunner(app(auditor), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
        log.info("serving /metrics on %s:%d, an audit every %gs", settings.host, settings.port,
                 settings.interval)  # fmt: skip
        await auditor.forever(settings.interval)
    finally:
        await runner.cleanup()
