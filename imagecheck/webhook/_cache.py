"""Check results shared across admission reviews.

A webhook sees the same images again and again (every replica, every rollout), so answers are
kept (for how long each kind stays true: ``_store``), and concurrent reviews of an image not
kept share one registry request.

The work is bounded, since any pod's author can make the webhook ask a registry: a review has at
most ``max_images`` distinct images checked (the rest are *not checked*), at most
``concurrency`` of them at once, and all reviews share ``concurrency`` registry slots (the size
of the checker's connection pool, which so never has thousands of waiters). The review's
deadline holds whatever is still queued: an image queued behind the review's own others is *not
checked*; one waiting for a slot that other reviews hold, or whose registry has not answered, is
an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace

from imagecheck._deadline import Deadline
from imagecheck.authn import Keychain
from imagecheck.reference import Reference, parse_reference
from imagecheck.registry import ImageChecker
from imagecheck.result import CheckResult, Status
from imagecheck.webhook._limits import DEFAULT_MAX_IMAGES
from imagecheck.webhook._store import Key, ParsedReferences, ResultStore

LATE = "no answer from the registry within the deadline"
BUSY = "no free registry slot before the deadline (other reviews held all {} of them)"
OVER_LIMIT = "the review names {} distinct images, over the per-review limit of {}"
QUEUED = (
    "still queued at the review deadline behind the review's own other images "
    "({} distinct, {} checked at once)"
)


@dataclass(eq=False, slots=True)
class _Check:
    """One registry check that concurrent reviews share; ``running`` once it has a slot."""

    task: asyncio.Task[CheckResult] | None = None
    running: bool = False


@dataclass(frozen=True, slots=True)
class Answers:
    """A review's images: ``results`` for those checked (an error when the registry did not
    answer in time), ``unchecked`` (image -> why) for those no registry was asked about."""

    results: dict[str, CheckResult]
    unchecked: dict[str, str]


class ResultCache:
    def __init__(
        self,
        checker: ImageChecker,
        *,
        tag_ttl: float,
        missing_ttl: float,
        max_entries: int = 10_000,
        concurrency: int = 16,
        max_images: int = DEFAULT_MAX_IMAGES,
        clock: Callable[[], float] = time.monotonic,
        on_lookup: Callable[[bool, int], None] | None = None,
    ) -> None:
        self._checker = checker
        self._store = ResultStore(
            tag_ttl=tag_ttl, missing_ttl=missing_ttl, max_entries=max_entries, clock=clock
        )
        self._refs = ParsedReferences(max_entries)
        # ``on_lookup(hit, count)``: ``count`` lookups, all hits or all misses.
        self._on_lookup = on_lookup or (lambda hit, count: None)
        # In-flight checks by the store's key: shared only by reviews with the same credentials.
        self._inflight: dict[Key, _Check] = {}
        self._concurrency = max(1, concurrency)
        self._slots = asyncio.Semaphore(self._concurrency)
        self._max_images = max(1, max_images)

    async def results(
        self,
        images: Sequence[str],
        deadline: Deadline,
        keychain: Keychain | None = None,
        credentials: Hashable = None,
    ) -> Answers:
        """An answer for each of ``images`` (distinct) by ``deadline``. ``keychain`` replaces
        the checker's own; ``credentials`` names it for the cache."""
        over = images[self._max_images :]
        unchecked = dict.fromkeys(over, OVER_LIMIT.format(len(images), self._max_images))
        checked = images[: self._max_images]
        # Answered at once, without a task: the invalid and the cached (a warm webhook's
        # every review, so this path is the one that sets its throughput).
        answered: dict[str, CheckResult] = {}
        for image in checked:
            early = self._early(image, credentials)
            if early is not None:
                answered[image] = early
        asked = [image for image in checked if image not in answered]
        results = await self._ask(asked, len(checked), deadline, keychain, credentials, unchecked)
        results.update(answered)
        return Answers({image: results[image] for image in checked if image in results}, unchecked)

    def answers_now(self, images: Sequence[str], credentials: Hashable = None) -> Answers | None:
        """:meth:`results` of ``images`` when none needs a registry (each invalid or cached:
        a warm webhook's review), counted as :meth:`results` counts them; else None, and
        nothing counted (the review then goes to :meth:`results`)."""
        answered: dict[str, CheckResult] = {}
        hits = 0
        for image in images[: self._max_images]:
            ref = self._refs.get(image)
            if isinstance(ref, str):
                answered[image] = CheckResult(image, None, Status.INVALID, message=ref)
                continue
            cached = self._store.get((ref, credentials), image)
            if cached is None:
                return None
            answered[image], hits = cached, hits + 1
        if hits:
            self._on_lookup(True, hits)  # one count for the review's hits, not one each
        over = images[self._max_images :]
        unchecked = dict.fromkeys(over, OVER_LIMIT.format(len(images), self._max_images))
        return Answers(answered, unchecked)

    def _early(self, image: str, credentials: Hashable) -> CheckResult | None:
        """The answer for ``image`` without asking a registry: invalid, or cached."""
        ref = self._refs.get(image)
        if isinstance(ref, str):
            return CheckResult(image, None, Status.INVALID, message=ref)
        cached = self._store.get((ref, credentials), image)
        self._on_lookup(cached is not None, 1)
        return cached

    async def _ask(
        self,
        images: Sequence[str],
        checked: int,
        deadline: Deadline,
        keychain: Keychain | None,
        credentials: Hashable,
        unchecked: dict[str, str],
    ) -> dict[str, CheckResult]:
        """Registry answers for ``images`` (valid, not cached) by ``deadline``; those still
        queued then go to ``unchecked``. ``checked``: the review's images, for the message."""
        own = asyncio.Semaphore(self._concurrency)
        joined: dict[str, _Check] = {}  # image -> the check it waits on, once out of the queue
        tasks = {
            image: asyncio.ensure_future(
                self._one(image, deadline, keychain, credentials, own, joined)
            )
            for image in images
        }
        pending: set[asyncio.Task[CheckResult]] = set()
        if tasks:
            _, pending = await asyncio.wait(tasks.values(), timeout=deadline.remaining())
        for task in pending:
            task.cancel()  # the shared checks go on (shielded) for whoever else waits
        results: dict[str, CheckResult] = {}
        for image, task in tasks.items():
            if task not in pending:
                results[image] = task.result()
                continue
            check = joined.get(image)
            if check is None:
                unchecked[image] = QUEUED.format(checked, self._concurrency)
            else:
                message = LATE if check.running else BUSY.format(self._concurrency)
                ref = parse_reference(image)  # it parsed before it joined a check
                results[image] = CheckResult(image, ref, Status.ERROR, message=message)
        return results

    async def _one(
        self,
        image: str,
        deadline: Deadline,
        keychain: Keychain | None,
        credentials: Hashable,
        own: asyncio.Semaphore,
        joined: dict[str, _Check],
    ) -> CheckResult:
        ref = self._refs.get(image)
        assert not isinstance(ref, str)  # results() answered the invalid ones
        key: Key = (ref, credentials)
        async with own:
            cached = self._store.get(key, image)  # answered for another review meanwhile
            if cached is not None:
                return cached
            check = self._inflight.get(key) or self._start(key, ref, image, deadline, keychain)
            joined[image] = check
            assert check.task is not None
            # shield: one review giving up must not cancel the request others are waiting on.
            result = await asyncio.shield(check.task)
        return replace(result, image=image)

    def _start(
        self, key: Key, ref: Reference, image: str, deadline: Deadline, keychain: Keychain | None
    ) -> _Check:
        check = _Check()
        check.task = asyncio.ensure_future(self._run(check, ref, image, deadline, keychain))
        self._inflight[key] = check
        check.task.add_done_callback(lambda done: self._done(key, done))
        return check

    async def _run(
        self,
        check: _Check,
        ref: Reference,
        image: str,
        deadline: Deadline,
        keychain: Keychain | None,
    ) -> CheckResult:
        async with self._slots:
            if deadline.remaining() <= 0:  # everyone who asked has been answered already
                message = BUSY.format(self._concurrency)
                return CheckResult(image, ref, Status.ERROR, message=message)
            check.running = True
            return await self._checker.check(ref, deadline, image=image, keychain=keychain)

    def _done(self, key: Key, task: asyncio.Task[CheckResult]) -> None:
        self._inflight.pop(key, None)
        if not task.cancelled() and task.exception() is None:
            self._store.put(key, task.result())
