"""Check results shared across admission reviews.

A webhook sees the same images again and again (every replica, every rollout), so:
- *found* by digest is cached for good (a digest names one manifest forever);
- *found* by tag for ``tag_ttl`` (a tag can be moved or deleted);
- *missing* for the shorter ``missing_ttl`` (it may be pushed any moment);
- denials and errors are not cached: the next review asks again;
- concurrent reviews of an image not in the cache share one registry request.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace

from imagecheck.client import ImageChecker
from imagecheck.credentials import Keychain
from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import Reference, parse_reference
from imagecheck.result import CheckResult, Status
from imagecheck.retry import Deadline

_Key = tuple[Reference, Hashable]


@dataclass(frozen=True, slots=True)
class _Entry:
    result: CheckResult
    expires_at: float


class ResultCache:
    def __init__(
        self,
        checker: ImageChecker,
        *,
        tag_ttl: float,
        missing_ttl: float,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        on_lookup: Callable[[bool], None] | None = None,
    ) -> None:
        self._checker = checker
        self._tag_ttl = tag_ttl
        self._missing_ttl = missing_ttl
        self._max = max_entries
        self._clock = clock
        self._on_lookup = on_lookup or (lambda hit: None)
        # Entries and in-flight checks are kept per reference *and* credentials: a pod whose
        # pull secrets open a private repository must not vouch for a pod without them (its
        # kubelet could not pull). ``None`` stands for the webhook's own credentials.
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._inflight: dict[_Key, asyncio.Task[CheckResult]] = {}

    async def results(
        self,
        images: Sequence[str],
        deadline: Deadline,
        keychain: Keychain | None = None,
        credentials: Hashable = None,
    ) -> dict[str, CheckResult]:
        """A result for each image, within ``deadline`` (late ones are errors). ``keychain``
        replaces the checker's own; ``credentials`` names it for the cache."""
        answers = await asyncio.gather(
            *(self._one(image, deadline, keychain, credentials) for image in images)
        )
        return dict(zip(images, answers, strict=True))

    async def _one(
        self, image: str, deadline: Deadline, keychain: Keychain | None, credentials: Hashable
    ) -> CheckResult:
        try:
            ref = parse_reference(image)
        except InvalidReferenceError as exc:
            return CheckResult(image, None, Status.INVALID, message=exc.reason)
        key: _Key = (ref, credentials)
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at > self._clock():
            self._on_lookup(True)
            self._entries.move_to_end(key)
            return replace(entry.result, image=image, elapsed_ms=0.0)
        self._on_lookup(False)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(
                self._checker.check(ref, deadline, image=image, keychain=keychain)
            )
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._store(key, done))
        try:
            # shield: one review giving up must not cancel the request others are waiting on.
            result = await asyncio.wait_for(asyncio.shield(task), deadline.remaining())
        except TimeoutError:
            return CheckResult(
                image, ref, Status.ERROR, message="no answer from the registry within the deadline"
            )
        return replace(result, image=image)

    def _store(self, key: _Key, task: asyncio.Task[CheckResult]) -> None:
        self._inflight.pop(key, None)
        ref = key[0]
        if task.cancelled() or task.exception() is not None:
            return
        result = task.result()
        ttl = self._ttl(ref, result)
        if ttl <= 0:
            return
        self._entries[key] = _Entry(result, self._clock() + ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def _ttl(self, ref: Reference, result: CheckResult) -> float:
        if result.status is Status.FOUND:
            return float("inf") if ref.digest else self._tag_ttl
        if result.status is Status.MISSING:
            return self._missing_ttl
        return 0.0
