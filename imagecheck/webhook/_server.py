"""The webhook's HTTPS server (aiohttp): ``POST /validate``, ``/healthz``, ``/readyz``,
``/metrics``; certificates reloaded when cert-manager rotates them; JSON logs.

Why aiohttp: it takes our own ``ssl.SSLContext``, so a rotated certificate is loaded into the
live context (``load_cert_chain`` applies to the next handshake) without a restart, and it
is one mature dependency for server and routing. Uvicorn builds its context from file names
at start-up and has no way to swap it.

A review whose answer needs no I/O (every image cached or invalid, or not a review at all)
does not reach aiohttp: :meth:`Webhook.answer_now` answers it in the loop turn its bytes
arrive (``fastpath/_framing.py`` says why and when), with the metrics and log line of
:meth:`Webhook.validate`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import signal
import ssl
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from imagecheck._deadline import Deadline
from imagecheck.authn import Keychain
from imagecheck.fastpath import Listener, handler_options
from imagecheck.kube import InCluster, KubeClient
from imagecheck.registry import ClientOptions, ImageChecker
from imagecheck.render import explained
from imagecheck.webhook._body import ReadSlot, Unreadable, parsed_review, read_review_body
from imagecheck.webhook._cache import Answers, ResultCache
from imagecheck.webhook._limits import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_IMAGES,
    DEFAULT_READ_TIMEOUT,
    MAX_REVIEW_BYTES,
)
from imagecheck.webhook._podsecrets import PodSecrets
from imagecheck.webhook._review import (
    Review,
    decide,
    distinct_images,
    load_json,
    load_json_pruned,
    parse_review,
    response,
)
from imagecheck.webhook._telemetry import Metrics
from imagecheck.webhook._tls import CertReloader

log = logging.getLogger("imagecheck.webhook")

# Big bodies read (and parsed) at once: what reviews in flight hold in memory is bounded by
# this times MAX_REVIEW_BYTES, not by the number of connections. Such a body waits for a turn
# within the read timeout; a small one needs none (``_body.py``).
READ_SLOTS = 16
# Log fields from the review (uid, refusal message) are cut to this.
MAX_LOGGED = 2048


@dataclass(frozen=True)
class ServeSettings:
    host: str
    port: int
    tls_cert: Path | None
    tls_key: Path | None
    warn_only: bool
    errors_pass: bool
    review_deadline: float
    tag_ttl: float
    missing_ttl: float
    reload_interval: float = 10.0
    # Also offer the pull secrets a reviewed pod names (read through the Kubernetes API).
    pod_pull_secrets: bool = False
    # Hostile clients: how long a client may take to send a request's headers or
    # body, how many connections may be open, how many distinct images a review may name.
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_images: int = DEFAULT_MAX_IMAGES


class Webhook:
    """The application state: one checker, one cache, the metrics, readiness."""

    def __init__(
        self, settings: ServeSettings, checker: ImageChecker, pod_secrets: PodSecrets | None = None
    ) -> None:
        self.settings = settings
        self.pod_secrets = pod_secrets
        self.metrics = Metrics()
        self.checker = checker
        checker.observers.append(
            lambda kind, status: self.metrics.registry_requests.labels(kind, str(status)).inc()
        )
        self.cache = ResultCache(
            checker,
            tag_ttl=settings.tag_ttl,
            missing_ttl=settings.missing_ttl,
            concurrency=checker.options.concurrency,
            max_images=settings.max_images,
            on_lookup=lambda hit, count: self.metrics.count(
                self.metrics.cache, "true" if hit else "false", count
            ),
        )
        self._reading = asyncio.Semaphore(READ_SLOTS)
        self.ready = False

    def app(self, middlewares: Sequence[Any] = ()) -> web.Application:
        app = web.Application(client_max_size=MAX_REVIEW_BYTES, middlewares=list(middlewares))
        app.add_routes(
            [
                web.post("/validate", self.validate),
                web.post("/", self.validate),
                web.get("/healthz", self.healthz),
                web.get("/readyz", self.readyz),
                web.get("/metrics", self.metrics_page),
            ]
        )
        return app

    async def validate(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        deadline = Deadline.after(self.settings.review_deadline)
        try:
            review = await self._read_review(request, deadline)
        except Unreadable as exc:
            return web.json_response(self._refused(exc), status=exc.status, headers=exc.headers)
        keychain, credentials = await self._pod_keychain(review, deadline)
        images = distinct_images(review)
        answers = await self.cache.results(images, deadline, keychain, credentials)
        return web.json_response(self._answer(review, images, answers, started))

    def answer_now(self, body: bytes) -> tuple[int, bytes] | None:
        """The HTTP status and JSON body :meth:`validate` would answer for a request with
        ``body``, with the same metrics and log line, when that needs no I/O (no pull
        secrets to read, every image invalid or cached); else None. Called by the listener
        in the loop turn the request arrived (``fastpath/_framing.py``)."""
        started = time.monotonic()
        try:
            review = self._parse(body)
        except RecursionError:  # pruned in a thread: validate() does that
            return None
        except Unreadable as exc:
            return exc.status, json.dumps(self._refused(exc)).encode()
        if self.pod_secrets is not None and (review.pull_secrets or review.service_accounts):
            return None
        images = distinct_images(review)
        answers = self.cache.answers_now(images)
        if answers is None:
            return None
        return 200, json.dumps(self._answer(review, images, answers, started)).encode()

    def _refused(self, exc: Unreadable) -> dict[str, Any]:
        self.metrics.count(self.metrics.reviews, "bad_request")
        log.warning("bad review", extra={"reason": exc.reason, "status": exc.status})
        if exc.status == 408:
            self.metrics.connections_closed.labels("body_timeout").inc()
        return {"error": exc.reason}

    def _answer(
        self, review: Review, images: Sequence[str], answers: Answers, started: float
    ) -> dict[str, Any]:
        """The AdmissionReview answered, counted and logged."""
        verdict = decide(
            review,
            {image: explained(result) for image, result in answers.results.items()},
            warn_only=self.settings.warn_only,
            errors_pass=self.settings.errors_pass,
            unchecked=answers.unchecked,
        )
        elapsed = time.monotonic() - started
        self.metrics.count(self.metrics.reviews, verdict.outcome)
        self.metrics.latency.observe(elapsed)
        if answers.unchecked:  # a warm review has none: no count of nothing
            self.metrics.not_checked.inc(len(answers.unchecked))
        log.info(
            "review",
            extra={
                "uid": review.uid[:MAX_LOGGED],
                "kind": review.kind,
                "namespace": review.namespace,
                "object": review.name,
                "images": len(images),
                "not_checked": len(answers.unchecked),
                "allowed": verdict.allowed,
                "outcome": verdict.outcome,
                "reason": verdict.message[:MAX_LOGGED] or None,
                "elapsed_ms": round(elapsed * 1000, 1),
            },
        )
        return response(review.uid, verdict)

    async def _read_review(self, request: web.Request, deadline: Deadline) -> Review:
        """The review in the body, read within the read timeout (and the review deadline).
        The body and its JSON are dropped on return: a review in flight holds only this.
        A big body (or one to decode) is read and parsed in a read slot (``_body.py``)."""
        budget = min(self.settings.read_timeout, deadline.remaining())
        slot = ReadSlot(self._reading)
        try:
            body = await read_review_body(request, slot, budget)
            try:
                return self._parse(body)
            except RecursionError:  # deeper than Python's parser goes: prune, in a thread
                return await asyncio.to_thread(self._parse, body, load_json_pruned)
        finally:
            slot.release()

    def _parse(self, body: bytes, load: Callable[[bytes], Any] = load_json) -> Review:
        """The review in ``body``; ``RecursionError`` when it nests too deeply for ``load``."""
        return parsed_review(
            body, functools.partial(parse_review, secrets=self.pod_secrets is not None), load
        )

    async def _pod_keychain(
        self, review: Review, deadline: Deadline
    ) -> tuple[Keychain | None, Hashable]:
        """The pod's own pull secrets, or else its ServiceAccount's (``--use-pod-pull-secrets``),
        if they can be read within the review's deadline; else the webhook's own credentials."""
        secrets, accounts = review.pull_secrets, review.service_accounts
        if self.pod_secrets is None or not (secrets or accounts):
            return None, None
        try:
            async with asyncio.timeout(deadline.remaining()):
                keychain = await self.pod_secrets.keychain(review.namespace, secrets, accounts)
        except TimeoutError:
            log.warning("pull secrets not read within the deadline", extra={"uid": review.uid})
            return None, None
        return keychain, (review.namespace, tuple(secrets), tuple(accounts)) if keychain else None

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, request: web.Request) -> web.Response:
        return web.Response(
            text="ready\n" if self.ready else "starting\n", status=200 if self.ready else 503
        )

    async def metrics_page(self, request: web.Request) -> web.Response:
        data = generate_latest(self.metrics.registry)
        return web.Response(body=data, headers={"Content-Type": CONTENT_TYPE_LATEST})


def server_ssl_context(
    settings: ServeSettings,
) -> tuple[ssl.SSLContext | None, CertReloader | None]:
    if settings.tls_cert is None or settings.tls_key is None:
        return None, None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx, CertReloader(ctx, settings.tls_cert, settings.tls_key)


async def serve(settings: ServeSettings, options: ClientOptions, keychain: Keychain) -> None:
    """Serve until SIGTERM/SIGINT; then stop taking connections and finish what is running."""
    ctx, reloader = server_ssl_context(settings)
    kube = KubeClient(InCluster.from_env(need_pod=False)) if settings.pod_pull_secrets else None
    pod_secrets = PodSecrets(kube, keychain) if kube is not None else None
    async with ImageChecker(options, keychain) as checker:
        webhook = Webhook(settings, checker, pod_secrets)
        listener = Listener(
            ssl_context=ctx,
            max_connections=settings.max_connections,
            read_timeout=settings.read_timeout,
            on_close=lambda reason: webhook.metrics.connections_closed.labels(reason).inc(),
            answer_now=webhook.answer_now,
        )
        webhook.metrics.connections.set_function(lambda: listener.open_connections)
        runner = web.AppRunner(
            webhook.app([listener.middleware]), handle_signals=False, **handler_options()
        )
        await runner.setup()
        assert runner.server is not None
        await listener.start(runner.server, settings.host, settings.port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        watcher = (
            asyncio.ensure_future(reloader.watch(settings.reload_interval)) if reloader else None
        )
        # What start-up made (modules, the app, the TLS context) lives as long as the process:
        # out of the collector's sight, a full collection is short (a pause in every review
        # in flight), and it stays short however many objects the imports made.
        gc.freeze()
        webhook.ready = True
        log.info(
            "serving",
            extra={"address": f"{settings.host}:{settings.port}", "tls": ctx is not None},
        )
        try:
            await stop.wait()
        finally:
            webhook.ready = False
            if watcher is not None:
                watcher.cancel()
            log.info("shutting down")
            await listener.stop()
            await runner.cleanup()  # lets the reviews in flight finish
            listener.abort_all()
            if kube is not None:
                kube.close()
