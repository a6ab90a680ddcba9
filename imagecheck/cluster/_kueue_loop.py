"""``imagecheck kueue-check`` without ``--once``: a controller over AdmissionChecks and
Workloads, on the list+watch skeleton (``listwatch.py``, client-go's informer pattern):

1. list our AdmissionChecks (each made Active) and the Workloads, judging every one that
   waits on one of ours: a full pass, as ``--once`` runs;
2. watch both from their lists' resourceVersions: a new check of ours is made Active, a
   Workload that comes to wait on one is judged at once. A Workload left in ``Retry`` is
   checked again on a backoff (:data:`RECHECK`, doubling), read afresh when it is due; the
   ``MODIFIED`` its own patch causes is not judged again meanwhile;
3. every ``resync`` seconds, list again and start over (a restart does the same: nothing is
   kept but a few strings per Workload in Retry, at most ``max_tracked``).

"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from prometheus_client import Counter, Gauge

from imagecheck.cluster._kueue import State, ours
from imagecheck.cluster._kueue_pass import KueueChecker, Outcome
from imagecheck.cluster._listwatch import ListWatchLoop
from imagecheck.cluster._model import (
    ADMISSION_CHECK,
    JSON,
    WORKLOAD,
    Kind,
    Selector,
)
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


class KueueLoop(ListWatchLoop[dict[Kind, str]]):
    """Lists, watches, judges. ``due``: (namespace, name) -> (monotonic time of the next
    check, rechecks so far) for the Workloads in Retry."""

    name = "kueue-check"

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
        super().__init__(judge.cluster, resync, monotonic=monotonic, sleep=sleep)
        self.judge, self.echo, self.metrics = judge, echo, metrics
        self.due: dict[tuple[str, str], tuple[float, int]] = {}

    def api_error(self, error: Exception) -> None:
        if self.metrics:
            self.metrics.api_error(error)

    def selector(self, kind: Kind) -> Selector:
        return self._selector() if kind is WORKLOAD else Selector()

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
        await self.watch(versions, until)

    async def changed(self, kind: Kind, change: str, obj: JSON) -> None:
        await self.apply(kind, change, obj)

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

    async def act_on_due(self) -> None:
        """Read again, and judge again, the Workloads in Retry whose recheck is due."""
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
