"""``imagecheck gate --once`` end to end: the real command, connecting with a kubeconfig to
the Kubernetes API stand-in (which refuses a gate added after creation and answers a failed
JSON patch ``test`` as kube-apiserver does), asking the real registry about the images of
gated pods. Asserted on what the API received and holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from imagecheck.cluster._jobs import REAPED
from imagecheck.cluster._model import GATE
from tests.support.endpoint import RegistryEndpoint
from tests.support.gatecase import JSON_PATCH, NS, PODS, gated_job, stored
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi.store import ApiError, Store, resource_of
from tests.support.kubecli import invoke
from tests.support.pki import TLSMaterial


def gate(kube_api: KubeAPI, tls: TLSMaterial, home: Path, *args: str) -> dict[str, Any]:
    result = invoke(kube_api, tls.ca_file, home, ["gate", "--once", "-o", "json", *args])
    assert result.exit_code == 0, result.output
    return {o["pod"]: o for o in map(json.loads, result.stdout.splitlines())}


def events(kube_api: KubeAPI) -> list[tuple[str, str, str, str]]:
    with kube_api.store.lock:
        found = [o for (plural, _, _), o in kube_api.store.objects.items() if plural == "events"]
    return sorted(
        (e["involvedObject"]["name"], e["type"], e["reason"], e["message"]) for e in found
    )


@pytest.fixture
def images(registry_plain: RegistryEndpoint) -> dict[str, str]:
    return {
        "found": registry_plain.ref("sample/app:1.0.0"),
        "missing": registry_plain.ref("sample/app:9.9.9"),  # never pushed
        "unreachable": "127.0.0.1:1/sample/app:1.0.0",  # nothing listens on port 1
    }


def test_found_releases_only_its_own_gate_the_others_kept_in_order(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    gated_job(kube_api, "train", images["found"], gates=("a.example/first", GATE, "b.example/x"))
    outcomes = gate(kube_api, tls_material, tmp_path)
    assert outcomes["train-abcde"]["action"] == "released"
    gates = stored(kube_api, "pods", "train-abcde")["spec"]["schedulingGates"]
    assert gates == [{"name": "a.example/first"}, {"name": "b.example/x"}]
    patch = [w for w in kube_api.writes if w.method == "PATCH"]
    assert [(w.path, w.content_type, w.status) for w in patch] == [
        (f"{PODS}/train-abcde", JSON_PATCH, 200)
    ]
    assert patch[0].body[-1] == {"op": "remove", "path": "/spec/schedulingGates/1"}
    assert [e[:3] for e in events(kube_api)] == [("train-abcde", "Normal", "ImagesFound")]


def test_missing_after_wait_fails_the_job_and_the_pod_never_ran(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    gated_job(kube_api, "train", images["missing"], age=300)
    gated_job(kube_api, "fresh", images["missing"], age=5)  # within --wait: a push in flight
    outcomes = gate(kube_api, tls_material, tmp_path, "--wait", "2m")
    assert outcomes["train-abcde"]["action"] == "failed-job"
    assert outcomes["fresh-abcde"]["action"] == "kept"
    job = stored(kube_api, "jobs", "train")
    reason = f"missing {images['missing']} (manifest unknown)"
    assert job["metadata"]["annotations"][REAPED].startswith(f"missing {images['missing']}")
    assert 295 <= job["spec"]["activeDeadlineSeconds"] <= 310
    assert stored(kube_api, "pods", "train-abcde")["spec"]["schedulingGates"] == [{"name": GATE}]
    said = events(kube_api)
    assert [(e[0], e[1], e[2]) for e in said] == [
        ("fresh-abcde", "Warning", "ImageMissing"),
        ("train", "Warning", "ImageMissing"),
        ("train-abcde", "Warning", "ImageMissing"),
    ]
    assert reason.split(" (", maxsplit=1)[0] in said[1][3]
    assert "fresh" not in stored(kube_api, "jobs", "fresh")["metadata"].get("annotations", {})


def test_a_deployment_pod_stays_gated_with_a_warning(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    gated_job(kube_api, "web", images["missing"], age=300, job=False)
    outcomes = gate(kube_api, tls_material, tmp_path)
    assert outcomes["web-abcde"]["action"] == "kept"
    assert "until it appears" in outcomes["web-abcde"]["why"]
    assert [w.method for w in kube_api.writes] == ["POST"]  # the Event, nothing else


def test_max_gate_age_releases_whatever_the_verdict(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    gated_job(kube_api, "web", images["missing"], age=1000, job=False)
    outcomes = gate(kube_api, tls_material, tmp_path, "--max-gate-age", "15m")
    assert outcomes["web-abcde"]["action"] == "released-max-age"
    assert (
        "schedulingGates" not in stored(kube_api, "pods", "web-abcde")["spec"]
        or not (stored(kube_api, "pods", "web-abcde")["spec"]["schedulingGates"])
    )
    assert [e[1:3] for e in events(kube_api)] == [("Warning", "GateExpired")]


@pytest.mark.parametrize(("on_error", "action"), [("pass", "released-on-error"),
                                                  ("fail", "kept")])  # fmt: skip
def test_unreachable_registry(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path,
    on_error: str, action: str,
) -> None:  # fmt: skip
    gated_job(kube_api, "train", images["unreachable"])
    outcomes = gate(kube_api, tls_material, tmp_path, "--on-error", on_error, "--retries", "0",
                    "--timeout", "2")  # fmt: skip
    assert (outcomes["train-abcde"]["action"], outcomes["train-abcde"]["verdict"]) == (
        action, "error")  # fmt: skip
    gates = stored(kube_api, "pods", "train-abcde")["spec"]["schedulingGates"]
    assert gates == ([] if on_error == "pass" else [{"name": GATE}])


def test_a_gate_lifted_meanwhile_is_read_again_and_only_ours_removed(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    gated_job(kube_api, "train", images["found"], gates=("a.example/first", GATE, "b.example/x"))

    def lift_first(store: Store) -> None:  # another controller, between our read and write
        first = [{"op": "remove", "path": "/spec/schedulingGates/0"}]
        store.patch(resource_of("v1", "Pod"), NS, "train-abcde", first, json_patch=True)

    kube_api.before("patch", "pods", lift_first)
    outcomes = gate(kube_api, tls_material, tmp_path)
    assert outcomes["train-abcde"]["action"] == "released"
    patches = [w.status for w in kube_api.writes if w.method == "PATCH"]
    assert patches == [422, 200]  # the stale test failed; read again, patched again
    gates = stored(kube_api, "pods", "train-abcde")["spec"]["schedulingGates"]
    assert gates == [{"name": "b.example/x"}]


def test_dry_run_writes_nothing(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    gated_job(kube_api, "train", images["found"])
    outcomes = gate(kube_api, tls_material, tmp_path, "--dry-run")
    assert (outcomes["train-abcde"]["action"], outcomes["train-abcde"]["dry_run"]) == (
        "released", True)  # fmt: skip
    assert kube_api.writes == []


def test_the_standin_refuses_a_gate_added_after_creation(kube_api: KubeAPI) -> None:
    """The API rule the controller relies on (see ``kubeapi/podrules.py``)."""
    gated_job(kube_api, "train", "r.example/app:1", gates=("a.example/first",))
    res = resource_of("v1", "Pod")
    with kube_api.store.lock, pytest.raises(ApiError) as refused:
        kube_api.store.patch(res, NS, "train-abcde", {"spec": {"schedulingGates": [
            {"name": "a.example/first"}, {"name": GATE}]}})  # fmt: skip
    assert refused.value.status["code"] == 422
    assert "only deletion is allowed" in refused.value.status["message"]
