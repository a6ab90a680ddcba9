"""What is worth another try, and the tenacity policy built from it.

One rule: an error is retried when it is a :class:`RegistryError` whose ``temporary`` flag is
set (connection trouble, timeouts, 408/429/5xx; see ``httperrors.py`` for the classification).
401, 403 and 404 are answers and are never retried. Every wait fits inside the run's
:class:`Deadline`: when the registry asks (``Retry-After``) for more time than is left, the
check ends at once and says so, rather than sleeping past the deadline.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from imagecheck._deadline import Deadline
from imagecheck.errors import DeadlineExceeded, RegistryError, TransientError

if TYPE_CHECKING:
    from tenacity import RetryCallState
    from tenacity.stop import stop_base

T = TypeVar("T")

# RFC 9110 15.5.9 (408), RFC 6585 (429), and the 5xx answers proxies and registries give while
# restarting or overloaded. 501 and 505 are not temporary: they will not change on retry.
TRANSIENT_STATUS_CODES = frozenset({408, 429, 500, 502, 503, 504})

_DELAY_SECONDS = re.compile(r"[0-9]+")

Sleep = Callable[[float], Awaitable[None]]


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delay-seconds or an HTTP-date (RFC 9110
    10.2.3). ``None`` when absent or unreadable; never negative."""
    if value is None:
        return None
    value = value.strip()
    if _DELAY_SECONDS.fullmatch(value):  # ASCII digits only: str.isdigit() accepts "²"
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, RegistryError) and exc.temporary


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded by attempts and by the deadline.

    ``retries`` is how many times a failed request is tried again (0: try once).
    The n-th wait is ``initial * 2**(n-1)`` capped at ``maximum``, plus up to ``jitter``
    seconds drawn at random, or the registry's ``Retry-After`` when that is longer.
    """

    retries: int = 3
    initial: float = 0.25
    maximum: float = 8.0
    jitter: float = 0.25
    sleep: Sleep = field(default=asyncio.sleep, compare=False)
    rng: Callable[[], float] = field(default=random.random, compare=False)

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (1-based), before Retry-After."""
        base = min(self.maximum, self.initial * math.pow(2, attempt - 1))
        return base + self.jitter * self.rng()

    def _wait(self, state: RetryCallState) -> float:
        delay = self.backoff(state.attempt_number)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        return delay

    async def run(self, fn: Callable[[], Awaitable[T]], deadline: Deadline) -> T:
        """Call ``fn`` until it succeeds, fails for good, or retrying cannot fit the deadline.

        The first attempt runs at once; tenacity (imported then) takes over from its failure,
        replayed as its attempt 1, so the policy is tenacity's from the first attempt on. Most
        checks succeed first time and never pay for building the retry machinery.
        """
        try:
            return await fn()
        except Exception as exc:
            if self.retries == 0 or not is_retryable(exc):
                raise
            first: list[BaseException] = [exc]

        async def replay_then_call() -> T:
            if first:
                raise first.pop()
            return await fn()

        return await self._retrying(replay_then_call, deadline)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]], deadline: Deadline) -> T:
        # Lazy: only a failed first attempt needs tenacity, and every start-up would import it.
        from tenacity import (  # noqa: PLC0415
            AsyncRetrying,
            retry_if_exception,
            stop_after_attempt,
            stop_any,
        )

        past_deadline = _stop_before(deadline)

        def give_up(state: RetryCallState) -> T:
            exc = state.outcome.exception() if state.outcome else None
            assert exc is not None  # tenacity only gives up after a failed attempt
            if state.attempt_number <= self.retries and past_deadline(state):
                raise _deadline_error(exc, state.upcoming_sleep, deadline) from exc
            raise exc

        retrying = AsyncRetrying(
            retry=retry_if_exception(is_retryable),
            stop=stop_any(stop_after_attempt(self.retries + 1), past_deadline),
            wait=self._wait,
            sleep=self.sleep,
            retry_error_callback=give_up,
            reraise=True,
        )
        # tenacity awaits coroutine functions only (``attempt`` is one), not lambdas.
        return await retrying(attempt)


def _stop_before(deadline: Deadline) -> stop_base:
    """A tenacity stop condition: stop when the next wait would end at or past the deadline."""
    from tenacity.stop import stop_base  # noqa: PLC0415 - lazy, as in _retrying

    class StopBeforeDeadline(stop_base):
        def __call__(self, retry_state: RetryCallState) -> bool:
            return retry_state.upcoming_sleep >= deadline.remaining()

    return StopBeforeDeadline()


def _deadline_error(exc: BaseException, wait: float, deadline: Deadline) -> DeadlineExceeded:
    left = deadline.remaining()
    if isinstance(exc, TransientError) and exc.retry_after is not None and exc.retry_after >= left:
        return DeadlineExceeded(
            f"{exc}; the registry asked to be retried in {exc.retry_after:.0f}s, "
            f"past the deadline ({left:.1f}s left)",
            status_code=exc.status_code,
        )
    return DeadlineExceeded(
        f"{exc}; no time left to retry before the deadline "
        f"(next try in {wait:.1f}s, {left:.1f}s left)",
        status_code=exc.status_code if isinstance(exc, RegistryError) else None,
    )
