"""The in-memory Cluster the unit tests of cluster mode use: it must behave as the API does
where the tests lean on it (merge patches, conflicts, refusals, selectors)."""

from __future__ import annotations

import asyncio

import pytest

from imagecheck.cluster import Cluster, Selector
from imagecheck.cluster._model import JOB, POD, Conflict, Forbidden
from tests.support.fakecluster import FakeCluster, merge_patch


def test_merge_patch_follows_rfc_7386() -> None:
    # RFC 7386, appendix A, a few of its cases.
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch(["a", "b"], {"a": "c"}) == {"a": "c"}


def test_is_a_cluster_with_conflicts_refusals_and_a_write_log() -> None:
    fake = FakeCluster()
    cluster: Cluster = fake  # mypy holds the fake to the protocol
    fake.add(JOB, {"metadata": {"name": "train", "namespace": "ml", "labels": {"team": "a"}}})
    fake.add(POD, {"metadata": {"name": "p", "namespace": "other"}})

    async def main() -> None:
        job = await cluster.get(JOB, "ml", "train")
        assert job is not None
        stale = {"metadata": {"resourceVersion": "1"}, "spec": {"activeDeadlineSeconds": 1}}
        with pytest.raises(Conflict):
            await cluster.patch(JOB, "ml", "train", stale)
        fresh = {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}}
        patched = await cluster.patch(JOB, "ml", "train", {**fresh, "spec": {"suspend": True}})
        assert patched["spec"] == {"suspend": True}
        assert [o["metadata"]["name"] async for o in cluster.list(JOB, Selector(labels="team=a"))]
        assert [o async for o in cluster.list(POD, Selector(namespace="ml"))] == []
        fake.forbidden.add(("delete", "pods"))
        with pytest.raises(Forbidden, match="'delete' on resource 'pods'"):
            await cluster.delete(POD, "other", "p")

    asyncio.run(main())
    assert [w.verb for w in fake.writes] == ["patch", "patch", "delete"]


def test_a_snapshot_holds_the_version_a_watch_from_it_starts_after() -> None:
    fake = FakeCluster()
    cluster: Cluster = fake
    fake.add(POD, {"metadata": {"name": "a", "namespace": "ci"}})

    async def main() -> tuple[list[str], list[tuple[str, str]]]:
        listing = cluster.snapshot(POD, Selector(namespace="ci"))
        names = [o["metadata"]["name"] async for o in listing]
        fake.add(POD, {"metadata": {"name": "b", "namespace": "ci"}})
        changes = cluster.watch(POD, Selector(), listing.resource_version)
        return names, [(change, o["metadata"]["name"]) async for change, o in changes]

    assert asyncio.run(main()) == (["a"], [("ADDED", "b")])
