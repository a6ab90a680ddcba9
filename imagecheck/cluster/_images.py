"""Asking the registry about a workload's images, as the controllers (``reap``, ``gate``,
``kueue-check``) do it: each distinct image, read with the same pull secrets, once a pass,
by at most the checker's concurrency at a time; a name that does not parse is *invalid*
without a request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, Protocol, TypeVar

from imagecheck._deadline import Deadline
from imagecheck._text import printable
from imagecheck.authn import Keychain
from imagecheck.cluster._fields import now
from imagecheck.cluster._model import Cluster
from imagecheck.cluster._secrets import KeychainFor, PodKeychains
from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import parse_reference
from imagecheck.registry import ImageChecker
from imagecheck.result import CheckResult, Status

# What a verdict depends on: the image, and the namespace and names of the pull secrets it
# is read with (no namespace when there are none: the shared sources answer alike anywhere).
VerdictKey = tuple[str, str, tuple[str, ...]]
Verdicts = dict[VerdictKey, CheckResult]
T = TypeVar("T")


class PassOptions(Protocol):
    @property
    def deadline(self) -> float:
        """Seconds for one image's check, retries included."""
        ...


Opts = TypeVar("Opts", bound=PassOptions)
# What one annotation or event message may hold of a registry's words: a registry's error
# body is remote text (annotations may hold 256 KiB in all; the reason needs a line).
MAX_REASON = 300


class ImagePass(Generic[Opts]):
    """What a controller's pass holds: the cluster, the registry checker, its options, its
    clock, and the keychains of the pods it reads (one instance per process)."""

    def __init__(
        self,
        cluster: Cluster,
        checker: ImageChecker,
        options: Opts,
        *,
        keychain_for: KeychainFor | None = None,
        clock: Callable[[], float] = now,
    ) -> None:
        self.cluster = cluster
        self.checker = checker
        self.options = options
        self.clock = clock
        self.keychains = PodKeychains(cluster, keychain_for)

    async def check(self, image: str, keychain: Keychain | None) -> CheckResult:
        """The registry's answer for ``image`` within the options' deadline."""
        return await check_image(self.checker, image, keychain, self.options.deadline)


def verdict_key(image: str, namespace: str, pull_secrets: tuple[str, ...]) -> VerdictKey:
    return (image, namespace if pull_secrets else "", pull_secrets)


async def check_image(
    checker: ImageChecker, image: str, keychain: Keychain | None, deadline: float
) -> CheckResult:
    """The registry's answer for ``image`` read with ``keychain`` (None: the shared sources
    alone), within ``deadline`` seconds, retries included."""
    try:
        ref = parse_reference(image)
    except InvalidReferenceError as exc:
        return CheckResult(image, None, Status.INVALID, exc.reason)
    return await checker.check(ref, Deadline.after(deadline), image=image, keychain=keychain)


async def check_each(
    checker: ImageChecker, todo: Iterable[T], check: Callable[[T], Awaitable[None]]
) -> None:
    """``check`` each of ``todo`` (already distinct) by as many workers as the checker's
    concurrency: a pass of 200 pods on 50 images waits for the slowest registry, not for the
    sum of them."""
    items = list(todo)
    pending = iter(items)

    async def worker() -> None:
        for item in pending:
            await check(item)

    async with asyncio.TaskGroup() as group:
        for _ in range(min(max(1, checker.options.concurrency), len(items))):
            group.create_task(worker())


def reason_text(verdict: Status, image: str, message: str) -> str:
    """``missing registry.example.com/team/train:1.0.1 (manifest unknown)``, bounded."""
    said = printable(message, MAX_REASON)
    return f"{verdict.value} {image}" + (f" ({said})" if said else "")
