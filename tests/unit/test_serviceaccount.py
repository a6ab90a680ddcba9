"""The ServiceAccount admission plugin's rule for pull secrets, as imagecheck reads it
(``imagecheck.kube._serviceaccount``), and the webhook's and audit's ServiceAccount reads:
a template that names pull secrets keeps only those; one that names none gets its
ServiceAccount's (``serviceAccountName``, else ``serviceAccount``, else ``default``), in order;
a missing or forbidden ServiceAccount is a warning naming it and the permission."""

from __future__ import annotations

import logging
from typing import Any
from unittest import mock

import pytest

from imagecheck.cluster._audit import Inventory, add_account_secrets, collect
from imagecheck.cluster._model import DEPLOYMENT, POD, SERVICEACCOUNT, Selector
from imagecheck.cluster._secrets import read_service_accounts
from imagecheck.errors import RegistryError
from imagecheck.kube import service_account_pull_secrets, service_accounts
from imagecheck.webhook._accounts import AccountSecrets
from tests.support.aio import sync
from tests.support.fakecluster import FakeCluster


def deployment(**pod: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "app", "image": "registry.test/app:1"}], **pod}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "d1"},
        "spec": {"template": {"spec": spec}},
    }


def account(name: str, *secrets: Any) -> dict[str, Any]:
    items = [{"name": s} if isinstance(s, str) else s for s in secrets]
    return {"metadata": {"name": name, "namespace": "shop"}, "imagePullSecrets": items}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({}, ["default"]),
        ({"serviceAccountName": "builder"}, ["builder"]),
        ({"serviceAccount": "legacy"}, ["legacy"]),
        ({"serviceAccountName": "builder", "serviceAccount": "legacy"}, ["builder"]),
        ({"serviceAccountName": ""}, ["default"]),
        ({"imagePullSecrets": [{"name": "regcred"}]}, []),
        ({"imagePullSecrets": [{}], "serviceAccountName": "builder"}, []),  # len() counts
        ({"imagePullSecrets": [], "serviceAccountName": "builder"}, ["builder"]),
    ],
    ids=["default", "name", "deprecated", "name-wins", "empty-name", "own-secrets",
         "unnamed-entry", "empty-list"],
)  # fmt: skip
def test_the_service_account_of_a_template_without_pull_secrets(
    pod: dict[str, Any], expected: list[str]
) -> None:
    assert service_accounts(deployment(**pod)) == expected


def test_a_pod_has_been_through_the_plugin_and_is_not_looked_up() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"image": "a"}]}}
    assert service_accounts(pod) == []


