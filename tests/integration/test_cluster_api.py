"""KubeCluster (lightkube) against the Kubernetes API stand-in: what it sends, what it makes
of what the API answers, hostile answers included (issue #15)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from imagecheck.cluster import KubeCluster, Selector
from imagecheck.cluster import _api as api
from imagecheck.cluster._model import (
    EVENT,
    JOB,
    LEASE,
    POD,
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Unreachable,
)
from imagecheck.errors import UsageError
from tests.support.kubeapi import KubeAPI, Write
from tests.support.kubeapi import objects as k8s
from tests.support.kubeapi.store import Resource, resource_of

T = TypeVar("T")


def run(kube_api: KubeAPI, body: Callable[[KubeCluster], Awaitable[T]]) -> T:
    async def main() -> T:
        async with await KubeCluster.connect(kube_api.kubeconfig) as cluster:
            return await body(cluster)

    return asyncio.run(main())


async def names(cluster: KubeCluster, selector: Selector = Selector()) -> list[str]:  # noqa: B008
    return [obj["metadata"]["name"] async for obj in cluster.list(POD, selector)]


def test_list_pages_through_1200_pods_500_at_a_time(kube_api: KubeAPI) -> None:
    kube_api.add(*(k8s.pod(f"p{i:04}", namespace="ci") for i in range(1200)))

    async def body(cluster: KubeCluster) -> list[dict[str, Any]]:
        return [obj async for obj in cluster.list(POD, Selector(namespace="ci"))]

    pods = run(kube_api, body)
    assert [p["metadata"]["name"] for p in pods] == [f"p{i:04}" for i in range(1200)]
    # A list's items come without apiVersion/kind; KubeCluster fills them in.
    assert {(p["apiVersion"], p["kind"]) for p in pods} == {("v1", "Pod")}
    lists = [r for r in kube_api.server.requests if r.startswith("GET /api/v1/namespaces/ci/pods")]
    assert len(lists) == 3
    assert all("limit=500" in r for r in lists)
    assert "continue=500" in lists[1] and "continue=1000" in lists[2]


def test_list_by_label_and_namespace(kube_api: KubeAPI) -> None:
    kube_api.add(
        k8s.pod("a", "ci", labels={"team": "ml"}),
        k8s.pod("b", "ci", labels={"team": "web"}),
        k8s.pod("c", "prod", labels={"team": "ml"}),
    )

    async def body(cluster: KubeCluster) -> tuple[list[str], list[str], list[str]]:
        return (
            await names(cluster, Selector(labels="team=ml")),
            await names(cluster, Selector(namespace="ci", labels="team=ml")),
            await names(cluster),
        )

    assert run(kube_api, body) == (["a", "c"], ["a"], ["a", "b", "c"])
    assert "GET /api/v1/pods?limit=500&labelSelector=team%3Dml" in kube_api.server.requests


def test_a_selector_other_than_equality_is_refused() -> None:
    with pytest.raises(UsageError, match="key=value"):
        api._labels("team!=ml")


def test_get_missing_is_none_and_delete_missing_is_no_error(kube_api: KubeAPI) -> None:
    (job,) = kube_api.add(k8s.job("train", "ci", cronjob_name="nightly"))

    async def body(cluster: KubeCluster) -> tuple[Any, Any]:
        await cluster.delete(POD, "ci", "gone-already")
        return await cluster.get(JOB, "ci", "missing"), await cluster.get(JOB, "ci", "train")

    missing, found = run(kube_api, body)
    assert missing is None
    assert found == job
    assert found["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert [(w.method, w.path, w.status) for w in kube_api.writes] == [
        ("DELETE", "/api/v1/namespaces/ci/pods/gone-already", 404)
    ]


def test_merge_patch_is_sent_as_given(kube_api: KubeAPI) -> None:
    (job,) = kube_api.add(k8s.job("train", "ci"))
    patch = {
        "metadata": {
            "annotations": {
                "imagecheck.io/reaped": "missing registry.example.com/team/train:1.0.1"
            },
            "resourceVersion": job["metadata"]["resourceVersion"],
        },
        "spec": {"activeDeadlineSeconds": 1},
    }
    patched = run(kube_api, lambda cluster: cluster.patch(JOB, "ci", "train", patch))

    assert kube_api.writes == [
        Write(
            "PATCH",
            "/apis/batch/v1/namespaces/ci/jobs/train",
            "application/merge-patch+json",
            patch,
            200,
        )
    ]
    assert patched["spec"]["activeDeadlineSeconds"] == 1
    assert patched["metadata"]["annotations"]["batch.kubernetes.io/job-tracking"] == ""  # merged
    assert patched["metadata"]["resourceVersion"] != job["metadata"]["resourceVersion"]


def test_stale_versions_conflict_and_taken_names_already_exist(kube_api: KubeAPI) -> None:
    (job,) = kube_api.add(k8s.job("train", "ci"))
    (lease,) = kube_api.add(k8s.lease("imagecheck-reap", "ci", holder="a"))
    stale = {"metadata": {"resourceVersion": "1"}, "spec": {"activeDeadlineSeconds": 1}}

    async def body(cluster: KubeCluster) -> list[type[Exception]]:
        raised: list[type[Exception]] = []
        attempts: list[Awaitable[Any]] = [
            cluster.patch(JOB, "ci", "train", stale),
            cluster.replace(
                JOB, "ci", "train", {**job, "metadata": {**job["metadata"], "resourceVersion": "1"}}
            ),
            cluster.create(JOB, "ci", k8s.job("train", "ci")),
        ]
        for attempt in attempts:
            with pytest.raises((Conflict, AlreadyExists)) as info:
                await attempt
            raised.append(info.type)
        # A renewal at the current version goes through.
        renewed = {**lease, "spec": {**lease["spec"], "holderIdentity": "b"}}
        assert (await cluster.replace(LEASE, "ci", "imagecheck-reap", renewed))["spec"][
            "holderIdentity"
        ] == "b"
        return raised

    assert run(kube_api, body) == [Conflict, Conflict, AlreadyExists]
    assert [w.status for w in kube_api.writes] == [409, 409, 409, 200]
    assert kube_api.store.get(_jobs(), "ci", "train") == job  # untouched


def _jobs() -> Resource:
    return resource_of("batch/v1", "Job")


def test_forbidden_names_the_verb_and_resource_and_writes_nothing(kube_api: KubeAPI) -> None:
    kube_api.add(k8s.job("train", "ci"))
    kube_api.allow(("list", "pods"), ("get", "jobs"))

    async def body(cluster: KubeCluster) -> list[Forbidden]:
        refused = []
        for attempt in (
            cluster.patch(JOB, "ci", "train", {"spec": {"activeDeadlineSeconds": 1}}),
            cluster.create(EVENT, "ci", {"metadata": {"name": "e"}, "reason": "ImageMissing"}),
        ):
            with pytest.raises(Forbidden) as info:
                await attempt
            refused.append(info.value)
        with pytest.raises(Forbidden) as info:
            [obj async for obj in cluster.list(JOB)]
        refused.append(info.value)
        return refused

    patch, event, listing = run(kube_api, body)
    assert (
        str(patch) == "forbidden: needs RBAC verb 'patch' on resource 'jobs' (apiGroups: [batch])"
        " in namespace 'ci'"
    )
    assert (event.verb, event.kind.plural, event.namespace) == ("create", "events", "ci")
    assert str(listing).endswith("on resource 'jobs' (apiGroups: [batch]) cluster-wide")
    assert [w.status for w in kube_api.writes] == [403, 403]
    assert kube_api.store.get(_jobs(), "ci", "train")["spec"].get("activeDeadlineSeconds") is None


@pytest.mark.parametrize("as_status", [False, True], ids=["error-event", "http-410"])
def test_watch_streams_changes_then_a_compacted_version_is_gone(
    kube_api: KubeAPI, as_status: bool
) -> None:
    kube_api.server.gone_as_status = as_status
    start = str(kube_api.store.version)
    kube_api.add(k8s.pod("stuck", "ci"), k8s.job("train", "ci"), k8s.pod("other", "prod"))

    async def first(cluster: KubeCluster, since: str) -> tuple[str, dict[str, Any]]:
        async with contextlib.aclosing(
            cluster.watch(POD, Selector(namespace="ci"), since)
        ) as events:
            async for change in events:
                return change
        raise AssertionError("the watch ended")

    change, obj = run(kube_api, lambda cluster: first(cluster, start))
    assert (change, obj["kind"], obj["metadata"]["name"]) == ("ADDED", "Pod", "stuck")

    kube_api.store.compact()
    with pytest.raises(Gone, match="too old"):
        run(kube_api, lambda cluster: first(cluster, start))


def test_a_snapshot_gives_the_lists_version_and_a_watch_from_it_misses_nothing(
    kube_api: KubeAPI,
) -> None:
    kube_api.add(*(k8s.pod(f"p{i:04}", namespace="ci") for i in range(600)))  # two pages
    listed_at = str(kube_api.store.version)

    async def body(cluster: KubeCluster) -> tuple[int, str, str, str]:
        listing = cluster.snapshot(POD, Selector(namespace="ci"))
        before = listing.resource_version
        count = len([obj async for obj in listing])
        kube_api.add(k8s.pod("later", "ci"))  # after the list: the watch must see it
        async with contextlib.aclosing(
            cluster.watch(POD, Selector(namespace="ci"), listing.resource_version)
        ) as events:
            async for change, obj in events:
                return (
                    count,
                    before,
                    listing.resource_version,
                    f"{change} {obj['metadata']['name']}",
                )
        raise AssertionError("the watch ended")

    assert run(kube_api, body) == (600, "", listed_at, "ADDED later")


def test_an_empty_snapshot_has_a_version_too(kube_api: KubeAPI) -> None:
    async def body(cluster: KubeCluster) -> str:
        listing = cluster.snapshot(POD)
        assert [obj async for obj in listing] == []
        return listing.resource_version

    assert run(kube_api, body) == str(kube_api.store.version)


def test_objects_without_a_name_are_skipped_with_a_log_line(
    kube_api: KubeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    kube_api.add(k8s.pod("good", "ci"))
    kube_api.store.add_raw("pods", "ci", "z1", {"spec": {}})  # no metadata
    kube_api.store.add_raw("pods", "ci", "z2", {"metadata": {"name": 7}})
    kube_api.store.add_raw("pods", "ci", "z3", {"metadata": "x"})
    with caplog.at_level(logging.WARNING, logger="imagecheck.cluster._api"):
        assert run(kube_api, names) == ["good"]
    assert [r.getMessage() for r in caplog.records] == [
        "skipped a Pod that is not an object with metadata.name"
    ] * 3


@pytest.mark.parametrize(
    "raw",
    ["not an object", 5e400, "1" + "0" * 30, "[" * 100_000],
    ids=["string-item", "huge-float", "big-int", "deep-nesting"],
)
def test_an_unreadable_page_is_one_error(kube_api: KubeAPI, raw: Any) -> None:
    """lightkube decodes a page whole: an item that is not an object fails the page (the
    real API never sends one), as one error, never a traceback."""
    kube_api.add(k8s.pod("good", "ci"))
    kube_api.store.add_raw("pods", "ci", "z", raw)
    with pytest.raises(Unreachable, match="unreadable answer to list pods"):
        run(kube_api, names)


def test_an_oversized_page_is_refused_not_held(kube_api: KubeAPI) -> None:
    big = k8s.pod("big", "ci")
    big["metadata"]["annotations"] = {"x": "a" * (api.MAX_RESPONSE + 1)}
    kube_api.add(big)
    with pytest.raises(Unreachable, match=f"over {api.MAX_RESPONSE}"):
        run(kube_api, names)


def test_an_unknown_context_is_a_usage_error(kube_api: KubeAPI) -> None:
    async def main() -> None:
        await KubeCluster.connect(kube_api.kubeconfig, context="nope")

    with pytest.raises(UsageError, match="Context 'nope' not found"):
        asyncio.run(main())
