"""``--wait``: poll until images appear, for pipelines that deploy while the image is still
being pushed. Missing and failing images are asked again with growing pauses; found and
denied ones are final (a denial will not fix itself by waiting)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from imagecheck._deadline import Deadline
from imagecheck.reference import Reference
from imagecheck.registry import ImageChecker, Progress, Sleep
from imagecheck.result import CheckResult, Status

KEEP_WAITING = frozenset({Status.MISSING, Status.ERROR})


async def wait_for_images(
    checker: ImageChecker,
    items: Sequence[tuple[str, Reference]],
    *,
    until: Deadline,
    round_seconds: float,
    progress: Callable[[str], None],
    checked: Progress | None = None,
    sleep: Sleep = asyncio.sleep,
    initial: float = 1.0,
    maximum: float = 15.0,
) -> list[CheckResult]:
    """Check ``items`` until none is missing or failing, or ``until`` passes.

    No round starts after ``until``; the last one is checked right at it. Each round has
    ``round_seconds`` (the run's usual deadline) of its own. Pauses between rounds double
    from ``initial`` to ``maximum``. Results are in input order. ``progress`` is told of each
    pause; ``checked``, of each check's end (counted afresh each round).
    """
    latest: dict[str, CheckResult] = {}
    pending = list(items)
    pause = initial
    while pending:
        round_deadline = Deadline.after(round_seconds, until.clock)
        for result in await checker.check_many(pending, round_deadline, checked=checked):
            latest[result.image] = result
        pending = [(image, ref) for image, ref in pending if latest[image].status in KEEP_WAITING]
        left = until.remaining()
        if not pending or left <= 0:
            break
        names = ", ".join(image for image, _ in pending[:3]) + (" ..." if len(pending) > 3 else "")
        delay = min(pause, left)
        progress(
            f"waiting for {len(pending)} image(s): {names}; "
            f"next check in {delay:.0f}s ({left:.0f}s left)"
        )
        await sleep(delay)
        pause = min(maximum, pause * 2)
    return [latest[image] for image, _ in items]
