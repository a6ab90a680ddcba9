"""The webhook's HTTPS server (aiohttp): ``POST /validate``, ``/healthz``, ``/readyz``,
``/metrics``; certificates reloaded when cert-manager rotates them; JSON logs.

Why aiohttp: it takes our own ``ssl.SSLContext``, so a rotated certificate is loaded into the
live context (``load_cert_chain`` applies to the next handshake) without a restart, and it
is one mature dependency for server and routing. Uvicorn builds its context from file names
at start-up and has no way to swap it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from imagecheck.client import ClientOptions, ImageChecker
from imagecheck.credentials import ChainKeychain, Keychain
from imagecheck.errors import ImagecheckError
from imagecheck.kube import InCluster, KubeClient
from imagecheck.pullsecrets import PullSecretKeychain
from imagecheck.retry import Deadline
from imagecheck.webhook.cache import ResultCache
from imagecheck.webhook.review import BadReview, decide, distinct_images, parse_review, response

log = logging.getLogger("imagecheck.webhook")

# AdmissionReviews carry the whole object; etcd stores objects up to 1.5 MiB.
MAX_REVIEW_BYTES = 3 * 1024 * 1024


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


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reviews = Counter(
            "imagecheck_reviews",
            "Admission reviews by outcome.",
            ["result"],
            registry=self.registry,
        )
        self.registry_requests = Counter(
            "imagecheck_registry_requests",
            "Requests to registries and token services, by kind and HTTP status.",
            ["kind", "status"],
            registry=self.registry,
        )
        self.cache = Counter(
            "imagecheck_cache_lookups", "Result cache lookups.", ["hit"], registry=self.registry
        )
        self.latency = Histogram(
            "imagecheck_review_duration_seconds",
            "Time to answer an admission review.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, message, and any ``extra`` fields."""

    _plain = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in self._plain})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class PodSecrets:
    """The pull secrets a reviewed pod names, read through the API and kept for a minute (a
    review per replica must not become an API call per replica). A secret that cannot be
    read is logged and left out: the review then goes on with the webhook's own credentials.
    """

    TTL = 60.0

    def __init__(self, kube: KubeClient, base: Keychain) -> None:
        self._kube, self._base = kube, base
        self._keychains: dict[tuple[str, tuple[str, ...]], tuple[float, Keychain | None]] = {}

    async def keychain(self, namespace: str, names: Sequence[str]) -> Keychain | None:
        key = (namespace, tuple(names))
        cached = self._keychains.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        texts = []
        for name in names:
            try:
                text = await asyncio.to_thread(self._kube.pull_secret_json, name, namespace)
            except ImagecheckError as exc:
                log.warning(
                    "pull secret not used",
                    extra={"secret": f"{namespace}/{name}", "error": str(exc)},
                )
                continue
            texts.append((text, f"secret {namespace}/{name}"))
        chain: Keychain | None = None
        if texts:
            try:
                pod = PullSecretKeychain.from_paths([], texts)
            except ImagecheckError as exc:
                log.warning("pull secrets not used", extra={"error": str(exc)})
            else:
                chain = ChainKeychain((pod, self._base))
        self._keychains[key] = (time.monotonic() + self.TTL, chain)
        return chain


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
            on_lookup=lambda hit: self.metrics.cache.labels("true" if hit else "false").inc(),
        )
        self.ready = False

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REVIEW_BYTES)
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
            body = await request.json(loads=json.loads)
            review = parse_review(body)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, BadReview: ValueErrors
            self.metrics.reviews.labels("bad_request").inc()
            message = str(exc) if isinstance(exc, BadReview) else "body is not JSON"
            log.warning("bad review", extra={"reason": message})
            return web.json_response({"error": message}, status=400)
        keychain, credentials = None, None
        if self.pod_secrets is not None and review.pull_secrets:
            keychain = await self.pod_secrets.keychain(review.namespace, review.pull_secrets)
            credentials = (review.namespace, tuple(review.pull_secrets)) if keychain else None
        results = await self.cache.results(distinct_images(review), deadline, keychain, credentials)
        verdict = decide(
            review,
            results,
            warn_only=self.settings.warn_only,
            errors_pass=self.settings.errors_pass,
        )
        elapsed = time.monotonic() - started
        self.metrics.reviews.labels(verdict.outcome).inc()
        self.metrics.latency.observe(elapsed)
        log.info(
            "review",
            extra={
                "uid": review.uid,
                "kind": review.kind,
                "namespace": review.namespace,
                "object": review.name,
                "images": len(results),
                "allowed": verdict.allowed,
                "outcome": verdict.outcome,
                "reason": verdict.message or None,
                "elapsed_ms": round(elapsed * 1000, 1),
            },
        )
        return web.json_response(response(review.uid, verdict))

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, request: web.Request) -> web.Response:
        return web.Response(
            text="ready\n" if self.ready else "starting\n", status=200 if self.ready else 503
        )

    async def metrics_page(self, request: web.Request) -> web.Response:
        data = generate_latest(self.metrics.registry)
        return web.Response(body=data, headers={"Content-Type": CONTENT_TYPE_LATEST})


class CertReloader:
    """Reloads the key pair into the live context when either file changes (cert-manager
    writes new files into the mounted secret; kubelet swaps them atomically).

    OpenSSL drops the old key before it finds that a new certificate does not match it, so a
    pair is first tried on a scratch context, and only a pair that loads goes live. Should the
    files change again in between and the live load fail, the last good pair (kept in
    memory) is put back: the server never ends up without a usable certificate.
    """

    def __init__(self, ctx: ssl.SSLContext, cert: Path, key: Path) -> None:
        self.ctx, self.cert, self.key = ctx, cert, key
        self._stamp = self._mtimes()
        self._good = (cert.read_bytes(), key.read_bytes())
        ctx.load_cert_chain(cert, key)

    def _mtimes(self) -> tuple[float, float]:
        return (self.cert.stat().st_mtime, self.key.stat().st_mtime)

    def reload_if_changed(self) -> bool:
        try:
            stamp = self._mtimes()
            if stamp == self._stamp:
                return False
            pair = (self.cert.read_bytes(), self.key.read_bytes())
            _load_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), pair)
        except (OSError, ssl.SSLError) as exc:
            log.error("certificate reload failed; keeping the old one", extra={"error": str(exc)})
            return False
        try:
            _load_pair(self.ctx, pair)
        except (OSError, ssl.SSLError) as exc:  # pragma: no cover - needs a racing writer
            _load_pair(self.ctx, self._good)
            log.error("certificate reload failed; restored the old one", extra={"error": str(exc)})
            return False
        self._stamp, self._good = stamp, pair
        log.info("certificate reloaded", extra={"cert": str(self.cert)})
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()


def _load_pair(ctx: ssl.SSLContext, pair: tuple[bytes, bytes]) -> None:
    """Load a certificate and key given as bytes, through memory files: nothing is written
    to disk (the root filesystem is read-only) and both come from one consistent read."""
    fds = [os.memfd_create("imagecheck-tls", os.MFD_CLOEXEC) for _ in pair]
    try:
        for fd, data in zip(fds, pair, strict=True):
            os.write(fd, data)
        ctx.load_cert_chain(f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}")
    finally:
        for fd in fds:
            os.close(fd)


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
        runner = web.AppRunner(webhook.app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port, ssl_context=ctx)
        await site.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        watcher = (
            asyncio.ensure_future(reloader.watch(settings.reload_interval)) if reloader else None
        )
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
            await runner.cleanup()
            if kube is not None:
                kube.close()
