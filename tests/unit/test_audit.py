"""``imagecheck audit``'s core (issue #15): which workloads are read from a cluster (owned ones
left to their controller, malformed ones skipped), which pull secrets are read and how often,
and what the registry receives, each distinct image once. The cluster is the in-memory
``FakeCluster``; the registry is respx."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import httpx
import pytest
import respx

from imagecheck.authn import AnonymousKeychain
from imagecheck.cluster import Selector, audit, parse_kind
from imagecheck.cluster._audit import Use, collect
from imagecheck.cluster._model import CRONJOB, DEPLOYMENT, JOB, POD, REPLICASET, SECRET, Kind
from imagecheck.cluster._secrets import read_secrets
from imagecheck.errors import UsageError
from imagecheck.registry import ClientOptions
from imagecheck.result import Status
from tests.support.aio import sync
from tests.support.fakecluster import FakeCluster

DIGEST = "sha256:" + "ab" * 32
RAY = Kind("ray.io/v1", "rayclusters", "rayclusters")


def spec(*images: str, init: str | None = None, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    }
    if init:
        pod["initContainers"] = [{"name": "init", "image": init}]
    if secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in secrets]
    return pod


def obj(name: str, uid: str, *, owner: str | None = None, ns: str = "default", **body: Any) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "X", "name": "x"}]
    return {"metadata": meta, **body}


def templated(pod: dict[str, Any]) -> Any:
    return {"spec": {"template": {"spec": pod}}}


def secret(*, user: str, password: str) -> dict[str, Any]:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = json.dumps({"auths": {"registry.test": {"auth": auth}}}).encode()
    return {"type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(config).decode()}}  # fmt: skip


@pytest.fixture
def cluster() -> FakeCluster:
    """A Deployment with its ReplicaSet and pod, a CronJob with its Job and pod, a bare pod,
    a static pod (owned by a Node, which audit does not list)."""
    fake = FakeCluster()
    fake.add(DEPLOYMENT, obj("web", "d1", **templated(spec("registry.test/web:1"))))
    fake.add(REPLICASET, obj("web-1", "r1", owner="d1", **templated(spec("registry.test/web:1"))))
    fake.add(POD, obj("web-1-a", "p1", owner="r1", spec=spec("registry.test/web:1")))
    job_template: Any = {"spec": {"jobTemplate": templated(spec("registry.test/batch:2"))}}
    fake.add(CRONJOB, obj("nightly", "c1", **job_template))
    fake.add(JOB, obj("nightly-1", "j1", owner="c1", **templated(spec("registry.test/batch:2"))))
    fake.add(POD, obj("nightly-1-a", "p2", owner="j1", spec=spec("registry.test/batch:2")))
    bare = spec("registry.test/debug:1", init="registry.test/setup:1")
    fake.add(POD, obj("debug", "p3", ns="ops", spec=bare))
    fake.add(POD, obj("etcd-node1", "p4", ns="kube-system", owner="node-uid",
                      spec=spec("registry.k8s.io/etcd:3.5")))  # fmt: skip
    return fake


@sync
async def test_owned_workloads_are_left_to_their_controller(cluster: FakeCluster) -> None:
    inventory = await collect(cluster, Selector())
    assert inventory.uses == [
        Use("default", "CronJob", "nightly", "c0", "registry.test/batch:2"),
        Use("default", "Deployment", "web", "c0", "registry.test/web:1"),
        Use("kube-system", "Pod", "etcd-node1", "c0", "registry.k8s.io/etcd:3.5"),
        Use("ops", "Pod", "debug", "c0", "registry.test/debug:1"),
        Use("ops", "Pod", "debug", "init", "registry.test/setup:1"),
    ]
    assert inventory.skipped == 0


@sync
async def test_namespace_selector(cluster: FakeCluster) -> None:
    inventory = await collect(cluster, Selector(namespace="ops"))
    assert {(u.name, u.container) for u in inventory.uses} == {("debug", "c0"), ("debug", "init")}


@sync
async def test_a_custom_kind_is_listed_first_and_owns_its_pods() -> None:
    fake = FakeCluster()
    ray: Any = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "spec": {"headGroupSpec": templated(spec("registry.test/ray:2"))["spec"]}}  # fmt: skip
    fake.add(RAY, obj("r", "ray1", **ray))
    fake.add(POD, obj("r-head", "p1", owner="ray1", spec=spec("registry.test/ray:2")))
    without = await collect(fake, Selector())
    assert [(u.kind, u.name) for u in without.uses] == [("Pod", "r-head")]
    inventory = await collect(fake, Selector(), [RAY])
    assert [(u.kind, u.name) for u in inventory.uses] == [("RayCluster", "r")]


@sync
async def test_malformed_objects_and_containers_are_skipped_with_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeCluster()
    pod = {"containers": [{"name": "a", "image": 42}, {"name": "b", "image": "registry.test/b:1"}]}
    fake.add(POD, obj("ok", "p1", spec=pod))
    fake.objects[("pods", "default", "broken")] = {"metadata": {"name": ["x"]}}
    fake.objects[("pods", "default", "worse")] = {"metadata": {"namespace": "default"}}
    with caplog.at_level(logging.WARNING, logger="imagecheck.audit"):
        inventory = await collect(fake, Selector())
    assert [(u.name, u.container) for u in inventory.uses] == [("ok", "b")]
    assert inventory.skipped == 3
    assert len(caplog.records) == 3


class CountingCluster(FakeCluster):
    gets: list[tuple[str, str, str]]

    async def get(self, kind: Kind, namespace: str, name: str) -> Any:
        self.gets.append((kind.plural, namespace, name))
        return await super().get(kind, namespace, name)


def two_teams(cluster: FakeCluster) -> None:
    """Two namespaces' workloads share one image, each with its own secret ``regcred``;
    ``a`` holds a wrong password, ``b`` the right one."""
    for ns, password in (("a", "wrong"), ("b", "s3cret")):
        cluster.add(SECRET, {"metadata": {"name": "regcred", "namespace": ns},
                             **secret(user="bot", password=password)})  # fmt: skip
        for name in ("one", "two"):
            pod = spec("registry.test/app:1", secrets=("regcred",))
            cluster.add(DEPLOYMENT, obj(name, f"{ns}{name}", ns=ns, **templated(pod)))


@sync
async def test_each_secret_is_read_once_and_every_user_of_an_image_offers_its_own(
    network: respx.MockRouter, small_trust_store: None
) -> None:
    cluster = CountingCluster()
    cluster.gets = []
    two_teams(cluster)
    good = "Basic " + base64.b64encode(b"bot:s3cret").decode()
    network.get("https://registry.test/v2/").respond(
        401, headers={"WWW-Authenticate": 'Basic realm="r"'}
    )

    def manifest(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") != good:
            return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="r"'})
        return httpx.Response(200, headers={"Docker-Content-Digest": DIGEST})

    head = network.head("https://registry.test/v2/app/manifests/1").mock(side_effect=manifest)
    report = await audit(cluster, Selector(), ClientOptions(retries=0), AnonymousKeychain())
    assert sorted(cluster.gets) == [("secrets", "a", "regcred"), ("secrets", "b", "regcred")]
    assert report.results["registry.test/app:1"].status is Status.FOUND
    assert len(report.uses) == 4
    assert head.calls.last.request.headers["Authorization"] == good


@sync
async def test_forbidden_secrets_warn_once_per_namespace_and_never_show_a_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster(forbidden={("get", "secrets")})
    two_teams(cluster)
    wanted = [("a", "regcred"), ("a", "other"), ("b", "regcred"), ("c", "absent")]
    with caplog.at_level(logging.WARNING, logger="imagecheck.audit"):
        texts = await read_secrets(cluster, wanted)
    assert texts == {}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3  # a, b, c: one each
    assert all("needs RBAC verb 'get' on resource 'secrets'" in line for line in lines)
    assert not any("s3cret" in line or "wrong" in line for line in lines)


@sync
async def test_a_missing_or_broken_secret_is_a_warning_and_the_rest_are_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    two_teams(cluster)
    cluster.add(SECRET, {"metadata": {"name": "opaque", "namespace": "a"}, "data": {"x": "eA=="}})
    with caplog.at_level(logging.WARNING, logger="imagecheck.audit"):
        texts = await read_secrets(cluster, [("a", "absent"), ("a", "opaque"), ("b", "regcred")])
    assert list(texts) == [("b", "regcred")]
    auth = json.loads(texts[("b", "regcred")])["auths"]["registry.test"]["auth"]
    assert base64.b64decode(auth) == b"bot:s3cret"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "pull secret a/absent does not exist: not used",
        "pull secret not used: secret a/opaque holds neither .dockerconfigjson nor .dockercfg",
    ]


@sync
async def test_invalid_images_are_results_and_the_rest_are_checked(
    network: respx.MockRouter, small_trust_store: None
) -> None:
    cluster = FakeCluster()
    cluster.add(POD, obj("p", "p1", spec=spec("registry.test/app:1", "Not Valid")))
    network.get("https://registry.test/v2/").respond(200)
    network.head("https://registry.test/v2/app/manifests/1").respond(404)
    report = await audit(cluster, Selector(), ClientOptions(retries=0), AnonymousKeychain())
    assert report.results["Not Valid"].status is Status.INVALID
    assert report.results["registry.test/app:1"].status is Status.MISSING


@pytest.mark.parametrize(
    ("text", "api_version", "plural"),
    [("rayclusters.ray.io/v1", "ray.io/v1", "rayclusters"),
     ("rollouts.argoproj.io/v1alpha1", "argoproj.io/v1alpha1", "rollouts")],
    ids=["ray", "argo"],
)  # fmt: skip
def test_parse_kind(text: str, api_version: str, plural: str) -> None:
    kind = parse_kind(text)
    assert (kind.api_version, kind.plural) == (api_version, plural)


@pytest.mark.parametrize("text", ["pods", "rayclusters/v1", "rayclusters.ray.io", "a.b/v1/x"])
def test_parse_kind_refuses(text: str) -> None:
    with pytest.raises(UsageError, match=r"plural\.group/version"):
        parse_kind(text)
