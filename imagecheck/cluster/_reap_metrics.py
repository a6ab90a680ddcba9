"""What ``imagecheck reap``'s loop shows about itself: Prometheus metrics on ``/metrics`` and
``/healthz``, on ``--metrics-listen``. Needs the webhook's libraries
(prometheus_client, aiohttp), which the cluster extra includes.

Labels are bounded by construction: a stuck pod's reason (three values), a verdict (the
:class:`~imagecheck.result.Status` values), an API error's class (five). Never a namespace,
pod or image: a cluster of 10,000 pods would make 10,000 series.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Protocol

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from imagecheck.cluster._model import Conflict, Forbidden, Gone, Unreachable
from imagecheck.cluster._reap import STUCK_REASONS, Action, Outcome, StuckPod
from imagecheck.cluster._reap_loop import Hooks


class ReapMetrics(Hooks):
    """The loop's hooks, counted. ``healthy()``: the loop listed, or a candidate tried the
    Lease, within ``stale_after`` seconds."""

    def __init__(self, stale_after: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self.stale_after = stale_after
        self.monotonic = monotonic
        self.last_beat = monotonic()
        self.stuck_pods = Gauge(
            "imagecheck_reap_stuck_pods",
            "Pods waiting on an image pull that reap keeps (the selector's), by waiting reason.",
            ["reason"],
            registry=self.registry,
        )
        self.jobs_failed = Counter(
            "imagecheck_reap_jobs_failed",
            "Jobs failed (and bare pods deleted, kind=pod), by the registry's verdict.",
            ["kind", "verdict"],
            registry=self.registry,
        )
        self.passes = Counter(
            "imagecheck_reap_passes", "Full passes (lists) done.", registry=self.registry
        )
        self.api_errors = Counter(
            "imagecheck_reap_api_errors",
            "Kubernetes API errors, by class: forbidden, gone, conflict, unreachable, other.",
            ["error"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "imagecheck_reap_leader",
            "1 while this replica holds the Lease.",
            registry=self.registry,
        )

    def beat(self) -> None:
        self.last_beat = self.monotonic()

    def healthy(self) -> bool:
        return self.monotonic() - self.last_beat <= self.stale_after

    def passed(self) -> None:
        self.passes.inc()
        self.beat()

    def api_error(self, error: Exception) -> None:
        self.api_errors.labels(_error_class(error)).inc()

    def stuck(self, pods: Iterable[StuckPod]) -> None:
        counts = Tally(pod.reason for pod in pods)
        for reason in STUCK_REASONS:
            self.stuck_pods.labels(reason).set(counts.get(reason, 0))

    def outcomes(self, outcomes: Iterable[Outcome]) -> None:
        for outcome in outcomes:
            if outcome.action is Action.ACTED and outcome.verdict is not None:
                kind = "job" if outcome.job else "pod"
                self.jobs_failed.labels(kind, outcome.verdict.value).inc()

    def leading(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)
        self.beat()


def _error_class(error: Exception) -> str:
    for cls, name in ((Forbidden, "forbidden"), (Gone, "gone"), (Conflict, "conflict")):
        if isinstance(error, cls):
            return name
    return "unreachable" if isinstance(error, Unreachable) else "other"


class Served(Protocol):
    """What the server shows: a registry to render, and whether the loop is alive."""

    registry: CollectorRegistry

    def healthy(self) -> bool: ...


async def serve(metrics: Served, host: str, port: int) -> web.AppRunner:
    """``/metrics`` and ``/healthz`` (200 "ok", or 503 when the loop has gone quiet)."""

    async def metrics_page(request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health(request: web.Request) -> web.Response:
        if metrics.healthy():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="stale: no list or lease round lately\n")

    # Small requests only: nothing here reads a body.
    app = web.Application(client_max_size=1024)
    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/healthz", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
