"""``imagecheck reap`` over 10,000 pods (issue #15): the stuck pods kept are capped, in a pass
and in the loop's list, whatever the cluster's size. Memory figures are the benchmark's
(``benchmarks/reap_scale.py``); this asserts the caps only."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from imagecheck.cluster import Reaper, ReapLoop, ReapOptions
from imagecheck.cluster._reap import Action
from imagecheck.registry import ClientOptions, ImageChecker
from tests.support.manypods import ManyPods
from tests.support.reapcase import NOW, Setup


@pytest.fixture
def setup(small_trust_store: None) -> Setup:
    return Setup(cluster=ManyPods(10_000, 300))


def test_a_pass_over_10000_pods_keeps_at_most_max_stuck(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        outcomes = setup.run(max_stuck=100, dry_run=True)
    assert len(outcomes) == 100
    assert {o.pod.name for o in outcomes} == {f"job-{n}-abcde" for n in range(100)}
    assert {o.action for o in outcomes} == {Action.WOULD_ACT, Action.SKIPPED}  # found: skipped
    assert "more than 100 stuck pods: the rest wait for the next pass" in caplog.text
    assert len(setup.manifest_requests()) == 2  # two distinct images, each asked once


def test_the_loops_list_over_10000_pods_keeps_at_most_max_stuck(setup: Setup) -> None:
    seen: list[object] = []

    async def main() -> ReapLoop:
        transport = httpx.MockTransport(setup.router.async_handler)
        async with ImageChecker(ClientOptions(retries=0), transport=transport) as checker:
            options = ReapOptions(max_stuck=100, dry_run=True)
            loop = ReapLoop(
                Reaper(setup.cluster, checker, options, clock=lambda: NOW), 60, seen.append
            )
            await loop.relist()
            return loop

    loop = asyncio.run(main())
    assert len(loop.stuck) == 100 and len(seen) == 100
    assert setup.cluster.writes == []
