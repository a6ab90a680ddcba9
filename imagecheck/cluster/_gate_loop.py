"""``imagecheck gate`` without ``--once``: a controller over the gated pods, listed then
watched as ``reap_loop.py`` does it (a full list every ``resync``; a 410 Gone lists again at
once; an unreachable API is retried after a backoff; a refusal ends the loop).

Nothing is kept but what the cluster says: a restarted controller lists the gated pods and
goes on (each pod's age is its ``creationTimestamp``, so ``wait`` and the maximum gate age
count from the same moment whoever looks). Memory is bounded: at most ``max_tracked`` pods,
a few strings each.

Each tracked pod has a time it is due to be checked: at once when it appears; after being
kept, again on a backoff (:data:`FAST` while ``wait`` runs: a tag being pushed shows up
within a second or two of its push; :data:`SLOW` after it, for the pods of Deployments and
the like that stay gated until the image appears), never later than its maximum gate age.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from imagecheck.cluster._gate import GatedPod, GateOutcome
from imagecheck.cluster._gate_pass import Gatekeeper
from imagecheck.cluster._model import JSON, POD, Gone, Unreachable
from imagecheck.cluster._reap_loop import BACKOFF, QUEUE

log = logging.getLogger("imagecheck")

FAST = (1.0, 10.0)  # seconds: the first re-check within wait, and the longest
SLOW = (30.0, 300.0)  # after wait: a pod kept until its image appears
_END: tuple[str, JSON, float] = ("END", {}, 0.0)


class GateHooks:
    """What the loop tells the outside (metrics, readiness); each does nothing here."""

    def passed(self) -> None: ...

    def api_error(self, error: Exception) -> None: ...

    def gated(self, pods: dict[str, GatedPod], now: float) -> None: ...

    def outcome(self, outcome: GateOutcome) -> None: ...


class GateLoop:
    """Lists, watches, acts. ``tracked``: uid -> gated pod; ``due``: uid -> when (the
    keeper's clock) to check it next; ``tries``: re-checks so far, for the backoff."""

    def __init__(
        self,
        keeper: Gatekeeper,
        resync: float,
        echo: Callable[[GateOutcome], None],
        *,
        hooks: GateHooks | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.keeper = keeper
        self.resync = resync
        self.echo = echo
        self.hooks = hooks or GateHooks()
        keeper.events.on_api_error = self.hooks.api_error
        self.monotonic = monotonic
        self.sleep = sleep
        self.tracked: dict[str, GatedPod] = {}
        self.due: dict[str, float] = {}
        self.tries: dict[str, int] = {}
        self.seen: dict[str, float] = {}  # uid -> when (monotonic) its first change arrived
        keeper.lifted = self._lifted
        self.listed_at: float | None = None  # monotonic, the last full list

    async def run(self, lists: int | None = None) -> None:
        """List and watch, ``lists`` times (None: until cancelled)."""
        delay = BACKOFF[0]
        done = 0
        while lists is None or done < lists:
            done += 1
            try:
                version = await self.relist()
                delay = BACKOFF[0]
                await self.follow(version, self.monotonic() + self.resync)
            except Gone as exc:
                self.hooks.api_error(exc)
                log.info("gate: the watch's version is gone (%s); listing again", exc)
            except Unreachable as exc:
                self.hooks.api_error(exc)
                log.warning("gate: %s; listing again in %gs", exc, delay)
                await self.sleep(delay)
                delay = min(delay * 2, BACKOFF[1])

    async def relist(self) -> str:
        """The gated pods listed afresh (each due at once), and acted on."""
        listing = self.keeper.cluster.snapshot(POD, self.keeper.options.selector)
        self.tracked.clear()
        self.due.clear()
        self.tries.clear()
        self.seen.clear()
        async for pod in listing:
            self.apply("ADDED", pod)
        await self.act_on_due()
        self.listed_at = self.monotonic()
        self.hooks.passed()
        return listing.resource_version

    async def follow(self, version: str, until: float) -> None:
        """Apply the watch's changes from ``version`` until ``until`` (monotonic), acting on
        each pod when it is due."""
        queue: asyncio.Queue[tuple[str, JSON, float] | BaseException] = asyncio.Queue(QUEUE)
        pump = asyncio.create_task(self._pump(version, queue))
        try:
            while (left := until - self.monotonic()) > 0:
                item: tuple[str, JSON, float] | BaseException | None = None
                with contextlib.suppress(TimeoutError):
                    item = await asyncio.wait_for(queue.get(), min(left, self._next_due()))
                if isinstance(item, BaseException):
                    raise item
                if item is not None and item is not _END:
                    self.apply(*item)
                await self.act_on_due()
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump

    async def _pump(self, version: str, queue: asyncio.Queue[Any]) -> None:
        selector = self.keeper.options.selector
        try:
            async with contextlib.aclosing(
                self.keeper.cluster.watch(POD, selector, version)  # type: ignore[type-var]
            ) as changes:
                async for change, pod in changes:
                    await queue.put((change, pod, self.monotonic()))
            await queue.put(_END)
        except (Gone, Unreachable) as exc:
            await queue.put(exc)

    def apply(self, change: str, pod: JSON, arrived: float | None = None) -> None:
        """One change: a gated pod tracked (due at once when new), any other dropped.
        ``arrived``: when (monotonic) the watch handed it over; None: now."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        found = self.keeper.kept(pod) if change != "DELETED" else None
        key = uid or (found.path if found else "")
        if found is None:
            self._drop(key)
        elif key in self.tracked:
            self.tracked[key] = found
        elif len(self.tracked) < self.keeper.options.max_tracked:
            self.tracked[key] = found
            self.due[key] = self.keeper.clock()
            self.seen[key] = self.monotonic() if arrived is None else arrived
        self.hooks.gated(self.tracked, self.keeper.clock())

    def _drop(self, key: str) -> None:
        self.tracked.pop(key, None)
        self.due.pop(key, None)
        self.tries.pop(key, None)
        self.seen.pop(key, None)

    async def act_on_due(self) -> None:
        now = self.keeper.clock()
        due = [(k, p) for k, p in self.tracked.items() if self.due.get(k, now) <= now]
        if not due:
            return
        outcomes = await self.keeper.act([pod for _, pod in due])
        for (key, pod), outcome in zip(due, outcomes, strict=True):
            self.echo(outcome)
            self.hooks.outcome(outcome)
            if outcome.done and not outcome.dry_run and outcome.action.value != "kept":
                self._drop(key)  # released, or its Job failed: the watch says the rest
            else:
                self.due[key] = self._next_check(key, pod, now)
        self.hooks.gated(self.tracked, self.keeper.clock())

    def _lifted(self, pod: GatedPod, sent: float) -> None:
        """A debug line with the controller's own share of a pod's wait: from its change
        arriving to the patch that lifted the gate being sent (what the latency benchmark
        reads; the API's and the scheduler's shares are not the controller's to measure)."""
        seen = self.seen.get(pod.uid or pod.path)
        if seen is not None:
            log.debug("gate: pod %s: gate lifted by a patch sent %.3f ms after its change "
                      "arrived", pod.path, (sent - seen) * 1000)  # fmt: skip

    def _next_check(self, key: str, pod: GatedPod, now: float) -> float:
        tries = self.tries[key] = self.tries.get(key, 0) + 1
        options = self.keeper.options
        first, longest = FAST if now - pod.since < options.wait else SLOW
        after: float = min(first * 2.0 ** (tries - 1), longest)
        return min(now + after, pod.since + options.max_gate_age)

    def _next_due(self) -> float:
        """Seconds until the next tracked pod is due (at least a millisecond)."""
        now = self.keeper.clock()
        soonest: float = min((t - now for t in self.due.values()), default=self.resync)
        return max(soonest, 0.001)
