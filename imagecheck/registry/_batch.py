"""Many checks at once, within a run's deadline: each distinct reference checked once by a few
workers, and what the deadline cut short reported with the last error it met."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Protocol

from imagecheck._deadline import Deadline
from imagecheck.reference import Reference
from imagecheck.result import CheckResult, Status

# Errors remembered for checks in progress (one each): more than run at once, and bounded.
MAX_LAST_ERRORS = 4096
# Told (checks ended, checks in all): a front end's progress counter.
Progress = Callable[[int, int], None]


class Check(Protocol):
    """One check (``ImageChecker.check``)."""

    def __call__(
        self, ref: Reference, deadline: Deadline, *, image: str | None = None
    ) -> Awaitable[CheckResult]: ...


async def check_many(
    check: Check,
    items: Sequence[tuple[str, Reference]],
    deadline: Deadline,
    *,
    concurrency: int,
    checked: Progress | None,
    last_errors: LastErrors,
) -> list[CheckResult]:
    """Every ``(image text, reference)`` pair's result, in input order (``ImageChecker.check_many``
    says the rules)."""
    firsts: dict[Reference, str] = {}
    for image, ref in items:
        firsts.setdefault(ref, image)
    answers = await _check_distinct(check, firsts, deadline, concurrency, checked, last_errors)
    del firsts
    results: list[CheckResult] = []
    for image, ref in items:
        result = answers[ref]
        results.append(result if result.image == image else replace(result, image=image))
    return results


async def _check_distinct(
    check: Check,
    firsts: dict[Reference, str],
    deadline: Deadline,
    concurrency: int,
    checked: Progress | None,
    last_errors: LastErrors,
) -> dict[Reference, CheckResult]:
    """Each of ``firsts``' references checked (as its image text) by ``concurrency``
    workers that take them one at a time, in order: a few tasks for the run, not one per
    image, whose memory would otherwise grow with the images until the run ended. The answer
    of each, or how the deadline cut it short."""
    answers: dict[Reference, CheckResult] = {}
    ended = _Ends(len(firsts), checked)
    todo = iter(firsts.items())

    async def worker() -> None:
        for ref, image in todo:
            answers[ref] = await check(ref, deadline, image=image)
            ended.one()

    workers = [asyncio.create_task(worker()) for _ in range(min(max(1, concurrency), len(firsts)))]
    done: set[asyncio.Task[None]] = set()
    try:
        if workers:
            done, _ = await asyncio.wait(workers, timeout=deadline.remaining())
    finally:
        # At the deadline, or when the run itself is cancelled: no check goes on.
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    for task in done:
        task.result()  # a check that raised (a bug: registry trouble is a result)
    for ref, image in firsts.items():
        if ref not in answers:  # running at the deadline, or not yet started
            answers[ref] = _cut_short(image, ref, last_errors.get(image))
            ended.one()
    return answers


class LastErrors:
    """The last error of each check in progress, by image text. Bounded: a finished
    check drops its entry (``ImageChecker.check``); the entries of checks that never finish
    are dropped oldest first past MAX_LAST_ERRORS."""

    def __init__(self) -> None:
        self._errors: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._errors)

    def note(self, image: str, message: str) -> None:
        self._errors[image] = message
        self._errors.move_to_end(image)
        while len(self._errors) > MAX_LAST_ERRORS:
            self._errors.popitem(last=False)

    def get(self, image: str) -> str | None:
        return self._errors.get(image)

    def pop(self, image: str) -> None:
        self._errors.pop(image, None)


class _Ends:
    """Counts the checks that ended, answered or cut short, for a ``Progress`` callback."""

    __slots__ = ("_checked", "_count", "_total")

    def __init__(self, total: int, checked: Progress | None) -> None:
        self._count = 0
        self._total = total
        self._checked = checked

    def one(self) -> None:
        self._count += 1
        if self._checked is not None:
            self._checked(self._count, self._total)


def _cut_short(image: str, ref: Reference, last: str | None) -> CheckResult:
    """The result of a check the deadline cancelled, with the last error it met, if any."""
    message = "deadline exceeded before the registry answered"
    return CheckResult(
        image,
        ref,
        Status.ERROR,
        message=f"{message} (last error: {last})" if last else message,
        registry=ref.api_host,
    )
