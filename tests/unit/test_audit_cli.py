"""``imagecheck audit`` on the command line (issue #15): the output formats, the exit codes
scan has, and one-line errors. The cluster is ``FakeCluster`` behind a stand-in for the
cluster extra's ``KubeCluster.connect``; the registry is respx."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest
import respx
from click.testing import CliRunner, Result

import imagecheck.cluster
from imagecheck.cli import cli
from imagecheck.cluster._model import DEPLOYMENT, POD
from tests.support.fakecluster import FakeCluster

DIGEST = "sha256:" + "ab" * 32


def workload(name: str, *images: str, ns: str = "shop") -> Any:
    spec = {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]}
    return {"metadata": {"name": name, "namespace": ns, "uid": name},
            "spec": {"template": {"spec": spec}}}  # fmt: skip


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster()
    fake.add(DEPLOYMENT, workload("web", "registry.test/app:1", "registry.test/app:2"))
    fake.add(DEPLOYMENT, workload("api", "registry.test/app:2"))
    connected: list[dict[str, Any]] = []

    class KubeCluster:
        @staticmethod
        async def connect(**how: Any) -> FakeCluster:
            connected.append(how)
            return fake

    api = types.ModuleType("imagecheck.cluster._api")
    api.KubeCluster = KubeCluster  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "imagecheck.cluster._api", api)
    forget_extra(monkeypatch)
    fake.connected = connected  # type: ignore[attr-defined]
    return fake


def forget_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """The package face keeps a name once loaded: drop it so that the stand-in is loaded."""
    monkeypatch.delitem(vars(imagecheck.cluster), "KubeCluster", raising=False)


@pytest.fixture
def registry(network: respx.MockRouter) -> respx.MockRouter:
    network.get("https://registry.test/v2/").respond(200)
    network.head("https://registry.test/v2/app/manifests/1").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    network.head("https://registry.test/v2/app/manifests/2").respond(404)
    return network


def run(args: list[str], env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(cli, ["audit", "--termination-log", "/nonexistent", *args], env=env)


def test_text_groups_by_status_with_every_workload(
    cluster: FakeCluster, registry: respx.MockRouter, env: dict[str, str | None]
) -> None:
    result = run(["--kubeconfig", "/k", "--context", "prod"], env)
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "missing (1)",
        "  registry.test/app:2  tag '2' not found in registry.test/app (manifest unknown)",
        "    shop/Deployment/api, container c0",
        "    shop/Deployment/web, container c1",
        "found (1)",
        f"  registry.test/app:1  {DIGEST}",
        "    shop/Deployment/web, container c0",
    ]
    assert cluster.connected == [{"kubeconfig": "/k", "context": "prod"}]  # type: ignore[attr-defined]
    heads = [c.request for c in registry.calls if c.request.method == "HEAD"]
    assert len(heads) == 2  # app:2 is used twice, checked once


def test_json_has_every_container_with_its_result(
    cluster: FakeCluster, registry: respx.MockRouter, env: dict[str, str | None]
) -> None:
    result = run(["-o", "json"], env)
    assert result.exit_code == 1, result.output
    uses = json.loads(result.stdout)["uses"]
    assert [(u["name"], u["container"], u["result"]["status"]) for u in uses] == [
        ("api", "c0", "missing"), ("web", "c0", "found"), ("web", "c1", "missing"),
    ]  # fmt: skip
    assert uses[0]["namespace"] == "shop" and uses[0]["kind"] == "Deployment"


def test_github_annotates_each_use_not_found(
    cluster: FakeCluster, registry: respx.MockRouter, env: dict[str, str | None]
) -> None:
    result = run(["-o", "github"], env)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::error title=image missing::missing: registry.test/app:2: ")
    assert lines[0].endswith("(shop/Deployment/api, container c0)")


def test_all_found_exits_0_and_namespace_limits_the_list(
    cluster: FakeCluster, registry: respx.MockRouter, env: dict[str, str | None]
) -> None:
    pod = {"containers": [{"name": "a", "image": "registry.test/app:1"}]}
    cluster.add(POD, {"metadata": {"name": "p", "namespace": "ok", "uid": "p"}, "spec": pod})
    result = run(["-n", "ok"], env)
    assert result.exit_code == 0, result.output
    assert "ok/Pod/p, container a" in result.stdout


def test_a_refused_list_is_one_line_naming_the_rbac_rule(
    cluster: FakeCluster, network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    cluster.forbidden.add(("list", "deployments"))
    result = run([], env)
    assert result.exit_code == 4
    assert result.stderr.splitlines() == [
        "imagecheck: error: forbidden: needs RBAC verb 'list' on resource 'deployments' "
        "(apiGroups: [apps]) cluster-wide"
    ]
    assert not network.calls


def test_without_the_cluster_extra_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    monkeypatch.setitem(sys.modules, "imagecheck.cluster._api", None)
    forget_extra(monkeypatch)
    result = run([], env)
    assert result.exit_code == 2
    assert "pip install 'imagecheck[cluster]'" in result.stderr


@pytest.mark.parametrize("args", [["--kind", "pods"], ["--wait", "1m"]], ids=["kind", "wait"])
def test_bad_options_exit_2_before_anything_is_read(
    args: list[str], cluster: FakeCluster, network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    result = run(args, env)
    assert result.exit_code == 2
    assert cluster.connected == []  # type: ignore[attr-defined]
