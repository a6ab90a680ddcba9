"""Leader election (``cluster/lease.py``): two candidates over one in-memory cluster and a fake
clock; client-go's rules (expiry on the candidate's own clock, conflicts lose the round)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagecheck.cluster import Elector, LeaseConfig
from imagecheck.cluster._model import LEASE, ClusterError, Conflict, Forbidden, Kind
from tests.support.fakecluster import FakeCluster

T0 = 1_796_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def electors(cluster: FakeCluster, clock: Clock) -> tuple[Elector, Elector]:
    def one(who: str) -> Elector:
        config = LeaseConfig("imagecheck-reap", "ops", who)
        return Elector(cluster, config, clock=lambda: T0 + clock.now, monotonic=clock)

    return one("a_1"), one("b_2")


def spec(cluster: FakeCluster) -> dict[str, Any]:
    return dict(cluster.objects[("leases", "ops", "imagecheck-reap")]["spec"])


def test_one_holds_the_other_waits_then_takes_an_expired_lease() -> None:
    cluster, clock = FakeCluster(), Clock()
    a, b = electors(cluster, clock)

    async def main() -> list[bool]:
        said = [await a.try_acquire_or_renew(), await b.try_acquire_or_renew()]
        for _ in range(3):  # a renews every 5 s: b never sees it silent for 15 s
            clock.now += 5
            said += [await a.try_acquire_or_renew(), await b.try_acquire_or_renew()]
        renewed = spec(cluster)
        clock.now += 14  # a stopped renewing: not yet 15 s since b saw it change
        said.append(await b.try_acquire_or_renew())
        clock.now += 1
        said.append(await b.try_acquire_or_renew())
        taken = spec(cluster)
        said.append(await a.try_acquire_or_renew())  # a sees b's record: new to it, held
        assert renewed["holderIdentity"] == "a_1" and taken["holderIdentity"] == "b_2"
        assert renewed["acquireTime"] == "2026-11-30T00:53:20.000000Z"  # kept by renewals
        assert renewed["renewTime"] == "2026-11-30T00:53:35.000000Z"
        assert (renewed["leaseTransitions"], taken["leaseTransitions"]) == (0, 1)
        assert taken["leaseDurationSeconds"] == 15
        return said

    assert asyncio.run(main()) == [True, False] + [True, False] * 3 + [False, True, False]
    assert [w.verb for w in cluster.writes] == ["create", "update", "update", "update", "update"]


def test_a_conflict_loses_the_round() -> None:
    class Racing(FakeCluster):
        async def replace(self, kind: Kind, namespace: str, name: str, body: Any) -> Any:
            raise Conflict("leases 'imagecheck-reap' changed since it was read")

    cluster, clock = Racing(), Clock()
    a, _ = electors(cluster, clock)
    cluster.add(LEASE, {"metadata": {"name": "imagecheck-reap", "namespace": "ops"}, "spec": {}})
    assert asyncio.run(a.try_acquire_or_renew()) is False


def test_the_leader_stops_acting_at_once_when_its_lease_is_taken() -> None:
    cluster = FakeCluster()
    config = LeaseConfig(
        "imagecheck-reap", "ops", "a_1", duration=15, renew_deadline=10, retry=0.01
    )
    changes: list[bool] = []
    elector = Elector(cluster, config, on_change=changes.append)
    stopped = []

    async def work() -> None:
        try:
            lease = cluster.objects[("leases", "ops", "imagecheck-reap")]
            lease["spec"]["holderIdentity"] = "b_2"  # another took it (a manual edit)
            lease["metadata"]["resourceVersion"] = "999"
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            stopped.append(True)
            raise

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await elector.run(work)

    asyncio.run(main())
    assert stopped == [True]
    assert changes == [True, False]


def test_release_empties_the_holder_on_a_clean_stop() -> None:
    cluster, clock = FakeCluster(), Clock()
    a, b = electors(cluster, clock)

    async def main() -> bool:
        assert await a.try_acquire_or_renew()
        await a.release()
        return await b.try_acquire_or_renew()  # at once: no 15 s to wait out

    assert asyncio.run(main()) is True
    assert spec(cluster)["holderIdentity"] == "b_2"


def test_api_errors_are_counted_and_a_lost_race_is_not() -> None:
    class Racing(FakeCluster):
        async def replace(self, kind: Kind, namespace: str, name: str, body: Any) -> Any:
            raise Conflict("leases 'imagecheck-reap' changed since it was read")

    cluster, clock = Racing(), Clock()
    errors: list[ClusterError] = []
    config = LeaseConfig("imagecheck-reap", "ops", "a_1")
    a = Elector(cluster, config, monotonic=clock, on_error=errors.append)

    async def main() -> list[bool]:
        said = [await a.try_acquire_or_renew()]  # created: held
        cluster.forbidden.add(("get", "leases"))
        said.append(await a.try_acquire_or_renew())  # refused: an API error
        await a.release()  # refused too: not released, counted
        cluster.forbidden.clear()
        said.append(await a.try_acquire_or_renew())  # lost to a conflict: a race, not an error
        return said

    assert asyncio.run(main()) == [True, False, False]
    assert [type(e) for e in errors] == [Forbidden, Forbidden]
    assert "needs RBAC verb 'get' on resource 'leases'" in str(errors[0])