def test_each_template_of_a_custom_kind_and_an_enclosing_spec() -> None:
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {
        "headGroupSpec": {"template": {"spec": {
            "containers": [{"image": "a"}], "imagePullSecrets": [{"name": "head"}]}}},
        "workerGroupSpecs": [
            {"template": {"spec": {"containers": [{"image": "a"}], "serviceAccountName": "w"}}},
            {"template": {"spec": {"containers": [{"image": "b"}]}}},
        ]}}  # fmt: skip
    assert service_accounts(ray) == ["w", "default"]
    argo: dict[str, Any] = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "spec": {
        "serviceAccountName": "runner",
        "templates": [{"containerSet": {"containers": [{"image": "a"}]}}]}}  # fmt: skip
    assert service_accounts(argo) == ["runner"]
    argo["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    assert service_accounts(argo) == []


def test_a_service_accounts_pull_secrets_in_order_each_once() -> None:
    sa = account("builder", "b", "a", "b", {}, {"name": 7})
    assert service_account_pull_secrets(sa) == ["b", "a"]
    assert service_account_pull_secrets({"imagePullSecrets": "x"}) == []


# -- the webhook: read through KubeClient, kept for a minute, bounded -------------------------


def kube(answers: dict[str, Any]) -> mock.Mock:
    def get(name: str, namespace: str) -> Any:
        answer = answers[name]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return mock.Mock(service_account=mock.Mock(side_effect=get))


@sync
async def test_the_webhook_reads_a_service_account_once_a_minute() -> None:
    client = kube({"builder": account("builder", "two", "one")})
    accounts = AccountSecrets(client)
    assert await accounts.names("shop", "builder") == ["two", "one"]
    assert await accounts.names("shop", "builder") == ["two", "one"]
    assert client.service_account.call_count == 1
    with mock.patch("time.monotonic", return_value=1e12):  # a minute and more later
        await accounts.names("shop", "builder")
    assert client.service_account.call_count == 2


@sync
async def test_the_webhooks_cache_of_service_accounts_is_bounded() -> None:
    client = kube({f"sa{i}": account(f"sa{i}") for i in range(5)})
    accounts = AccountSecrets(client, max_entries=3)
    for i in range(5):
        await accounts.names("shop", f"sa{i}")
    assert len(accounts._names) == 3
    await accounts.names("shop", "sa0")  # dropped first: read again
    assert client.service_account.call_count == 6


@pytest.mark.parametrize(
    ("status", "said"),
    [(403, "forbidden: needs 'get serviceaccounts' in namespace shop (RBAC)"),
     (404, "the ServiceAccount does not exist")],
    ids=["forbidden", "missing"],
)  # fmt: skip
@sync
async def test_the_webhook_warns_naming_the_service_account_and_the_permission(
    status: int, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = kube({"builder": RegistryError("refused", status_code=status)})
    with caplog.at_level(logging.WARNING, logger="imagecheck.webhook"):
        assert await AccountSecrets(client).names("shop", "builder") == []
    [record] = caplog.records
    assert record.serviceaccount == "shop/builder"  # type: ignore[attr-defined]
    assert record.error == said  # type: ignore[attr-defined]


# -- audit: through the Cluster interface ----------------------------------------------------


class CountingCluster(FakeCluster):
    gets: list[tuple[str, str, str]]

    async def get(self, kind: Any, namespace: str, name: str) -> Any:
        self.gets.append((kind.plural, namespace, name))
        return await super().get(kind, namespace, name)


@sync
async def test_audit_takes_the_service_accounts_secrets_for_a_template_without_any() -> None:
    cluster = CountingCluster()
    cluster.gets = []
    cluster.add(SERVICEACCOUNT, account("builder", "second", "first"))
    cluster.add(DEPLOYMENT, deployment(serviceAccountName="builder"))
    own = deployment(imagePullSecrets=[{"name": "regcred"}], serviceAccountName="builder")
    own["metadata"].update(name="api", uid="d2")
    own["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.test/api:1"
    cluster.add(DEPLOYMENT, own)
    cluster.add(POD, {"metadata": {"name": "p", "namespace": "shop", "uid": "p1"},
                      "spec": {"containers": [{"image": "registry.test/pod:1"}]}})  # fmt: skip
    inventory = await collect(cluster, Selector())
    await add_account_secrets(cluster, inventory)
    assert cluster.gets == [("serviceaccounts", "shop", "builder")]  # read once, pods never
    assert inventory.secrets == {
        "registry.test/app:1": {("shop", "second"), ("shop", "first")},
        "registry.test/api:1": {("shop", "regcred")},  # its own only
    }


@sync
async def test_audit_warns_for_a_missing_or_forbidden_service_account(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    with caplog.at_level(logging.WARNING):
        assert await read_service_accounts(cluster, [("shop", "gone"), ("shop", "default")]) == {
            ("shop", "default"): []
        }
        cluster.forbidden.add(("get", "serviceaccounts"))
        found = await read_service_accounts(cluster, [("a", "x"), ("a", "y"), ("b", "x")])
    assert found == {}
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "ServiceAccount shop/gone does not exist: no pull secrets from it"
    assert len(lines) == 3  # one per refused namespace
    assert "cannot read ServiceAccount a/x" in lines[1]
    assert "needs RBAC verb 'get' on resource 'serviceaccounts'" in lines[1]
    assert "in namespace 'b'" in lines[2]


@sync
async def test_audit_without_pull_secrets_reads_no_service_account() -> None:
    cluster = FakeCluster(forbidden={("get", "serviceaccounts")})
    cluster.add(DEPLOYMENT, deployment())
    inventory = await collect(cluster, Selector(), secrets=False)
    await add_account_secrets(cluster, inventory)
    assert inventory == Inventory(uses=inventory.uses)
