"""``imagecheck reap`` without ``--once``: a controller over the pods.

Listed, then watched, as client-go's informers do it:

1. list the pods (``Cluster.snapshot``), keeping only the stuck ones (a few strings each, at
   most ``max_stuck``), and act on those past ``--grace``: a full pass, as ``--once`` runs;
2. watch from the list's resourceVersion: a pod that becomes stuck is kept, one that is no
   longer stuck (pulled, deleted) is dropped, and each kept pod is acted on once, as soon as
   its grace is up (the wait for the next one is the loop's timeout, not a poll);
3. every ``resync`` seconds, list again and start over: what the watch missed (or what was
   left alone and may be acted on now: a Job's verdict was *error*) is judged afresh.

A watch's 410 Gone (its version compacted away) lists again at once; an API that cannot be
reached is retried after a backoff (1 s doubling to 60 s, reset by a good list); any other
refusal (403: RBAC) ends the loop with its message, so the pod's restarts show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from imagecheck.cluster._model import JSON, POD, Gone, Unreachable
from imagecheck.cluster._reap import Outcome, StuckPod
from imagecheck.cluster._reap_pass import Reaper, kept_stuck

log = logging.getLogger("imagecheck")

BACKOFF = (1.0, 60.0)  # seconds: the first wait after a failure, and the longest
# Watch events read ahead of the loop: a bound on memory, and backpressure on the stream.
QUEUE = 256
_END: tuple[str, JSON] = ("END", {})


class Hooks:
    """What the loop tells the outside (metrics, health); each does nothing here."""

    def passed(self) -> None: ...

    def api_error(self, error: Exception) -> None: ...

    def stuck(self, pods: Iterable[StuckPod]) -> None: ...

    def outcomes(self, outcomes: Iterable[Outcome]) -> None: ...


class ReapLoop:
    """Lists, watches, acts. ``uid -> StuckPod`` for the stuck pods; ``settled``: those acted
    on (or judged) since the last list, so a pod's status flapping between ErrImagePull and
    ImagePullBackOff does not ask the registry again."""

    def __init__(
        self,
        reaper: Reaper,
        resync: float,
        echo: Callable[[Outcome], None],
        *,
        hooks: Hooks | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.reaper = reaper
        self.resync = resync
        self.echo = echo
        self.hooks = hooks or Hooks()
        # What the pass goes on after (an Event refused) is counted with the loop's own.
        reaper.events.on_api_error = self.hooks.api_error
        self.monotonic = monotonic
        self.sleep = sleep
        self.stuck: dict[str, StuckPod] = {}
        self.settled: set[str] = set()
        self._full = False  # said once a list: more stuck pods than max_stuck

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
                log.info("reap: the watch's version is gone (%s); listing again", exc)
            except Unreachable as exc:
                self.hooks.api_error(exc)
                log.warning("reap: %s; listing again in %gs", exc, delay)
                await self.sleep(delay)
                delay = min(delay * 2, BACKOFF[1])

    async def relist(self) -> str:
        """A full pass: the stuck pods listed afresh, and acted on when due. The list's
        resourceVersion, to watch from."""
        listing = self.reaper.cluster.snapshot(POD, self.reaper.options.selector)
        self.stuck.clear()
        self.settled.clear()
        self._full = False
        async for pod in listing:
            self.apply("ADDED", pod)
        await self.act_on_due()
        self.hooks.passed()
        return listing.resource_version

    async def follow(self, version: str, until: float) -> None:
        """Apply the watch's changes from ``version`` until ``until`` (monotonic), acting on
        each stuck pod when its grace is up. Gone and Unreachable come through."""
        queue: asyncio.Queue[tuple[str, JSON] | BaseException] = asyncio.Queue(QUEUE)
        pump = asyncio.create_task(self._pump(version, queue))
        try:
            while (left := until - self.monotonic()) > 0:
                item: tuple[str, JSON] | BaseException | None = None
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
        selector = self.reaper.options.selector
        try:
            async with contextlib.aclosing(
                self.reaper.cluster.watch(POD, selector, version)  # type: ignore[type-var]
            ) as changes:
                async for change in changes:
                    await queue.put(change)
            await queue.put(_END)  # the stream ended (a real watch starts again itself)
        except (Gone, Unreachable) as exc:
            await queue.put(exc)

    def apply(self, change: str, pod: JSON) -> None:
        """One change to the pods: a stuck pod kept (up to ``max_stuck``), any other dropped."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        found = kept_stuck(pod) if change != "DELETED" else None
        key = uid or (found.path if found else "")
        if found is None:
            self.stuck.pop(key, None)
            self.settled.discard(key)
        elif key in self.stuck or len(self.stuck) < self.reaper.options.max_stuck:
            self.stuck[key] = found
        elif not self._full:
            self._full = True
            log.warning("more than %d stuck pods: the rest wait for the next list", len(self.stuck))
        self.hooks.stuck(self.stuck.values())

    async def act_on_due(self) -> None:
        """Act on the kept pods whose grace is up and that were not acted on since the list."""
        now = self.reaper.clock()
        grace = self.reaper.options.grace
        due = [
            (key, pod)
            for key, pod in self.stuck.items()
            if key not in self.settled and now - pod.since >= grace
        ]
        if not due:
            return
        outcomes = await self.reaper.act([pod for _, pod in due])
        self.settled.update(key for key, _ in due)
        for outcome in outcomes:
            self.echo(outcome)
        self.hooks.outcomes(outcomes)

    def _next_due(self) -> float:
        """Seconds until the next kept pod's grace is up (at least a millisecond)."""
        now = self.reaper.clock()
        grace = self.reaper.options.grace
        waits = [
            pod.since + grace - now for key, pod in self.stuck.items() if key not in self.settled
        ]
        return max(min(waits, default=self.resync), 0.001)
