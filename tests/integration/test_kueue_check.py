"""``imagecheck kueue-check`` end to end: the real command and loop, through the real client
(lightkube) to the Kubernetes API stand-in serving Kueue's Workload and AdmissionCheck with
their status subresource, asking the real registry about the pod sets' images. Asserted on
what the API received (the write log) and the objects as stored."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagecheck.cluster import KubeCluster
from imagecheck.cluster._kueue_loop import KueueLoop
from imagecheck.cluster._kueue_pass import KueueChecker, KueueOptions, Outcome
from imagecheck.registry import ImageChecker
from tests.support.endpoint import RegistryEndpoint
from tests.support.images import push_image
from tests.support.kubeapi import KubeAPI, kueue
from tests.support.kubeapi.store import resource_of
from tests.support.kubecli import ago, invoke
from tests.support.pki import TLSMaterial

NS = "team-a"
CHECK = "images"
STATUS = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads/%s/status"


def stored(kube_api: KubeAPI, name: str) -> dict[str, Any]:
    with kube_api.store.lock:
        return kube_api.store.get(resource_of(kueue.API_VERSION, "Workload"), NS, name)


def check_of(kube_api: KubeAPI, name: str, check: str = CHECK) -> dict[str, Any]:
    entries = stored(kube_api, name)["status"]["admissionChecks"]
    return next(e for e in entries if e["name"] == check)


@pytest.fixture
def seeded(kube_api: KubeAPI, registry_plain: RegistryEndpoint) -> dict[str, str]:
    """Our AdmissionCheck, another controller's, and three Workloads: one whose images are
    all found, one with a missing image, one with an invalid name; each also carries the
    other controller's check, which must be left as it is."""
    found = registry_plain.ref("sample/app:1.0.0")
    missing = registry_plain.ref("sample/app:9.9.9")
    kube_api.add(kueue.admission_check(CHECK), kueue.admission_check("prov", "kueue.x-k8s.io/p"))
    checks = [kueue.check_state(CHECK), kueue.check_state("prov", message="provisioning")]
    names = {}
    for name, images in {
        "ok": [found],
        "gone": [found, missing],
        "bad": [registry_plain.ref("sample/App:1")],
    }.items():
        (obj,) = kube_api.add(kueue.workload(name, NS, images, checks))
        names[name] = obj["metadata"]["name"]
    return names


