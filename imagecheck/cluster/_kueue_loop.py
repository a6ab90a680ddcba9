"""``imagecheck kueue-check`` without ``--once``: a controller over AdmissionChecks and
Workloads, listed then watched as ``reap``'s loop does (client-go's informer pattern):

1. list our AdmissionChecks (each made Active) and the Workloads, judging every one that
   waits on one of ours: a full pass, as ``--once`` runs;
2. watch both from their lists' resourceVersions: a new check of ours is made Active, a
   Workload that comes to wait on one is judged at once. A Workload left in ``Retry`` is
   checked again on a backoff (:data:`RECHECK`, doubling), read afresh when it is due; the
   ``MODIFIED`` its own patch causes is not judged again meanwhile;
3. every ``resync`` seconds, list again and start over (a restart does the same: nothing is
   kept but a few strings per Workload in Retry, at most ``max_tracked``).

410 Gone lists again at once; an unreachable API after a backoff; a refusal (403) ends the
loop with its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import Counter, Gauge

from imagecheck.cluster._kueue import State, ours
from imagecheck.cluster._kueue_pass import KueueChecker, Outcome
from imagecheck.cluster._model import (
    ADMISSION_CHECK,
    JSON,
    WORKLOAD,
    Gone,
    Kind,
    Selector,
    Unreachable,
)
from imagecheck.cluster._reap_loop import BACKOFF, QUEUE
from imagecheck.cluster._reap_metrics import ControllerMetrics

log = logging.getLogger("imagecheck")

RECHECK = (5.0, 60.0)  # seconds: the first recheck of a Workload in Retry, and the longest


class KueueMetrics(ControllerMetrics):
    """``/metrics`` of the loop. Labels are bounded: a state (four), a verdict (five), an
    error class (five); never a Workload or an image."""

    def __init__(self, stale_after: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__("kueue", stale_after, monotonic)
        self.states = Counter(
            "imagecheck_kueue_states_set",
            "Admission check states set, by state and the images' worst verdict.",
            ["state", "verdict"],
            registry=self.registry,
        )
        self.retrying = Gauge(
            "imagecheck_kueue_workloads_retrying",
            "Workloads in Retry, checked again on a backoff.",
            registry=self.registry,
        )

    def outcome(self, outcome: Outcome) -> None:
        if outcome.written:
            self.states.labels(outcome.state, outcome.verdict.value).inc()


class KueueLoop:
    """Lists, watches, judges. ``due``: (namespace, name) -> (monotonic time of the next
    check, rechecks so far) for the Workloads in Retry."""

    def __init__(
        self,
        judge: KueueChecker,
        resync: float,
        echo: Callable[[Outcome], None],
        *,
        metrics: KueueMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.judge, self.resync, self.echo, self.metrics = judge, resync, echo, metrics
        self.monotonic, self.sleep = monotonic, sleep
        self.due: dict[tuple[str, str], tuple[float, int]] = {}

    async def run(self, lists: int | None = None) -> None:
        """List and watch, ``lists`` times (None: until cancelled)."""
        delay, done = BACKOFF[0], 0
        while lists is None or done < lists:
            done += 1
            try:
                versions = await self.relist()
                delay = BACKOFF[0]
                await self.follow(versions, self.monotonic() + self.resync)
            except (Gone, Unreachable) as exc:
                if self.metrics:
                    self.metrics.api_error(exc)
                wait = 0.0 if isinstance(exc, Gone) else delay
                log.warning("kueue-check: %s; listing again in %gs", exc, wait)
                await self.sleep(wait)
                delay = delay if isinstance(exc, Gone) else min(delay * 2, BACKOFF[1])

    async def relist(self) -> dict[Kind, str]:
        """A full pass; the lists' resourceVersions, to watch from."""
        checks_version = await self.judge.refresh_checks()
        self.due.clear()
        workloads = self.judge.cluster.snapshot(WORKLOAD, self._selector())
        async for workload in workloads:
            await self._workload(workload)
        if self.metrics:
            self.metrics.passed()
        return {ADMISSION_CHECK: checks_version, WORKLOAD: workloads.resource_version}

    async def follow(self, versions: dict[Kind, str], until: float) -> None:
        """Apply both watches' changes until ``until`` (monotonic), rechecking what is due."""
        queue: asyncio.Queue[tuple[Kind, str, JSON] | BaseException] = asyncio.Queue(QUEUE)
        pumps = [asyncio.create_task(self._pump(k, v, queue)) for k, v in versions.items()]
        try:
            while (left := until - self.monotonic()) > 0:
                item: tuple[Kind, str, JSON] | BaseException | None = None
                with contextlib.suppress(TimeoutError):
                    item = await asyncio.wait_for(queue.get(), min(left, self._next_due()))
                if isinstance(item, BaseException):
                    raise item
                if item is not None:
                    await self.apply(*item)
                await self.recheck_due()
        finally:
            for pump in pumps:
                pump.cancel()
            for pump in pumps:
                with contextlib.suppress(asyncio.CancelledError):
                    await pump

    async def _pump(self, kind: Kind, version: str, queue: asyncio.Queue[Any]) -> None:
        selector = self._selector() if kind is WORKLOAD else Selector()
        try:
            watch = self.judge.cluster.watch(kind, selector, version)
            async with contextlib.aclosing(watch) as changes:  # type: ignore[type-var]
                async for change, obj in changes:
                    await queue.put((kind, change, obj))
        except (Gone, Unreachable) as exc:
            await queue.put(exc)

    async def apply(self, kind: Kind, change: str, obj: JSON) -> None:
        if kind is ADMISSION_CHECK:
            if change == "DELETED":
                self.judge.checks.discard(obj["metadata"]["name"])
            elif ours(obj, self.judge.options.controller_name):
                self.judge.checks.add(obj["metadata"]["name"])
                await self.judge.admission_check(obj)
            return
        key = _key(obj)
        if change == "DELETED":
            self.due.pop(key, None)
        elif key not in self.due:  # one in Retry waits for its recheck
            await self._workload(obj)

    async def recheck_due(self) -> None:
        now = self.monotonic()
        for key in [k for k, (at, _) in self.due.items() if at <= now]:
            workload = await self.judge.cluster.get(WORKLOAD, *key)
            _, tries = self.due.pop(key)
            if workload is not None:
                await self._workload(workload, tries + 1)

    async def _workload(self, workload: JSON, tries: int = 0) -> None:
        outcomes = await self.judge.judge(workload)
        for outcome in outcomes:
            self.echo(outcome)
            if self.metrics:
                self.metrics.outcome(outcome)
        retrying = any(o.state == State.RETRY for o in outcomes)
        if retrying and len(self.due) < self.judge.options.max_tracked:
            wait = min(RECHECK[0] * 2**tries, RECHECK[1])
            self.due[_key(workload)] = (self.monotonic() + wait, tries)
        if self.metrics:
            self.metrics.retrying.set(len(self.due))

    def _next_due(self) -> float:
        now = self.monotonic()
        return max(min((at - now for at, _ in self.due.values()), default=self.resync), 0.001)

    def _selector(self) -> Selector:
        return Selector(self.judge.options.namespace)


def _key(workload: JSON) -> tuple[str, str]:
    meta = workload["metadata"]
    return (str(meta.get("namespace", "")), str(meta["name"]))
