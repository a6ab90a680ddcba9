"""``imagecheck reap`` without ``--once``: a controller over the pods, on the list+watch
skeleton (``listwatch.py``):

1. list the pods (``Cluster.snapshot``), keeping only the stuck ones (a few strings each, at
   most ``max_stuck``), and act on those past ``--grace``: a full pass, as ``--once`` runs;
2. watch from the list's resourceVersion: a pod that becomes stuck is kept, one that is no
   longer stuck (pulled, deleted) is dropped, and each kept pod is acted on once, as soon as
   its grace is up (the wait for the next one is the loop's timeout, not a poll);
3. every ``resync`` seconds, list again and start over: what the watch missed (or what was
   left alone and may be acted on now: a Job's verdict was *error*) is judged afresh.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from imagecheck.cluster._listwatch import ListWatchLoop
from imagecheck.cluster._model import JSON, POD, Kind, Selector
from imagecheck.cluster._reap import Outcome, StuckPod
from imagecheck.cluster._reap_pass import Reaper, kept_stuck

log = logging.getLogger("imagecheck")


class Hooks:
    """What the loop tells the outside (metrics, health); each does nothing here."""

    def passed(self) -> None: ...

    def api_error(self, error: Exception) -> None: ...

    def stuck(self, pods: Iterable[StuckPod]) -> None: ...

    def outcomes(self, outcomes: Iterable[Outcome]) -> None: ...


class ReapLoop(ListWatchLoop[str]):
    """Lists, watches, acts. ``uid -> StuckPod`` for the stuck pods; ``settled``: those acted
    on (or judged) since the last list, so a pod's status flapping between ErrImagePull and
    ImagePullBackOff does not ask the registry again."""

    name = "reap"

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
        super().__init__(reaper.cluster, resync, monotonic=monotonic, sleep=sleep)
        self.reaper = reaper
        self.echo = echo
        self.hooks = hooks or Hooks()
        # What the pass goes on after (an Event refused) is counted with the loop's own.
        reaper.events.on_api_error = self.hooks.api_error
        self.stuck: dict[str, StuckPod] = {}
        self.settled: set[str] = set()
        self._full = False  # said once a list: more stuck pods than max_stuck

    def api_error(self, error: Exception) -> None:
        self.hooks.api_error(error)

    def selector(self, kind: Kind) -> Selector:
        return self.reaper.options.selector

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
        await self.watch({POD: version}, until)

    async def changed(self, kind: Kind, change: str, obj: JSON) -> None:
        self.apply(change, obj)

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
