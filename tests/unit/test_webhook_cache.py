"""``imagecheck.webhook._cache.ResultCache``: TTLs on an injected clock, one registry request
for concurrent lookups, and what is never cached. The checker is a fake with the one method
the cache calls, ``async check(ref, deadline, image=...)``, recording each call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar, cast

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn import Keychain
from imagecheck.reference import Reference
from imagecheck.result import CheckResult, Status
from imagecheck.webhook._cache import Answers, ResultCache

if TYPE_CHECKING:
    from imagecheck.registry import ImageChecker

T = TypeVar("T")
TAG_TTL = 60.0
MISSING_TTL = 10.0
DIGEST = "sha256:" + "ab" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeChecker:
    """Answers ``status_of[str(ref)]`` (default found); holds each check until ``gate`` is set
    when one is given; raises ``raises`` when set."""

    def __init__(self, status_of: dict[str, Status] | None = None) -> None:
        self.status_of = status_of or {}
        self.calls: list[tuple[str, str | None]] = []
        self.gate: asyncio.Event | None = None
        self.raises: Exception | None = None
        self.running = 0
        self.most_at_once = 0

    async def check(
        self,
        ref: Reference,
        deadline: Deadline,
        *,
        image: str | None = None,
        keychain: Keychain | None = None,
    ) -> CheckResult:
        self.calls.append((str(ref), image))
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            else:
                await asyncio.sleep(0)  # an answer takes a turn of the loop, as a real one does
        finally:
            self.running -= 1
        if self.raises is not None:
            raise self.raises
        status = self.status_of.get(str(ref), Status.FOUND)
        return CheckResult(image or str(ref), ref, status, message=status.value, elapsed_ms=12.5)


class Lookups:
    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0

    def __call__(self, hit: bool, count: int) -> None:
        if hit:
            self.hits += count
        else:
            self.misses += count


def make_cache(
    checker: FakeChecker,
    clock: Clock,
    *,
    tag_ttl: float = TAG_TTL,
    max_entries: int = 100,
    on_lookup: Callable[[bool, int], None] | None = None,
    concurrency: int = 16,
    max_images: int = 100,
) -> ResultCache:
    # ResultCache only ever calls check(); the fake stands in for the whole ImageChecker.
    return ResultCache(
        cast("ImageChecker", checker),
        tag_ttl=tag_ttl,
        missing_ttl=MISSING_TTL,
        max_entries=max_entries,
        clock=clock,
        on_lookup=on_lookup,
        concurrency=concurrency,
        max_images=max_images,
    )


def run(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await fn()

    return asyncio.run(main())


def deadline(seconds: float = 5.0) -> Deadline:
    return Deadline.after(seconds)


async def one(cache: ResultCache, image: str, seconds: float = 5.0) -> CheckResult:
    return (await cache.results([image], deadline(seconds))).results[image]


# image, checker's answer, tag_ttl, seconds between two lookups -> registry calls
TTLS = [
    pytest.param("acme/app:1", Status.FOUND, TAG_TTL, TAG_TTL - 0.1, 1, id="tag-found-within-ttl"),
    pytest.param("acme/app:1", Status.FOUND, TAG_TTL, TAG_TTL, 2, id="tag-found-at-ttl"),
    pytest.param("acme/app:1", Status.FOUND, 0.0, 0.0, 2, id="tag-found-ttl-0-disables"),
    pytest.param(f"acme/app@{DIGEST}", Status.FOUND, TAG_TTL, 1e9, 1, id="digest-found-for-good"),
    pytest.param("acme/app:1", Status.MISSING, TAG_TTL, MISSING_TTL - 0.1, 1, id="missing-within"),
    pytest.param("acme/app:1", Status.MISSING, TAG_TTL, MISSING_TTL, 2, id="missing-at-ttl"),
    pytest.param(
        f"acme/app@{DIGEST}", Status.MISSING, TAG_TTL, MISSING_TTL, 2, id="missing-digest"
    ),
    pytest.param("acme/app:1", Status.DENIED, TAG_TTL, 0.0, 2, id="denied-never"),
    pytest.param("acme/app:1", Status.ERROR, TAG_TTL, 0.0, 2, id="error-never"),
]


@pytest.mark.parametrize(("image", "status", "tag_ttl", "later", "calls"), TTLS)
def test_ttls(image: str, status: Status, tag_ttl: float, later: float, calls: int) -> None:
    checker = FakeChecker({f"docker.io/{image}": status})
    clock = Clock()
    cache = make_cache(checker, clock, tag_ttl=tag_ttl)

    async def lookups() -> list[CheckResult]:
        first = await one(cache, image)
        clock.now += later
        return [first, await one(cache, image)]

    results = run(lookups)
    assert len(checker.calls) == calls
    assert [r.status for r in results] == [status, status]
    assert all(r.image == image for r in results)


def test_a_hit_answers_for_the_text_asked_with_no_elapsed_time() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock)

    async def lookups() -> tuple[CheckResult, CheckResult]:
        return await one(cache, "nginx"), await one(cache, "docker.io/library/nginx:latest")

    first, second = run(lookups)
    assert len(checker.calls) == 1
    assert (first.image, first.elapsed_ms) == ("nginx", 12.5)
    assert (second.image, second.elapsed_ms) == ("docker.io/library/nginx:latest", 0.0)
    assert first.reference == second.reference


def test_invalid_references_never_reach_the_checker_nor_the_cache() -> None:
    checker, clock, lookups = FakeChecker(), Clock(), Lookups()
    cache = make_cache(checker, clock, on_lookup=lookups)

    async def twice() -> list[CheckResult]:
        return [await one(cache, "UPPER/Case:1"), await one(cache, "UPPER/Case:1")]

    results = run(twice)
    assert checker.calls == []
    assert [r.status for r in results] == [Status.INVALID, Status.INVALID]
    assert all(r.reference is None and r.message for r in results)
    assert (lookups.hits, lookups.misses) == (0, 0)


def test_concurrent_lookups_share_one_check() -> None:
    checker, clock, lookups = FakeChecker(), Clock(), Lookups()
    cache = make_cache(checker, clock, on_lookup=lookups)
    spellings = ["nginx", "docker.io/library/nginx", "index.docker.io/library/nginx:latest"]

    async def concurrent() -> list[CheckResult]:
        checker.gate = asyncio.Event()
        tasks = [asyncio.ensure_future(one(cache, spellings[i % 3])) for i in range(20)]
        await asyncio.sleep(0.01)  # every lookup is now waiting on the one check
        assert len(checker.calls) == 1
        checker.gate.set()
        return await asyncio.gather(*tasks)

    results = run(concurrent)
    assert checker.calls == [("docker.io/library/nginx:latest", "nginx")]
    assert all(r.status is Status.FOUND for r in results)
    assert [r.image for r in results] == [spellings[i % 3] for i in range(20)]
    assert (lookups.hits, lookups.misses) == (0, 20)


def test_distinct_images_in_one_review_are_checked_concurrently() -> None:
    checker, clock = FakeChecker({"docker.io/acme/b:1": Status.MISSING}), Clock()
    cache = make_cache(checker, clock)

    async def review() -> dict[str, CheckResult]:
        checker.gate = asyncio.Event()
        pending = asyncio.ensure_future(cache.results(["acme/a:1", "acme/b:1"], deadline()))
        await asyncio.sleep(0.01)
        assert len(checker.calls) == 2  # both asked before either answered
        checker.gate.set()
        return (await pending).results

    results = run(review)
    assert {k: v.status for k, v in results.items()} == {
        "acme/a:1": Status.FOUND,
        "acme/b:1": Status.MISSING,
    }


def test_a_lookup_past_its_deadline_is_an_error_but_the_check_goes_on() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock)

    async def late() -> tuple[CheckResult, CheckResult]:
        checker.gate = asyncio.Event()
        timed_out = await one(cache, "acme/slow:1", seconds=0.05)
        checker.gate.set()  # the registry answers after all
        await asyncio.sleep(0.01)
        return timed_out, await one(cache, "acme/slow:1")

    timed_out, later = run(late)
    assert timed_out.status is Status.ERROR
    assert "deadline" in timed_out.message
    assert timed_out.reference is not None
    assert later.status is Status.FOUND
    assert len(checker.calls) == 1  # the late answer was kept for the next review


def test_a_cancelled_review_does_not_cancel_the_check_others_wait_on() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock)

    async def cancelled() -> CheckResult:
        checker.gate = asyncio.Event()
        quitter = asyncio.ensure_future(one(cache, "acme/app:1"))
        stayer = asyncio.ensure_future(one(cache, "acme/app:1"))
        await asyncio.sleep(0.01)
        quitter.cancel()
        await asyncio.sleep(0.01)
        checker.gate.set()
        return await stayer

    assert run(cancelled).status is Status.FOUND
    assert len(checker.calls) == 1


def test_a_checker_exception_is_not_cached() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock)
    checker.raises = RuntimeError("boom")

    async def twice() -> CheckResult:
        with pytest.raises(RuntimeError):
            await one(cache, "acme/app:1")
        checker.raises = None
        return await one(cache, "acme/app:1")

    assert run(twice).status is Status.FOUND
    assert len(checker.calls) == 2


def test_least_recently_used_entry_is_evicted_first() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock, max_entries=2)

    async def fill() -> None:
        for image in ["acme/a:1", "acme/b:1", "acme/a:1", "acme/c:1"]:  # a touched, so b goes
            await one(cache, image)
        checker.calls.clear()
        for image in ["acme/a:1", "acme/c:1", "acme/b:1"]:
            await one(cache, image)

    run(fill)
    assert [ref for ref, _ in checker.calls] == ["docker.io/acme/b:1"]


def test_lookups_report_hits_and_misses() -> None:
    checker, clock, lookups = FakeChecker(), Clock(), Lookups()
    cache = make_cache(checker, clock, on_lookup=lookups)

    async def three() -> None:
        await one(cache, "acme/app:1")
        await one(cache, "acme/app:1")
        clock.now += TAG_TTL
        await one(cache, "acme/app:1")

    run(three)
    assert (lookups.hits, lookups.misses) == (1, 2)


def test_answers_now_counts_each_hit_and_nothing_when_it_declines() -> None:
    checker, clock, lookups = FakeChecker(), Clock(), Lookups()
    cache = make_cache(checker, clock, on_lookup=lookups)
    images = ["acme/a:1", "acme/b:1", "UPPER/Case:1"]
    run(lambda: cache.results(images, deadline()))
    counted = (lookups.hits, lookups.misses)

    assert cache.answers_now(images) is not None
    assert (lookups.hits, lookups.misses) == (counted[0] + 2, counted[1])
    assert cache.answers_now([*images, "acme/new:1"]) is None
    assert (lookups.hits, lookups.misses) == (counted[0] + 2, counted[1])


# -- bounded work (issue #10) ------------------------------------------------------------------


def test_images_over_the_per_review_limit_are_not_checked() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock, max_images=3)
    images = [f"acme/i{i}:1" for i in range(10)]

    answers = run(lambda: cache.results(images, deadline()))
    assert list(answers.results) == images[:3]
    assert [ref for ref, _ in checker.calls] == [f"docker.io/{i}" for i in images[:3]]
    assert set(answers.unchecked) == set(images[3:])
    assert set(answers.unchecked.values()) == {
        "the review names 10 distinct images, over the per-review limit of 3"
    }


def test_a_review_runs_at_most_concurrency_checks_and_the_rest_queue_past_the_deadline() -> None:
    """The deadline holds with checks that never answer; the images still queued behind the
    review's own are not checked (not a registry error), the ones asked are errors."""
    checker, clock = FakeChecker(), Clock()
    checker.gate = asyncio.Event()  # never set: the registry does not answer
    cache = make_cache(checker, clock, concurrency=2)
    images = [f"acme/i{i}:1" for i in range(5)]

    answers = run(lambda: cache.results(images, deadline(0.1)))
    assert checker.most_at_once == 2
    assert {i: r.status for i, r in answers.results.items()} == {
        images[0]: Status.ERROR,
        images[1]: Status.ERROR,
    }
    assert all(r.message == "no answer from the registry within the deadline"
               for r in answers.results.values())  # fmt: skip
    assert set(answers.unchecked) == set(images[2:])
    assert "queued at the review deadline behind the review's own" in answers.unchecked[images[2]]


