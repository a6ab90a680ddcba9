"""``imagecheck reap``'s loop (``cluster/reap_loop.py``) over the in-memory cluster: list, then
watch from the list's version, act on each stuck pod once; Gone relists, Unreachable backs off."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import httpx
import pytest

from imagecheck.cluster import Outcome, Reaper, ReapLoop, ReapOptions, Selector
from imagecheck.cluster._model import JOB, POD, Gone, Kind, Unreachable
from imagecheck.cluster._reap import Action
from imagecheck.registry import ClientOptions, ImageChecker
from tests.support.fakecluster import FakeCluster
from tests.support.reapcase import NOW, Setup, job, pod


@pytest.fixture
def setup(small_trust_store: None) -> Setup:
    return Setup()


def run_loop(
    setup: Setup, body: Callable[[ReapLoop], Coroutine[Any, Any, None]], **options: Any
) -> list[Outcome]:
    outcomes: list[Outcome] = []

    async def main() -> None:
        transport = httpx.MockTransport(setup.router.async_handler)
        async with ImageChecker(ClientOptions(retries=0), transport=transport) as checker:
            reaper = Reaper(setup.cluster, checker, ReapOptions(**options), clock=lambda: NOW)
            await body(ReapLoop(reaper, 0.05, outcomes.append, sleep=sleeps.append_async))

    sleeps.clear()
    asyncio.run(main())
    return outcomes


class _Sleeps(list[float]):
    async def append_async(self, seconds: float) -> None:
        self.append(seconds)


sleeps = _Sleeps()


def two_jobs(cluster: FakeCluster) -> None:
    for name in ("a", "b"):
        cluster.add(JOB, job(name))


def stuck(name: str, **extra: Any) -> dict[str, Any]:
    return pod(name, owner=("Job", name, f"uid-{name}"), **extra)


def test_a_pod_stuck_after_the_list_is_acted_on_from_the_watch(setup: Setup) -> None:
    two_jobs(setup.cluster)
    setup.cluster.add(POD, stuck("a"))

    async def body(loop: ReapLoop) -> None:
        version = await loop.relist()
        setup.cluster.add(POD, stuck("b"))  # after the list: only the watch sees it
        setup.cluster.add(POD, {"metadata": {"name": "fine", "namespace": "ml"}})
        await loop.follow(version, time.monotonic() + 0.1)

    outcomes = run_loop(setup, body)
    assert [(o.pod.name, o.action) for o in outcomes] == [("a", Action.ACTED), ("b", Action.ACTED)]
    assert [w.name for w in setup.cluster.writes if w.kind == "jobs"] == ["a", "b"]


def test_a_pod_is_acted_on_once_however_its_status_flaps(setup: Setup) -> None:
    setup.cluster.add(JOB, job("a", spec={"activeDeadlineSeconds": 99999}))
    setup.cluster.add(POD, stuck("a", image="registry.test/team/secret:1.0"))  # denied

    async def body(loop: ReapLoop) -> None:
        await loop.relist()
        for reason in ("ErrImagePull", "ImagePullBackOff", "ErrImagePull"):
            loop.apply("MODIFIED", stuck("a", image="registry.test/team/secret:1.0", reason=reason))
            await loop.act_on_due()
        assert list(loop.stuck) == ["uid-a"]
        loop.apply("DELETED", stuck("a"))
        assert loop.stuck == {} and loop.settled == set()

    [outcome] = run_loop(setup, body)
    assert (outcome.action, outcome.verdict) == (Action.SKIPPED, "denied")
    assert len(setup.manifest_requests()) == 1


def test_a_pod_within_grace_is_acted_on_when_its_grace_is_up(setup: Setup) -> None:
    setup.cluster.add(JOB, job("a"))
    setup.cluster.add(POD, stuck("a", stuck_for=30))  # 90 s of grace left at NOW
    clock = [NOW]

    async def body(loop: ReapLoop) -> None:
        loop.reaper.clock = lambda: clock[0]
        await loop.relist()
        assert loop._next_due() == pytest.approx(90)
        clock[0] += 90
        await loop.act_on_due()

    [outcome] = run_loop(setup, body)
    assert outcome.action is Action.ACTED


def test_gone_lists_again_at_once_and_unreachable_backs_off(setup: Setup) -> None:
    class Failing(FakeCluster):
        failures: list[Exception] = [Gone("too old"), Unreachable("no route")]  # noqa: RUF012
        lists = 0

        def snapshot(self, kind: Kind, selector: Selector = Selector()) -> Any:  # noqa: B008
            self.lists += 1
            return super().snapshot(kind, selector)

        async def watch(
            self, kind: Kind, selector: Selector, resource_version: str
        ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
            if self.failures:
                raise self.failures.pop(0)
            async for change in super().watch(kind, selector, resource_version):
                yield change

    cluster = setup.cluster = Failing()
    cluster.add(JOB, job("a"))
    cluster.add(POD, stuck("a"))
    outcomes = run_loop(setup, lambda loop: loop.run(lists=3))
    assert cluster.lists == 3
    assert sleeps == [1.0]  # Gone: no wait; Unreachable: the backoff's first step
    # Each list judges afresh; the Job's annotation makes the second and third a no-op.
    assert [o.action for o in outcomes] == [Action.ACTED, Action.SKIPPED, Action.SKIPPED]
    assert "reaped already" in outcomes[1].why


def test_stuck_pods_kept_are_bounded(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    async def body(loop: ReapLoop) -> None:
        for i in range(5):
            loop.apply("ADDED", stuck(f"p{i}", stuck_for=0))
        assert list(loop.stuck) == ["uid-p0", "uid-p1"]

    run_loop(setup, body, max_stuck=2)
    assert [r.getMessage() for r in caplog.records if "stuck pods" in r.getMessage()] == [
        "more than 2 stuck pods: the rest wait for the next list"
    ]
