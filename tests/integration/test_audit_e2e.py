"""``imagecheck audit`` end to end (issue #15): the real command, connecting with a kubeconfig
to the Kubernetes API stand-in, listing real workload shapes and checking their images
against the real registries, with a pull secret read from the stand-in's Secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from tests.support.endpoint import RegistryEndpoint
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.kubeapi.store import resource_of
from tests.support.kubecli import invoke
from tests.support.pki import TLSMaterial

WORKLOADS = ("found", "private", "missing", "denied", "invalid")


@pytest.fixture
def images(
    registry_plain: RegistryEndpoint,
    registry_basic: RegistryEndpoint,
    registry_token: RegistryEndpoint,
) -> dict[str, str]:
    return {
        "found": registry_plain.ref("sample/app:1.0.0"),
        "private": registry_basic.ref("private/secret:1.0"),  # Basic auth: with regcred only
        "missing": registry_plain.ref("sample/app:9.9.9"),  # never pushed
        "denied": registry_token.ref("private/secret:1.0"),  # anonymous may not pull it
        "invalid": registry_plain.ref("sample/App:1.0"),
    }


def workload(name: str, image: str) -> list[dict[str, Any]]:
    """The objects that run ``image`` for each of :data:`WORKLOADS`, as controllers leave
    them: the CronJob's Job (owned: reported as the CronJob's) and a bare pod."""
    if name in ("found", "private"):
        return [k8s.deployment(f"web-{name}", "shop", image)]
    if name == "missing":
        cron = k8s.cronjob("nightly", "ci", image)
        return [cron, k8s.job("nightly-29000000", "ci", image, cronjob_name="nightly")]
    if name == "denied":
        return [k8s.job("export", "ci", image)]
    return [k8s.pod("debug", "ci", image, waiting="InvalidImageName")]


def seed(kube_api: KubeAPI, images: dict[str, str], names: tuple[str, ...] = WORKLOADS) -> None:
    for name in names:
        kube_api.add(*workload(name, images[name]))


@pytest.fixture
def regcred(kube_api: KubeAPI, registry_basic: RegistryEndpoint) -> dict[str, Any]:
    """The Deployments' imagePullSecrets entry (``regcred``): alice on the Basic registry."""
    assert registry_basic.username and registry_basic.password
    secret = k8s.pull_secret(
        "regcred", "shop", registry_basic.host, registry_basic.username, registry_basic.password
    )
    [stored] = kube_api.add(secret)
    return stored


def audit(kube_api: KubeAPI, tls: TLSMaterial, home: Path, *args: str) -> Result:
    return invoke(kube_api, tls.ca_file, home, ["audit", *args])


def statuses(result: Result) -> set[tuple[str, str, str, str, str, str]]:
    return {
        (u["namespace"], u["kind"], u["name"], u["container"], u["image"], u["result"]["status"])
        for u in json.loads(result.stdout)["uses"]
    }


