"""Tests for the retry policy: Retry-After, the backoff schedule, the deadline, table-driven.

Time is injected everywhere: ``now`` for HTTP-dates, ``rng`` for jitter, an async ``sleep``
that records the waits instead of waiting, and a clock for the :class:`Deadline`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from imagecheck._deadline import Deadline
from imagecheck.errors import (
    AuthenticationError,
    DeadlineExceeded,
    ProtocolError,
    RegistryError,
    TransientError,
)
from imagecheck.registry._retry import TRANSIENT_STATUS_CODES, RetryPolicy, parse_retry_after

T = TypeVar("T")

# 2015-10-21T07:28:00Z, the RFC 9110 example date.
EXAMPLE_DATE = "Wed, 21 Oct 2015 07:28:00 GMT"
EXAMPLE_TS = 1445412480.0


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class SleepRecorder:
    """An async ``sleep`` that records each wait and, optionally, advances a fake clock."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.waits: list[float] = []
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.clock is not None:
            self.clock.now += seconds


class Flaky:
    """An attempt function that raises the given errors in turn, then returns ``"ok"``."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def run(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await fn()

    return asyncio.run(main())


def transient(retry_after: float | None = None) -> TransientError:
    return TransientError(
        "registry.test answered HTTP 503", status_code=503, retry_after=retry_after
    )


# -- parse_retry_after -------------------------------------------------------------------------

# (id, header value, now, expected seconds)
RETRY_AFTER: list[tuple[str, str | None, float, float | None]] = [
    ("absent", None, 0.0, None),
    ("zero", "0", 0.0, 0.0),
    ("seconds", "120", 0.0, 120.0),
    ("seconds-with-spaces", "  7 ", 0.0, 7.0),
    ("huge-seconds", "86400000", 0.0, 86400000.0),
    ("date-in-future", EXAMPLE_DATE, EXAMPLE_TS - 30, 30.0),
    ("date-in-past-is-zero", EXAMPLE_DATE, EXAMPLE_TS + 3600, 0.0),
    ("date-now", EXAMPLE_DATE, EXAMPLE_TS, 0.0),
    ("date-with-offset", "Wed, 21 Oct 2015 09:28:00 +0200", EXAMPLE_TS - 5, 5.0),
    ("empty", "", 0.0, None),
    ("garbage", "soon", 0.0, None),
    ("negative", "-1", 0.0, None),
    ("fraction", "1.5", 0.0, None),
    ("seconds-with-unit", "10s", 0.0, None),
    ("half-a-date", "Wed, 21 Oct", 0.0, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "now", "expected"), [c[1:] for c in RETRY_AFTER], ids=[c[0] for c in RETRY_AFTER]
)
def test_parse_retry_after(value: str | None, now: float, expected: float | None) -> None:
    assert parse_retry_after(value, now=now) == expected


def test_parse_retry_after_non_ascii_digit_is_unreadable() -> None:
    assert parse_retry_after("\u00b2", now=0.0) is None


def test_parse_retry_after_date_uses_wall_clock_by_default() -> None:
    # A date long past: no now injected, the real clock is later, so no wait.
    assert parse_retry_after(EXAMPLE_DATE) == 0.0


# -- Deadline ----------------------------------------------------------------------------------


def test_deadline_with_injected_clock() -> None:
    clock = FakeClock(100.0)
    deadline = Deadline.after(30, clock)
    assert deadline.at == 130.0
    assert deadline.remaining() == 30.0
    clock.now = 125.5
    assert deadline.remaining() == 4.5
    clock.now = 131.0
    assert deadline.remaining() == 0.0


# -- backoff -----------------------------------------------------------------------------------

# (id, policy kwargs, rng value, expected waits for attempts 1..5)
BACKOFF: list[tuple[str, dict[str, float], float, list[float]]] = [
    ("defaults-no-jitter", {}, 0.0, [0.25, 0.5, 1.0, 2.0, 4.0]),
    ("defaults-full-jitter", {}, 1.0, [0.5, 0.75, 1.25, 2.25, 4.25]),
    ("capped", {"initial": 1.0, "maximum": 3.0, "jitter": 0.0}, 0.5, [1.0, 2.0, 3.0, 3.0, 3.0]),
    ("capped-plus-jitter", {"initial": 1.0, "maximum": 3.0, "jitter": 0.5}, 0.5,
     [1.25, 2.25, 3.25, 3.25, 3.25]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "rng", "expected"), [c[1:] for c in BACKOFF], ids=[c[0] for c in BACKOFF]
)
def test_backoff_schedule(kwargs: dict[str, float], rng: float, expected: list[float]) -> None:
    policy = RetryPolicy(rng=lambda: rng, **kwargs)  # type: ignore[arg-type]
    assert [policy.backoff(n) for n in range(1, 6)] == pytest.approx(expected)


# -- RetryPolicy.run ---------------------------------------------------------------------------


# (id, retries, initial, maximum, jitter, rng, expected sleeps when every attempt fails)
SCHEDULES: list[tuple[str, int, float, float, float, float, list[float]]] = [
    ("retries-0-no-sleep", 0, 1.0, 8.0, 0.0, 0.0, []),
    ("retries-1", 1, 1.0, 8.0, 0.0, 0.0, [1.0]),
    ("retries-3-exponential", 3, 1.0, 8.0, 0.0, 0.0, [1.0, 2.0, 4.0]),
    ("retries-3-jitter", 3, 1.0, 8.0, 0.4, 0.5, [1.2, 2.2, 4.2]),
    ("retries-5-capped", 5, 1.0, 3.0, 0.0, 0.0, [1.0, 2.0, 3.0, 3.0, 3.0]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("retries", "initial", "maximum", "jitter", "rng", "expected"),
    [c[1:] for c in SCHEDULES],
    ids=[c[0] for c in SCHEDULES],
)
def test_run_sleeps_on_schedule_then_reraises(
    retries: int,
    initial: float,
    maximum: float,
    jitter: float,
    rng: float,
    expected: list[float],
) -> None:
    sleep = SleepRecorder()
    policy = RetryPolicy(
        retries=retries, initial=initial, maximum=maximum, jitter=jitter, sleep=sleep,
        rng=lambda: rng,
    )  # fmt: skip
    errors = [transient() for _ in range(retries + 1)]
    fn = Flaky(*errors)
    with pytest.raises(TransientError) as info:
        run(lambda: policy.run(fn, Deadline.after(3600, FakeClock())))
    assert info.value is errors[-1]  # the last failure, unwrapped
    assert fn.calls == retries + 1
    assert sleep.waits == pytest.approx(expected)


def test_run_succeeds_after_transient_failures() -> None:
    sleep = SleepRecorder()
    policy = RetryPolicy(retries=3, initial=0.5, jitter=0.0, sleep=sleep)
    fn = Flaky(transient(), transient())
    assert run(lambda: policy.run(fn, Deadline.after(60, FakeClock()))) == "ok"
    assert fn.calls == 3
    assert sleep.waits == [0.5, 1.0]


# (id, Retry-After, backoff initial, expected first wait)
RETRY_AFTER_WAITS: list[tuple[str, float | None, float, float]] = [
    ("no-retry-after-backoff", None, 1.0, 1.0),
    ("retry-after-longer-wins", 5.0, 1.0, 5.0),
    ("backoff-longer-wins", 0.5, 2.0, 2.0),
    ("retry-after-zero", 0.0, 1.0, 1.0),
]


@pytest.mark.parametrize(
    ("retry_after", "initial", "expected"),
    [c[1:] for c in RETRY_AFTER_WAITS],
    ids=[c[0] for c in RETRY_AFTER_WAITS],
)
def test_run_waits_for_the_longer_of_backoff_and_retry_after(
    retry_after: float | None, initial: float, expected: float
) -> None:
    sleep = SleepRecorder()
    policy = RetryPolicy(retries=1, initial=initial, jitter=0.0, sleep=sleep)
    fn = Flaky(transient(retry_after))
    assert run(lambda: policy.run(fn, Deadline.after(60, FakeClock()))) == "ok"
    assert sleep.waits == [expected]


# (id, error raised by the attempt)
NOT_RETRIED: list[tuple[str, BaseException]] = [
    ("authentication", AuthenticationError("refused", status_code=401)),
    ("protocol", ProtocolError("bad digest")),
    ("registry-error", RegistryError("TLS certificate not trusted")),
    ("deadline", DeadlineExceeded("too late")),
    ("not-a-registry-error", ValueError("a bug, not a registry failure")),
]


@pytest.mark.parametrize("error", [c[1] for c in NOT_RETRIED], ids=[c[0] for c in NOT_RETRIED])
def test_run_does_not_retry_non_temporary_errors(error: BaseException) -> None:
    sleep = SleepRecorder()
    policy = RetryPolicy(retries=3, sleep=sleep)
    fn = Flaky(error)
    with pytest.raises(type(error)) as info:
        run(lambda: policy.run(fn, Deadline.after(60, FakeClock())))
    assert info.value is error
    assert fn.calls == 1
    assert sleep.waits == []


def test_transient_status_codes() -> None:
    assert {408, 429, 500, 502, 503, 504} == TRANSIENT_STATUS_CODES
    assert not {400, 401, 403, 404, 405, 418, 501, 505} & TRANSIENT_STATUS_CODES


# -- the deadline bounds retries ---------------------------------------------------------------


def test_retry_after_past_deadline_ends_at_once() -> None:
    sleep = SleepRecorder()
    policy = RetryPolicy(retries=3, initial=0.25, jitter=0.0, sleep=sleep)
    fn = Flaky(transient(retry_after=120))
    with pytest.raises(DeadlineExceeded) as info:
        run(lambda: policy.run(fn, Deadline.after(30, FakeClock())))
    message = str(info.value)
    assert "registry.test answered HTTP 503" in message
    assert "retried in 120s" in message
    assert "past the deadline (30.0s left)" in message
    assert info.value.status_code == 503
    assert isinstance(info.value.__cause__, TransientError)
    assert fn.calls == 1
    assert sleep.waits == []


def test_backoff_past_deadline_ends_at_once() -> None:
    sleep = SleepRecorder()
    policy = RetryPolicy(retries=3, initial=10.0, maximum=60.0, jitter=0.0, sleep=sleep)
    fn = Flaky(transient())
    with pytest.raises(DeadlineExceeded) as info:
        run(lambda: policy.run(fn, Deadline.after(5, FakeClock())))
    assert "no time left to retry" in str(info.value)
    assert "next try in 10.0s, 5.0s left" in str(info.value)
    assert fn.calls == 1
    assert sleep.waits == []


def test_deadline_reached_while_retrying() -> None:
    # Each recorded sleep moves the clock: waits of 4 and 8 fit in 20 s, the next (16) not.
    clock = FakeClock()
    sleep = SleepRecorder(clock)
    policy = RetryPolicy(retries=5, initial=4.0, maximum=60.0, jitter=0.0, sleep=sleep)
    fn = Flaky(*(transient() for _ in range(6)))
    with pytest.raises(DeadlineExceeded) as info:
        run(lambda: policy.run(fn, Deadline.after(20, clock)))
    assert "next try in 16.0s, 8.0s left" in str(info.value)
    assert fn.calls == 3
    assert sleep.waits == [4.0, 8.0]


def test_last_attempt_failure_is_not_called_a_deadline() -> None:
    # Out of attempts with time to spare: the registry's error itself, not DeadlineExceeded.
    sleep = SleepRecorder()
    policy = RetryPolicy(retries=1, initial=1.0, jitter=0.0, sleep=sleep)
    last = transient(retry_after=500)
    fn = Flaky(transient(), last)
    with pytest.raises(TransientError) as info:
        run(lambda: policy.run(fn, Deadline.after(30, FakeClock())))
    assert info.value is last
    assert sleep.waits == [1.0]