def test_reviews_share_the_process_slots_and_waiting_for_one_is_an_error() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock, concurrency=2)

    async def two_reviews() -> tuple[Answers, Answers]:
        checker.gate = asyncio.Event()
        first = asyncio.ensure_future(cache.results(["acme/a:1", "acme/b:1"], deadline(5.0)))
        await asyncio.sleep(0.01)  # the first review holds both slots
        second = await cache.results(["acme/c:1"], deadline(0.1))
        checker.gate.set()
        return await first, second

    first, second = run(two_reviews)
    assert checker.most_at_once == 2
    assert [r.status for r in first.results.values()] == [Status.FOUND, Status.FOUND]
    [busy] = second.results.values()
    assert busy.status is Status.ERROR
    assert busy.message.startswith("no free registry slot before the deadline")
    assert second.unchecked == {}
    # The queued check found every asker gone when it got a slot: it asked no registry.
    assert [ref for ref, _ in checker.calls] == ["docker.io/acme/a:1", "docker.io/acme/b:1"]


def test_many_reviews_never_run_more_than_concurrency_checks_at_once() -> None:
    checker, clock = FakeChecker(), Clock()
    cache = make_cache(checker, clock, concurrency=4)

    async def many() -> list[Answers]:
        reviews = [[f"acme/r{r}-i{i}:1" for i in range(10)] for r in range(20)]
        return await asyncio.gather(*(cache.results(images, deadline()) for images in reviews))

    answers = run(many)
    assert checker.most_at_once == 4
    assert len(checker.calls) == 200
    assert all(not a.unchecked and len(a.results) == 10 for a in answers)