@pytest.mark.usefixtures("regcred")
def test_json_names_each_workloads_container_and_the_registrys_verdict(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    seed(kube_api, images)
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert result.exit_code == 2, result.output  # an invalid name: 2, as in scan
    assert statuses(result) == {
        ("shop", "Deployment", "web-found", "main", images["found"], "found"),
        ("shop", "Deployment", "web-private", "main", images["private"], "found"),
        ("ci", "CronJob", "nightly", "main", images["missing"], "missing"),
        ("ci", "Job", "export", "main", images["denied"], "denied"),
        ("ci", "Pod", "debug", "main", images["invalid"], "invalid"),
    }
    # Listing and reading is all audit does.
    assert kube_api.writes == []


@pytest.mark.usefixtures("regcred")
def test_text_groups_images_by_verdict_with_their_workloads(
    kube_api: KubeAPI,
    images: dict[str, str],
    registry_plain: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path: Path,
) -> None:
    seed(kube_api, images)
    result = audit(kube_api, tls_material, tmp_path)
    assert result.exit_code == 2, result.output
    lines = result.stdout.splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    assert heads == ["invalid (1)", "missing (1)", "denied (1)", "found (2)"]
    missing = lines.index(
        f"  {images['missing']}  tag '9.9.9' not found in {registry_plain.host}/sample/app "
        "(manifest unknown)"
    )
    assert lines[missing + 1] == "    ci/CronJob/nightly, container main"
    found = lines.index(f"  {images['found']}  {registry_plain.images['sample/app:1.0.0'].digest}")
    assert lines[found + 1] == "    shop/Deployment/web-found, container main"
    assert "    ci/Job/export, container main" in lines
    assert "    ci/Pod/debug, container main" in lines
    assert "nightly-29000000" not in result.stdout  # the CronJob's Job says nothing more


@pytest.mark.parametrize(
    ("names", "code"),
    [
        (("found", "private"), 0),
        (("found", "private", "denied"), 3),
        (("found", "denied", "missing"), 1),
        (WORKLOADS, 2),
    ],
    ids=["all-found", "denied", "missing", "invalid"],
)
@pytest.mark.usefixtures("regcred")
def test_exit_codes_are_scans(
    kube_api: KubeAPI,
    images: dict[str, str],
    tls_material: TLSMaterial,
    tmp_path: Path,
    names: tuple[str, ...],
    code: int,
) -> None:
    seed(kube_api, images, names)
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert result.exit_code == code, result.output


def private_status(result: Result) -> str:
    [use] = [u for u in json.loads(result.stdout)["uses"] if u["name"] == "web-private"]
    return str(use["result"]["status"])


def test_the_basic_registry_image_is_found_only_with_the_pull_secret(
    kube_api: KubeAPI,
    images: dict[str, str],
    regcred: dict[str, Any],
    tls_material: TLSMaterial,
    tmp_path: Path,
) -> None:
    seed(kube_api, images, ("private",))
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert (result.exit_code, private_status(result)) == (0, "found"), result.output

    result = audit(kube_api, tls_material, tmp_path, "-o", "json", "--no-pull-secrets")
    assert (result.exit_code, private_status(result)) == (3, "denied"), result.output

    with kube_api.store.lock:
        kube_api.store.delete(resource_of("v1", "Secret"), "shop", "regcred")
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert (result.exit_code, private_status(result)) == (3, "denied"), result.output
    assert "pull secret shop/regcred does not exist: not used" in result.stderr
    assert regcred["data"][".dockerconfigjson"] not in result.output


def test_secrets_forbidden_is_a_warning_and_the_check_goes_on(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    seed(kube_api, images, ("found", "private"))
    kube_api.allow(*(("list", plural) for plural in LISTED))
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert (result.exit_code, private_status(result)) == (3, "denied"), result.output
    assert "cannot read pull secrets in namespace shop" in result.stderr
    assert "needs RBAC verb 'get' on resource 'secrets'" in result.stderr


LISTED = ("cronjobs", "deployments", "statefulsets", "daemonsets", "jobs", "replicasets", "pods")


@pytest.mark.parametrize(
    ("args", "where"),
    [((), "cluster-wide"), (("-n", "shop"), "in namespace 'shop'")],
    ids=["cluster", "namespace"],
)
def test_a_403_on_listing_a_kind_is_exit_4_naming_verb_and_resource(
    kube_api: KubeAPI,
    images: dict[str, str],
    tls_material: TLSMaterial,
    tmp_path: Path,
    args: tuple[str, ...],
    where: str,
) -> None:
    seed(kube_api, images, ("found",))
    kube_api.allow(*(("list", plural) for plural in LISTED if plural != "deployments"))
    result = audit(kube_api, tls_material, tmp_path, *args)
    assert result.exit_code == 4, result.output
    assert result.stderr.splitlines() == [
        "imagecheck: error: forbidden: needs RBAC verb 'list' on resource 'deployments' "
        f"(apiGroups: [apps]) {where}"
    ]
    assert result.stdout == ""


def test_a_deployments_replicaset_and_pods_are_reported_as_the_deployment(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    [deployment] = kube_api.add(k8s.deployment("web", "shop", images["found"]))
    replicaset = k8s.deployment("web-5d4f8b7c9", "shop", images["found"])
    replicaset.update(apiVersion="apps/v1", kind="ReplicaSet")
    replicaset["metadata"]["ownerReferences"] = [owner(deployment)]
    [replicaset] = kube_api.add(replicaset)
    pod = k8s.pod("web-5d4f8b7c9-x2x9q", "shop", images["found"], waiting=None)
    pod["metadata"]["ownerReferences"] = [owner(replicaset)]
    kube_api.add(pod, k8s.pod("debug", "shop", images["found"], waiting=None))
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert result.exit_code == 0, result.output
    assert statuses(result) == {
        ("shop", "Deployment", "web", "main", images["found"], "found"),
        ("shop", "Pod", "debug", "main", images["found"], "found"),  # a bare pod: its own
    }


def owner(obj: dict[str, Any]) -> dict[str, Any]:
    """An ownerReferences entry for ``obj`` (as stored: its uid), as its controller sets it."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_a_template_without_pull_secrets_uses_its_service_accounts(
    kube_api: KubeAPI,
    images: dict[str, str],
    regcred: dict[str, Any],
    tls_material: TLSMaterial,
    tmp_path: Path,
) -> None:
    """The ServiceAccount admission plugin will give the Deployment's pods ``builder``'s pull
    secrets: audit checks with them; without ``get serviceaccounts`` it warns and goes on."""
    web = k8s.deployment("web-private", "shop", images["private"])
    pod = web["spec"]["template"]["spec"]
    del pod["imagePullSecrets"]
    pod["serviceAccountName"] = "builder"
    kube_api.add(web, k8s.service_account("builder", "shop", "regcred"))
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert (result.exit_code, private_status(result)) == (0, "found"), result.output

    kube_api.allow(*(("list", plural) for plural in LISTED), ("get", "secrets"))
    result = audit(kube_api, tls_material, tmp_path, "-o", "json")
    assert (result.exit_code, private_status(result)) == (3, "denied"), result.output
    assert "cannot read ServiceAccount shop/builder" in result.stderr
    assert "needs RBAC verb 'get' on resource 'serviceaccounts'" in result.stderr
    assert regcred["data"][".dockerconfigjson"] not in result.output
