"""``imagecheck gate`` without ``--once``: ``POST /mutate`` on ``--listen`` and the controller
(``cluster/_gate_loop.py``), behind leader election and with metrics when asked for.

When the webhook adds the gate (:class:`Readiness`): a gated pod waits for a controller, so
the gate is added only while one is known to be acting. With leader election every replica
serves ``/mutate`` and one leads: a replica answers ready while its own controller task runs
and the Lease it last read has a holder that renewed it within the Lease's duration, as
measured on this replica's clock (whichever replica holds it). Without leader election: while
its own controller runs and has listed within three resyncs. Otherwise the pod is admitted
ungated (and ``reap`` or the kubelet are what is left): a controller that is down never
strands new pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from imagecheck.cli._gatekeeper import gatekeeper_for
from imagecheck.errors import UsageError

if TYPE_CHECKING:
    from imagecheck.cli._settings import CheckSettings
    from imagecheck.cluster._gate import GateOptions, GateOutcome
    from imagecheck.cluster._gate_loop import GateLoop
    from imagecheck.cluster._lease import Elector

log = logging.getLogger("imagecheck")


@dataclass(frozen=True)
class RunOptions:
    listen: tuple[str, int]
    tls: tuple[Path, Path] | None
    metrics: tuple[str, int] | None
    lease: tuple[str, str | None] | None
    resync: float


class Readiness:
    """``ready()`` for the mutating webhook (see the module docstring)."""

    def __init__(self, loop: GateLoop, elector: Elector | None, stale_after: float) -> None:
        self.loop, self.elector, self.stale_after = loop, elector, stale_after
        self.running = False

    def __call__(self) -> bool:
        if not self.running:
            return False
        if self.elector is not None:
            return self.elector.led()
        listed = self.loop.listed_at
        return listed is not None and time.monotonic() - listed <= self.stale_after


async def main(
    factory: Callable[[], Any],
    options: GateOptions,
    settings: CheckSettings,
    echo: Callable[[GateOutcome], None],
    run: RunOptions,
) -> None:
    from imagecheck.cli._controller import elector_for  # noqa: PLC0415
    from imagecheck.cluster._gate_loop import GateLoop  # noqa: PLC0415
    from imagecheck.cluster._gate_metrics import GateMetrics  # noqa: PLC0415
    from imagecheck.cluster._reap_metrics import serve  # noqa: PLC0415

    cluster = await factory()
    metrics = GateMetrics(stale_after=3 * run.resync + 30)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(cluster.close)
        keeper = await stack.enter_async_context(gatekeeper_for(cluster, options, settings))
        loop = GateLoop(keeper, run.resync, echo, hooks=metrics)
        elector = elector_for(cluster, run.lease, metrics)
        ready = Readiness(loop, elector, 3 * run.resync + 30)
        if run.metrics is not None:
            runner = await _bound(serve(metrics, *run.metrics), "--metrics-listen", run.metrics)
            stack.push_async_callback(runner.cleanup)
        await stack.enter_async_context(_mutate_server(run, options.namespaces, ready))
        ready.running = True
        try:
            await (elector.run(loop.run) if elector is not None else loop.run())
        finally:
            ready.running = False


@contextlib.asynccontextmanager
async def _mutate_server(
    run: RunOptions, namespaces: frozenset[str] | None, ready: Callable[[], bool]
) -> AsyncIterator[None]:
    """``POST /mutate`` on serve's server machinery: the request framer answers a review in
    the turn it arrives, with serve's bounds on connections, reading and review size."""
    from imagecheck.cluster._model import GATE  # noqa: PLC0415
    from imagecheck.fastpath import Listener, handler_options  # noqa: PLC0415
    from imagecheck.webhook import MUTATE_PATHS, MutateEndpoint  # noqa: PLC0415
    from imagecheck.webhook._limits import (  # noqa: PLC0415
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_READ_TIMEOUT,
        MAX_REVIEW_BYTES,
    )

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    endpoint = MutateEndpoint(gate=GATE, namespaces=namespaces, ready=ready)
    ctx, watcher = _tls(run.tls)
    listener = Listener(
        ssl_context=ctx,
        max_connections=DEFAULT_MAX_CONNECTIONS,
        read_timeout=DEFAULT_READ_TIMEOUT,
        answer_now=endpoint.answer_now,
        review_paths=MUTATE_PATHS,
    )
    app = web.Application(client_max_size=MAX_REVIEW_BYTES, middlewares=[listener.middleware])
    app.add_routes([*endpoint.routes(), web.get("/healthz", healthz)])
    runner = web.AppRunner(app, handle_signals=False, **handler_options())
    await runner.setup()
    assert runner.server is not None
    try:
        await _bound(listener.start(runner.server, *run.listen), "--listen", run.listen)
        log.info("gate: serving POST /mutate on %s:%d", *run.listen)
        yield
    finally:
        if watcher is not None:
            watcher.cancel()
        await listener.stop()
        await runner.cleanup()
        listener.abort_all()


def _tls(pair: tuple[Path, Path] | None) -> tuple[ssl.SSLContext | None, asyncio.Task[None] | None]:
    """The server's TLS context, its key pair reloaded when the files change (as serve's)."""
    if pair is None:
        return None, None
    from imagecheck.webhook._tls import CertReloader  # noqa: PLC0415

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        reloader = CertReloader(ctx, *pair)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot use --tls-cert/--tls-key: {exc}") from None
    return ctx, asyncio.ensure_future(reloader.watch(10.0))


async def _bound(start: Any, flag: str, address: tuple[str, int]) -> Any:
    try:
        return await start
    except OSError as exc:
        raise UsageError(f"cannot serve {flag} {address[0]}:{address[1]}: {exc.strerror}") from None
