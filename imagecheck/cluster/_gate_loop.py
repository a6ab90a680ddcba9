"""``imagecheck gate`` without ``--once``: a controller over the gated pods, listed then
watched on the list+watch skeleton (``listwatch.py``: a full list every ``resync``; a 410
Gone lists again at once; an unreachable API is retried after a backoff; a refusal ends the
loop).

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
import logging
import time
from collections.abc import Awaitable, Callable

from imagecheck.cluster._gate import GatedPod, GateOutcome
from imagecheck.cluster._gate_pass import Gatekeeper
from imagecheck.cluster._listwatch import ListWatchLoop
from imagecheck.cluster._model import JSON, POD, Kind, Selector

log = logging.getLogger("imagecheck")

FAST = (1.0, 10.0)  # seconds: the first re-check within wait, and the longest
SLOW = (30.0, 300.0)  # after wait: a pod kept until its image appears


class GateHooks:
    """What the loop tells the outside (metrics, readiness); each does nothing here."""

    def passed(self) -> None: ...

    def api_error(self, error: Exception) -> None: ...

    def gated(self, pods: dict[str, GatedPod], now: float) -> None: ...

    def outcome(self, outcome: GateOutcome) -> None: ...


class GateLoop(ListWatchLoop[str]):
    """Lists, watches, acts. ``tracked``: uid -> gated pod; ``due``: uid -> when (the
    keeper's clock) to check it next; ``tries``: re-checks so far, for the backoff."""

    name = "gate"

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
        super().__init__(keeper.cluster, resync, monotonic=monotonic, sleep=sleep)
        self.keeper = keeper
        self.echo = echo
        self.hooks = hooks or GateHooks()
        keeper.events.on_api_error = self.hooks.api_error
        self.tracked: dict[str, GatedPod] = {}
        self.due: dict[str, float] = {}
        self.tries: dict[str, int] = {}
        self.seen: dict[str, float] = {}  # uid -> when (monotonic) its first change was taken
        keeper.lifted = self._lifted
        self.listed_at: float | None = None  # monotonic, the last full list

    def api_error(self, error: Exception) -> None:
        self.hooks.api_error(error)

    def selector(self, kind: Kind) -> Selector:
        return self.keeper.options.selector

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
        await self.watch({POD: version}, until)

    async def changed(self, kind: Kind, change: str, obj: JSON) -> None:
        self.apply(change, obj)

    def apply(self, change: str, pod: JSON) -> None:
        """One change: a gated pod tracked (due at once when new), any other dropped."""
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
            self.seen[key] = self.monotonic()
        self.hooks.gated(self.tracked, self.keeper.clock())

    def _drop(self, key: str) -> None:
        self.tracked.pop(key, None)
        self.due.pop(key, None)
        self.tries.pop(key, None)
        self.seen.pop(key, None)

    def _lifted(self, pod: GatedPod, sent: float) -> None:
        """A debug line with the controller's own share of a pod's wait: from its change being
        taken off the watch to the patch that lifted the gate being sent (what the latency
        benchmark reads; the API's and the scheduler's shares are not the controller's)."""
        seen = self.seen.get(pod.uid or pod.path)
        if seen is not None:
            log.debug("gate: pod %s: gate lifted by a patch sent %.3f ms after its change "
                      "arrived", pod.path, (sent - seen) * 1000)  # fmt: skip

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
