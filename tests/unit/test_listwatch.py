"""The controllers' list+watch skeleton: a cancellation (SIGTERM) ends it however busy its
watch is, and a burst of changes is acted on together."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

from imagecheck.cluster._listwatch import ListWatchLoop
from imagecheck.cluster._model import JSON, POD, Kind, Selector


class Firehose:
    """A watch that never pauses for long: a change every event-loop turn."""

    async def watch(
        self, kind: Kind, selector: Selector, resource_version: str
    ) -> AsyncIterator[tuple[str, JSON]]:
        for n in itertools.count():
            await asyncio.sleep(0)
            yield "MODIFIED", {"metadata": {"name": f"p{n}", "resourceVersion": str(n)}}


class Counting(ListWatchLoop[str]):
    def __init__(self) -> None:
        super().__init__(Firehose(), resync=3600)
        self.changes = 0
        self.acts: list[int] = []  # changes taken before each act

    async def relist(self) -> str:
        return "0"

    async def follow(self, versions: str, until: float) -> None:
        await self.watch({POD: versions}, until)

    def selector(self, kind: Kind) -> Selector:
        return Selector()

    async def changed(self, kind: Kind, change: str, obj: JSON) -> None:
        self.changes += 1

    async def act_on_due(self) -> None:
        self.acts.append(self.changes)
        await asyncio.sleep(0.001)  # acting takes a while: changes pile up meanwhile

    def _next_due(self) -> float:
        return 0.001  # something is always nearly due: the wait is short and often


def test_a_cancellation_ends_the_loop_however_busy_its_watch_is() -> None:
    """Python 3.11's ``wait_for`` returned an item that arrived as the task was cancelled, and
    dropped the cancellation: a SIGTERM during a burst left the controller running."""

    async def main() -> None:
        for _ in range(20):  # the race is narrow: cancel at many points of the loop
            loop = Counting()
            task = asyncio.ensure_future(loop.run())
            await asyncio.sleep(0.05)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=2)
            assert task in done, "the loop went on after it was cancelled"
            assert task.cancelled()

    asyncio.run(main())


def test_changes_that_arrived_meanwhile_are_acted_on_together() -> None:
    async def main() -> Counting:
        loop = Counting()
        task = asyncio.ensure_future(loop.run())
        await asyncio.sleep(0.3)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return loop

    loop = asyncio.run(main())
    steps = [b - a for a, b in itertools.pairwise(loop.acts)]
    assert max(steps) > 1  # more than one change taken before an act
    assert len(loop.acts) < loop.changes