def test_once_sets_ready_retry_rejected_and_keeps_the_other_checks(
    kube_api: KubeAPI, seeded: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    result = invoke(
        kube_api, tls_material.ca_file, tmp_path, ["kueue-check", "--once", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    lines = {o["workload"]: o for o in map(json.loads, result.output.splitlines())}
    assert {seeded[k]: lines[seeded[k]]["state"] for k in seeded} == {
        seeded["ok"]: "Ready",
        seeded["gone"]: "Retry",
        seeded["bad"]: "Rejected",
    }
    assert "sample/app:9.9.9" in lines[seeded["gone"]]["why"]
    assert lines[seeded["gone"]]["verdict"] == "missing"
    # Written through the status subresource, the whole list with the version read.
    workload_writes = [w for w in kube_api.writes if "/workloads/" in w.path]
    assert {w.path for w in workload_writes} == {STATUS % n for n in seeded.values()}
    assert all(w.body["metadata"]["resourceVersion"] for w in workload_writes)
    for name in seeded.values():
        other = check_of(kube_api, name, "prov")
        assert (other["state"], other["message"]) == ("Pending", "provisioning")
    assert check_of(kube_api, seeded["ok"])["lastTransitionTime"] != kueue.SINCE
    # Our AdmissionCheck Active (status subresource); the other controller's untouched.
    ac = kube_api.store.get(resource_of(kueue.API_VERSION, "AdmissionCheck"), "", CHECK)
    (active,) = ac["status"]["conditions"]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Active")
    assert active["observedGeneration"] == 1
    other_ac = kube_api.store.get(resource_of(kueue.API_VERSION, "AdmissionCheck"), "", "prov")
    assert "status" not in other_ac
    # A second pass writes nothing new for what is settled, and the Retry keeps its time.
    retry_time = check_of(kube_api, seeded["gone"])["lastTransitionTime"]
    before = len(kube_api.writes)
    again = invoke(kube_api, tls_material.ca_file, tmp_path, ["kueue-check", "--once"])
    assert again.exit_code == 0, again.output
    assert len(kube_api.writes) == before
    assert check_of(kube_api, seeded["gone"])["lastTransitionTime"] == retry_time


def test_dry_run_writes_nothing(
    kube_api: KubeAPI, seeded: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    result = invoke(
        kube_api, tls_material.ca_file, tmp_path, ["kueue-check", "--once", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "would set images Retry" in result.output
    assert kube_api.writes == []


def test_a_retry_past_wait_is_rejected_after_a_restart(
    kube_api: KubeAPI, seeded: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    """The first look survives a restart as the Retry's lastTransitionTime."""
    name = seeded["gone"]
    res = resource_of(kueue.API_VERSION, "Workload")
    with kube_api.store.lock:
        wl = kube_api.store.get(res, NS, name)
        wl["status"]["admissionChecks"][0] = kueue.check_state(CHECK, "Retry", ago(120))
        kube_api.store.patch(res, NS, name, {"status": wl["status"]}, "status")
    args = ["kueue-check", "--once", "--wait", "1m", "-n", NS]
    result = invoke(kube_api, tls_material.ca_file, tmp_path, args)
    assert result.exit_code == 0, result.output
    entry = check_of(kube_api, name)
    assert entry["state"] == "Rejected"
    assert entry["message"].startswith("not found after waiting 1m: ")


def test_rbac_refusal_of_the_status_names_the_subresource(
    kube_api: KubeAPI, seeded: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    kube_api.allow(
        ("list", "admissionchecks"),
        ("patch", "admissionchecks/status"),
        ("list", "workloads"),
        ("get", "serviceaccounts"),
        ("patch", "workloads"),  # the main resource: not the status
    )
    result = invoke(kube_api, tls_material.ca_file, tmp_path, ["kueue-check", "--once"])
    assert result.exit_code != 0
    assert "'workloads/status'" in result.output


def test_the_loop_turns_retry_into_ready_when_the_image_is_pushed_and_resumes(
    kube_api: KubeAPI, registry_plain: RegistryEndpoint
) -> None:
    """A Workload in Retry is checked again on a backoff and goes Ready once its tag is
    pushed; a controller stopped mid-way and started again picks up where the API is."""
    tag = f"late-{time.monotonic_ns()}"
    image = registry_plain.ref(f"kueue/late:{tag}")
    kube_api.add(kueue.admission_check(CHECK))
    (wl,) = kube_api.add(kueue.workload("late", NS, [image], [kueue.check_state(CHECK)]))
    name = wl["metadata"]["name"]
    seen: list[Outcome] = []

    async def run_for(seconds: float) -> None:
        async with (
            await KubeCluster.connect(kube_api.kubeconfig) as cluster,
            ImageChecker() as checker,
        ):
            judge = KueueChecker(cluster, checker, KueueOptions(wait=600))
            loop = KueueLoop(judge, 60.0, seen.append)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(seconds):
                    await loop.run()

    asyncio.run(run_for(1.5))  # killed mid-way: the Workload is left in Retry
    assert check_of(kube_api, name)["state"] == "Retry"
    ac = kube_api.store.get(resource_of(kueue.API_VERSION, "AdmissionCheck"), "", CHECK)
    assert ac["status"]["conditions"][0]["status"] == "True"

    def push_soon() -> None:
        time.sleep(1.0)
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            push_image(client, registry_plain.url, "kueue/late", tag)

    pusher = threading.Thread(target=push_soon)
    pusher.start()
    asyncio.run(run_for(8.0))  # restarted: lists, finds it still missing, rechecks in 5s
    pusher.join()
    assert check_of(kube_api, name)["state"] == "Ready"
    assert [o.state for o in seen if o.written] == ["Retry", "Ready"]


def test_a_workload_added_while_watching_is_judged(
    kube_api: KubeAPI, registry_plain: RegistryEndpoint
) -> None:
    kube_api.add(kueue.admission_check(CHECK))
    found = registry_plain.ref("sample/app:1.0.0")

    async def main() -> None:
        async with (
            await KubeCluster.connect(kube_api.kubeconfig) as cluster,
            ImageChecker() as checker,
        ):
            loop = KueueLoop(KueueChecker(cluster, checker, KueueOptions()), 60.0, print)
            versions = await loop.relist()
            kube_api.add(kueue.workload("new", NS, [found], [kueue.check_state(CHECK)]))
            await loop.follow(versions, time.monotonic() + 1.5)

    asyncio.run(main())
    wl = kube_api.store.items(resource_of(kueue.API_VERSION, "Workload"), NS)[0]
    assert wl["status"]["admissionChecks"][0]["state"] == "Ready"


def test_the_stand_in_keeps_status_and_spec_apart(kube_api: KubeAPI) -> None:
    """The status subresource's rules, through the real client: a main-resource patch leaves
    the status, a status patch leaves the rest, a stale version is a 409, and only a spec
    change moves the generation."""
    from imagecheck.cluster._model import ADMISSION_CHECK, Conflict  # noqa: PLC0415

    async def main() -> dict[str, Any]:
        async with await KubeCluster.connect(kube_api.kubeconfig) as cluster:
            created = await cluster.create(
                ADMISSION_CHECK, "", {**kueue.admission_check(CHECK), "status": {"x": 1}}
            )
            assert "status" not in created  # a create ignores the status
            version = created["metadata"]["resourceVersion"]
            body = {"metadata": {"resourceVersion": version}, "status": {"conditions": []}}
            body["spec"] = {"controllerName": "changed"}
            after = await cluster.patch(ADMISSION_CHECK, "", CHECK, body, status=True)
            assert after["spec"]["controllerName"] == kueue.CONTROLLER  # ignored
            assert after["status"] == {"conditions": []}
            with pytest.raises(Conflict):
                await cluster.patch(ADMISSION_CHECK, "", CHECK, body, status=True)
            main: dict[str, Any] = {
                "spec": {"parameters": {"apiGroup": "a", "kind": "K", "name": "n"}}
            }
            main["status"] = {"dropped": True}
            return await cluster.patch(ADMISSION_CHECK, "", CHECK, main)

    final = asyncio.run(main())
    assert final["status"] == {"conditions": []}
    assert final["metadata"]["generation"] == 2
    assert [w.path for w in kube_api.writes][1] == (
        f"/apis/kueue.x-k8s.io/v1beta1/admissionchecks/{CHECK}/status"
    )
