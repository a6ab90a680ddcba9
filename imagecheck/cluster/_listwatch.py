"""The list+watch skeleton of the cluster controllers (``reap``, ``gate``, ``kueue-check``),
client-go's informer pattern:

1. list (the subclass's :meth:`ListWatchLoop.relist`), judging what it keeps: a full pass;
2. watch each listed kind from its list's resourceVersion, applying every change
   (:meth:`~ListWatchLoop.changed`) and acting on what is due
   (:meth:`~ListWatchLoop.act_on_due`); the wait for the next change is bounded by the
   time until something is due (:meth:`~ListWatchLoop._next_due`), so nothing is polled;
3. every ``resync`` seconds, list again and start over: what a watch missed is judged afresh.

A watch's 410 Gone (its version compacted away) lists again at once; an API that cannot be
reached is retried after a backoff (1 s doubling to 60 s, reset by a good list); any other
refusal (403: RBAC) ends the loop with its message, so the pod's restarts show it.

What each controller keeps, and when it acts, is its own; this module owns only the loop.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from imagecheck.cluster._model import JSON, Gone, Kind, Selector, Unreachable

log = logging.getLogger("imagecheck")

BACKOFF = (1.0, 60.0)  # seconds: the first wait after a failure, and the longest
# Watch events read ahead of the loop: a bound on memory, and backpressure on the stream.
QUEUE = 256
# Put when a watch's stream ends (a real watch starts again itself): wakes the loop only.
_END = "END"

Versions = TypeVar("Versions")
_Item = tuple[Kind, str, JSON] | BaseException


class Watcher(Protocol):
    """What the loop needs of the cluster: a watch (the lists are the subclass's)."""

    def watch(
        self, kind: Kind, selector: Selector, resource_version: str
    ) -> AsyncIterator[tuple[str, JSON]]: ...


class ListWatchLoop(abc.ABC, Generic[Versions]):
    """Lists, watches, acts. ``Versions`` is what :meth:`relist` returns and :meth:`follow`
    takes (one resourceVersion, or one a kind); ``name`` starts the loop's log lines."""

    name = "controller"

    def __init__(
        self,
        cluster: Watcher,
        resync: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.watcher = cluster
        self.resync = resync
        self.monotonic = monotonic
        self.sleep = sleep

    async def run(self, lists: int | None = None) -> None:
        """List and watch, ``lists`` times (None: until cancelled)."""
        delay = BACKOFF[0]
        done = 0
        while lists is None or done < lists:
            done += 1
            try:
                versions = await self.relist()
                delay = BACKOFF[0]
                await self.follow(versions, self.monotonic() + self.resync)
            except Gone as exc:
                self.api_error(exc)
                log.info("%s: the watch's version is gone (%s); listing again", self.name, exc)
            except Unreachable as exc:
                self.api_error(exc)
                log.warning("%s: %s; listing again in %gs", self.name, exc, delay)
                await self.sleep(delay)
                delay = min(delay * 2, BACKOFF[1])

    @abc.abstractmethod
    async def relist(self) -> Versions:
        """A full pass over what is listed afresh; the resourceVersions to watch from."""

    @abc.abstractmethod
    async def follow(self, versions: Versions, until: float) -> None:
        """Watch from ``versions`` until ``until``: :meth:`watch`, with the kinds named."""

    @abc.abstractmethod
    def selector(self, kind: Kind) -> Selector:
        """What the watch of ``kind`` picks (as its list did)."""

    @abc.abstractmethod
    async def changed(self, kind: Kind, change: str, obj: JSON) -> None:
        """One change a watch brought ("ADDED" | "MODIFIED" | "DELETED")."""

    @abc.abstractmethod
    async def act_on_due(self) -> None:
        """Act on what is due now."""

    @abc.abstractmethod
    def _next_due(self) -> float:
        """Seconds until something is due (at least a millisecond)."""

    def api_error(self, error: Exception) -> None:
        """An API failure the loop goes on after (metrics count it); nothing here."""

    async def watch(self, versions: Mapping[Kind, str], until: float) -> None:
        """Apply the watches' changes from ``versions`` until ``until`` (monotonic), acting on
        what is due. Gone and Unreachable come through."""
        queue: asyncio.Queue[_Item | str] = asyncio.Queue(QUEUE)
        pumps = [asyncio.create_task(self._pump(k, v, queue)) for k, v in versions.items()]
        try:
            while (left := until - self.monotonic()) > 0:
                item: _Item | str | None = None
                # asyncio.timeout, not wait_for: Python 3.11's wait_for returns an item that
                # arrives as the task is cancelled and drops the cancellation, so a SIGTERM
                # during a burst of changes left the loop running.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, self._next_due())):
                        item = await queue.get()
                # What else has arrived is taken too, so that a burst is acted on together
                # (one registry request an image, not one a pod), bounded by the queue.
                for taken in (item, *_drained(queue)):
                    if isinstance(taken, BaseException):
                        raise taken
                    if isinstance(taken, tuple):
                        await self.changed(*taken)
                await self.act_on_due()
        finally:
            for pump in pumps:
                pump.cancel()
            for pump in pumps:
                with contextlib.suppress(asyncio.CancelledError):
                    await pump

    async def _pump(self, kind: Kind, version: str, queue: asyncio.Queue[Any]) -> None:
        try:
            watch = self.watcher.watch(kind, self.selector(kind), version)
            async with contextlib.aclosing(watch) as changes:  # type: ignore[type-var]
                async for change, obj in changes:
                    await queue.put((kind, change, obj))
            await queue.put(_END)
        except (Gone, Unreachable) as exc:
            await queue.put(exc)


def _drained(queue: asyncio.Queue[_Item | str]) -> list[_Item | str]:
    """Everything the queue holds now, without waiting."""
    taken: list[_Item | str] = []
    while True:
        try:
            taken.append(queue.get_nowait())
        except asyncio.QueueEmpty:
            return taken
