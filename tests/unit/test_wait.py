"""--wait: rounds until images appear, with doubling pauses that never pass the wait."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from imagecheck._deadline import Deadline
from imagecheck._wait import wait_for_images
from imagecheck.reference import Reference, parse_reference
from imagecheck.registry import ImageChecker, Progress
from imagecheck.result import CheckResult, Status


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeChecker:
    """Answers from a script: image -> statuses per round (the last one repeats)."""

    def __init__(self, script: dict[str, list[Status]]) -> None:
        self.script = script
        self.rounds: list[list[str]] = []

    async def check_many(
        self,
        items: Sequence[tuple[str, Reference]],
        deadline: Deadline,
        *,
        checked: Progress | None = None,
    ) -> list[CheckResult]:
        self.rounds.append([image for image, _ in items])
        for ended in range(1, len(items) + 1):
            if checked is not None:
                checked(ended, len(items))
        out = []
        for image, ref in items:
            statuses = self.script[image]
            status = statuses[min(len(self.rounds) - 1, len(statuses) - 1)]
            out.append(CheckResult(image, ref, status))
        return out


def run_wait(
    script: dict[str, list[Status]], wait: float
) -> tuple[list[CheckResult], FakeChecker, list[float], list[str]]:
    clock = Clock()
    sleeps: list[float] = []
    lines: list[str] = []
    counts: list[tuple[int, int]] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += seconds

    checker = FakeChecker(script)
    items = [(image, parse_reference(image)) for image in script]
    results = asyncio.run(
        wait_for_images(
            checker,  # type: ignore[arg-type]
            items,
            until=Deadline.after(wait, clock),
            round_seconds=60,
            progress=lines.append,
            checked=lambda ended, total: counts.append((ended, total)),
            sleep=sleep,
        )
    )
    assert counts == [(ended, len(r)) for r in checker.rounds for ended in range(1, len(r) + 1)]
    return results, checker, sleeps, lines


def test_waits_until_found_and_rechecks_only_what_is_pending() -> None:
    missing, found = Status.MISSING, Status.FOUND
    results, checker, sleeps, lines = run_wait(
        {"a:1": [found], "b:1": [missing, missing, found]}, wait=60
    )
    assert [r.status for r in results] == [found, found]
    assert checker.rounds == [["a:1", "b:1"], ["b:1"], ["b:1"]]
    assert sleeps == [1.0, 2.0]
    assert lines[0].startswith("waiting for 1 image(s): b:1; next check in 1s")


def test_pauses_double_up_to_the_cap_and_the_last_one_ends_at_the_wait() -> None:
    results, checker, sleeps, _ = run_wait({"a:1": [Status.MISSING]}, wait=40)
    assert results[0].status is Status.MISSING
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 15.0, 10.0]
    assert sum(sleeps) == 40
    assert len(checker.rounds) == 7


def test_denied_is_final_errors_are_retried() -> None:
    results, checker, _, _ = run_wait(
        {"a:1": [Status.DENIED], "b:1": [Status.ERROR, Status.FOUND]}, wait=30
    )
    assert [r.status for r in results] == [Status.DENIED, Status.FOUND]
    assert checker.rounds == [["a:1", "b:1"], ["b:1"]]


def test_type_of_checker_is_the_real_one() -> None:
    # wait_for_images is typed against ImageChecker; FakeChecker mirrors its one method.
    assert hasattr(ImageChecker, "check_many")
