"""``imagecheck reap`` without ``--once``: the loop (``cluster/reap_loop.py``), behind leader
election (``cluster/lease.py``) and with metrics (``cluster/reap_metrics.py``) when asked for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagecheck.cli._reaper import reaper_for
from imagecheck.errors import UsageError

if TYPE_CHECKING:
    from imagecheck.cli._settings import CheckSettings
    from imagecheck.cluster import Cluster, Hooks, Outcome, ReapMetrics, ReapOptions


@dataclass(frozen=True)
class LoopOptions:
    """The loop's own options: resync, the Lease (name, namespace), where metrics listen."""

    resync: float
    lease: tuple[str, str | None] | None = None
    listen: tuple[str, int] | None = None


async def controller(
    cluster: Cluster,
    reap_options: ReapOptions,
    settings: CheckSettings,
    echo: Callable[[Outcome], None],
    loop: LoopOptions,
) -> None:
    """The loop, behind leader election and with metrics when asked for."""
    from imagecheck.cli._controller import elected  # noqa: PLC0415

    metrics, runner = await _metrics(loop)
    try:

        async def work() -> None:
            await reap_loop(cluster, reap_options, settings, echo, loop.resync, hooks=metrics)

        await elected(cluster, loop.lease, metrics, work)
    finally:
        if runner is not None:
            await runner.cleanup()


async def _metrics(loop: LoopOptions) -> tuple[ReapMetrics | None, Any]:
    """The metrics and their server (None, None without --metrics-listen)."""
    if loop.listen is None:
        return None, None
    try:
        from imagecheck.cluster import ReapMetrics  # noqa: PLC0415
        from imagecheck.cluster._reap_metrics import serve  # noqa: PLC0415
    except ImportError:
        raise UsageError(
            "--metrics-listen needs the cluster extra: pip install 'imagecheck[cluster]'"
        ) from None
    # Healthy while a list (or, for a follower, a Lease round) happened in 3 resyncs' time.
    metrics = ReapMetrics(stale_after=3 * loop.resync + 30)
    host, port = loop.listen
    try:
        runner = await serve(metrics, host, port)
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc.strerror}") from None
    return metrics, runner


async def reap_loop(
    cluster: Cluster,
    reap_options: ReapOptions,
    settings: CheckSettings,
    echo: Callable[[Outcome], None],
    resync: float,
    *,
    lists: int | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    hooks: Hooks | None = None,
) -> None:
    """List and watch (``cluster/reap_loop.py``), ``lists`` times (None: until cancelled).
    An API that cannot be reached is retried after a backoff; a refusal (RBAC) ends the
    loop, so the pod's restarts show the message."""
    from imagecheck.cluster import ReapLoop  # noqa: PLC0415

    async with reaper_for(cluster, reap_options, settings) as reaper:
        await ReapLoop(reaper, resync, echo, hooks=hooks, sleep=sleep).run(lists)
