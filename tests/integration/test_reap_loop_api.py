"""reap's loop and leader election through the real client (``cluster/api.py``, lightkube)
against the Kubernetes API stand-in: the list's version, the watch from it, 410 Gone, and the
Lease's create and update as the API receives them (issue #15)."""

from __future__ import annotations

import asyncio
import time

import pytest

from imagecheck.cluster import (
    Elector,
    KubeCluster,
    LeaseConfig,
    Outcome,
    Reaper,
    ReapLoop,
    ReapOptions,
    Selector,
)
from imagecheck.cluster._model import Gone
from imagecheck.registry import ImageChecker
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s


def test_the_loop_watches_from_its_list_and_a_compacted_version_is_gone(
    kube_api: KubeAPI,
) -> None:
    kube_api.add(k8s.pod("stuck", "ci"), k8s.pod("running", "ci", waiting=None))
    seen: list[Outcome] = []

    async def main() -> None:
        async with (
            await KubeCluster.connect(kube_api.kubeconfig) as cluster,
            ImageChecker() as checker,
        ):
            options = ReapOptions(selector=Selector(namespace="ci"))
            # The stand-in's objects are stamped 2026-12-03T09:00: a day later, all are due.
            reaper = Reaper(cluster, checker, options, clock=lambda: time.time() + 86400)
            loop = ReapLoop(reaper, 60.0, seen.append)
            version = await loop.relist()
            assert version == str(kube_api.store.version)
            kube_api.add(k8s.pod("later", "ci"))
            await loop.follow(version, time.monotonic() + 1.5)
            assert sorted(p.name for p in loop.stuck.values()) == ["later", "stuck"]
            kube_api.store.compact()
            with pytest.raises(Gone):
                await loop.follow(version, time.monotonic() + 5)

    asyncio.run(main())
    # Bare pods: judged once each (left alone without --include-pods), no registry asked.
    assert sorted((o.pod.name, o.why) for o in seen) == [
        ("later", "a bare pod: only with --include-pods"),
        ("stuck", "a bare pod: only with --include-pods"),
    ]
    assert kube_api.writes == []
    watches = [r for r in kube_api.server.requests if "watch=true" in r]
    assert watches and all("resourceVersion=" in r for r in watches)


def test_the_lease_is_created_then_updated_with_the_version_read(kube_api: KubeAPI) -> None:
    kube_api.allow(("get", "leases"), ("create", "leases"), ("update", "leases"))

    async def main() -> list[bool]:
        async with await KubeCluster.connect(kube_api.kubeconfig) as cluster:
            a = Elector(cluster, LeaseConfig("imagecheck-reap", "ops", "a_1"))
            b = Elector(cluster, LeaseConfig("imagecheck-reap", "ops", "b_2"))
            return [
                await a.try_acquire_or_renew(),
                await b.try_acquire_or_renew(),
                await a.try_acquire_or_renew(),
            ]

    assert asyncio.run(main()) == [True, False, True]
    create, renew = kube_api.writes
    assert (create.method, create.path, create.status) == (
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/ops/leases",
        201,
    )
    assert (renew.method, renew.path, renew.status) == (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/ops/leases/imagecheck-reap",
        200,
    )
    assert renew.body["metadata"]["resourceVersion"] == str(int(kube_api.store.version) - 1)
    spec = renew.body["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("a_1", 15)
    assert spec["acquireTime"] == create.body["spec"]["acquireTime"]
