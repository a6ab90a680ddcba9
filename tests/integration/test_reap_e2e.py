"""``imagecheck reap --once`` end to end (issue #15): the real command, connecting with a
kubeconfig to the Kubernetes API stand-in, asking the real registries about the images of
stuck pods. Asserted on what the API received (the stand-in's write log): the exact merge
patch and Events for the Job whose image is missing, and nothing for any other Job."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from imagecheck.cluster._jobs import REAPED
from tests.support.endpoint import RegistryEndpoint
from tests.support.kubeapi import KubeAPI, Write
from tests.support.kubeapi import objects as k8s
from tests.support.kubeapi.store import Store, resource_of
from tests.support.kubecli import ago, invoke
from tests.support.pki import TLSMaterial

NS = "ci"
STARTED = 600  # seconds since the Jobs (and their pods) started: well past the 2m grace
JOBS = "/apis/batch/v1/namespaces/ci/jobs"
EVENTS = "/api/v1/namespaces/ci/events"


def stuck_job(
    kube_api: KubeAPI,
    name: str,
    image: str,
    *,
    waiting: str = "ImagePullBackOff",
    pod_started: float = STARTED,
    cronjob: str | None = None,
) -> None:
    """A Job started :data:`STARTED` seconds ago and its pod waiting on ``image``."""
    job = k8s.job(name, NS, image, cronjob_name=cronjob)
    job["status"]["startTime"] = ago(STARTED)
    pod = k8s.pod(f"{name}-abcde", NS, image, waiting=waiting, job_name=name)
    pod["status"]["startTime"] = ago(pod_started)
    kube_api.add(job, pod)


@pytest.fixture
def images(registry_plain: RegistryEndpoint, registry_token: RegistryEndpoint) -> dict[str, str]:
    return {
        "found": registry_plain.ref("sample/app:1.0.0"),
        "missing": registry_plain.ref("sample/app:9.9.9"),  # never pushed
        "denied": registry_token.ref("private/secret:1.0"),  # pushed; anonymous may not pull
        "invalid": registry_plain.ref("sample/App:1.0"),  # the kubelet: InvalidImageName
    }


@pytest.fixture
def cluster(kube_api: KubeAPI, images: dict[str, str]) -> KubeAPI:
    """One stuck Job per verdict, a CronJob's Job for the missing image, and a Job with the
    missing image stuck for less than the grace."""
    kube_api.add(k8s.cronjob("nightly", NS, images["missing"]))
    stuck_job(kube_api, "nightly-29000000", images["missing"], cronjob="nightly")
    stuck_job(kube_api, "found", images["found"], waiting="ErrImagePull")
    stuck_job(kube_api, "denied", images["denied"])
    stuck_job(kube_api, "invalid", images["invalid"], waiting="InvalidImageName")
    stuck_job(kube_api, "fresh", images["missing"], pod_started=30)
    return kube_api


def reap(kube_api: KubeAPI, tls: TLSMaterial, home: Path, *args: str) -> Result:
    return invoke(kube_api, tls.ca_file, home, ["reap", "--once", *args])


def version_of(kube_api: KubeAPI, plural: str, name: str) -> str:
    with kube_api.store.lock:
        return str(kube_api.store.objects[(plural, NS, name)]["metadata"]["resourceVersion"])


def assert_failed(writes: list[Write], job: str, version: str, reason: str, age: float) -> None:
    """``writes`` are the patch that fails ``job`` and its two Events, exactly."""
    patch, job_event, pod_event = writes
    assert (patch.method, patch.path, patch.status) == ("PATCH", f"{JOBS}/{job}", 200)
    assert patch.content_type == "application/merge-patch+json"
    deadline = patch.body["spec"]["activeDeadlineSeconds"]
    # At most the Job's age when the patch was sent, so the controller fails it at once.
    assert STARTED - 5 <= deadline <= age
    assert patch.body == {
        "metadata": {"resourceVersion": version, "annotations": {REAPED: reason}},
        "spec": {"activeDeadlineSeconds": deadline},
    }
    for write, kind, name, message in (
        (job_event, "Job", job, f"failed by imagecheck reap: {reason}"),
        (pod_event, "Pod", f"{job}-abcde", f"its Job {job} failed by imagecheck reap: {reason}"),
    ):
        assert (write.method, write.path, write.status) == ("POST", EVENTS, 201)
        involved = write.body["involvedObject"]
        assert (involved["kind"], involved["name"], involved["namespace"]) == (kind, name, NS)
        assert involved["uid"] == f"uid-{kind.lower()}-{name}"
        assert (write.body["reason"], write.body["type"]) == ("ImageMissing", "Warning")
        assert write.body["message"] == message


def test_fails_the_missing_and_invalid_images_jobs_only(
    cluster: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    versions = {name: version_of(cluster, "jobs", name) for name in ("nightly-29000000", "invalid")}
    begin = time.time()
    result = reap(cluster, tls_material, tmp_path, "-o", "json")
    age = STARTED + (time.time() - begin) + 1  # the Jobs' age now (startTime has whole seconds)
    assert result.exit_code == 0, result.output
    outcomes = {o["pod"]: o for o in map(json.loads, result.stdout.splitlines())}
    assert {pod: (o["job"], o["action"], o["verdict"]) for pod, o in outcomes.items()} == {
        "denied-abcde": ("ci/denied", "skipped", "denied"),
        "found-abcde": ("ci/found", "skipped", "found"),
        # Within its grace: judged before the Job is read, named from the pod's ownerReference.
        "fresh-abcde": ("ci/fresh", "skipped", None),
        "invalid-abcde": ("ci/invalid", "acted", "invalid"),
        "nightly-29000000-abcde": ("ci/nightly-29000000", "acted", "missing"),
    }
    missing = outcomes["nightly-29000000-abcde"]
    assert (missing["cronjob"], missing["container"], missing["image"]) == (
        "ci/nightly", "main", images["missing"],
    )  # fmt: skip
    assert "within --grace 120s" in outcomes["fresh-abcde"]["why"]
    assert outcomes["denied-abcde"]["why"].endswith(": not acted on")

    host = images["missing"].rsplit("/", 2)[0]
    said = f"tag '9.9.9' not found in {host}/sample/app (manifest unknown)"
    writes = cluster.writes
    assert len(writes) == 6, writes  # nothing for found, denied, fresh
    assert_failed(
        writes[:3], "invalid", versions["invalid"],
        f"invalid {images['invalid']} (the kubelet cannot parse it (InvalidImageName))", age,
    )  # fmt: skip
    assert_failed(
        writes[3:], "nightly-29000000", versions["nightly-29000000"],
        f"missing {images['missing']} ({said})", age,
    )  # fmt: skip


def test_dry_run_writes_nothing_and_says_what_it_would_do(
    cluster: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    result = reap(cluster, tls_material, tmp_path, "--dry-run")
    assert result.exit_code == 0, result.output
    host = images["missing"].rsplit("/", 2)[0]
    assert (
        "would act: pod ci/nightly-29000000-abcde (Job ci/nightly-29000000 of CronJob "
        f"ci/nightly): fail the Job: missing {images['missing']} (tag '9.9.9' not found in "
        f"{host}/sample/app (manifest unknown))"
    ) in result.stdout.splitlines()
    assert sum(line.startswith("would act: ") for line in result.stdout.splitlines()) == 2
    assert cluster.writes == []


def test_a_second_pass_writes_nothing(
    cluster: KubeAPI, tls_material: TLSMaterial, tmp_path: Path
) -> None:
    assert reap(cluster, tls_material, tmp_path).exit_code == 0
    first = cluster.writes
    again = reap(cluster, tls_material, tmp_path)
    assert again.exit_code == 0, again.output
    assert cluster.writes == first
    assert (
        "skipped: pod ci/nightly-29000000-abcde (Job ci/nightly-29000000 of CronJob ci/nightly): "
        "Job reaped already (missing "
    ) in again.stdout
    assert "acted: " not in again.stdout


def test_without_patch_on_jobs_exit_4_names_the_rule(
    cluster: KubeAPI, tls_material: TLSMaterial, tmp_path: Path
) -> None:
    cluster.allow(("list", "pods"), ("get", "jobs"), ("get", "secrets"), ("create", "events"))
    result = reap(cluster, tls_material, tmp_path)
    assert result.exit_code == 4, result.output
    assert result.stderr.splitlines() == [
        "imagecheck: error: forbidden: needs RBAC verb 'patch' on resource 'jobs' "
        "(apiGroups: [batch]) in namespace 'ci'"
    ]
    assert [(w.method, w.status) for w in cluster.writes] == [("PATCH", 403)]


def test_without_create_on_events_the_jobs_are_failed_and_exit_0(
    cluster: KubeAPI, tls_material: TLSMaterial, tmp_path: Path
) -> None:
    cluster.allow(("list", "pods"), ("get", "jobs"), ("get", "secrets"), ("patch", "jobs"))
    result = reap(cluster, tls_material, tmp_path)
    assert result.exit_code == 0, result.output
    # Both Jobs patched; the Events refused once (the namespace is not asked again).
    assert [(w.method, w.path, w.status) for w in cluster.writes] == [
        ("PATCH", f"{JOBS}/invalid", 200),  # the list's order: by name
        ("POST", EVENTS, 403),
        ("PATCH", f"{JOBS}/nightly-29000000", 200),
    ]
    note = f"(no Event written: the Job's {REAPED} annotation is the record)"
    acted = [line for line in result.stdout.splitlines() if line.startswith("acted: ")]
    assert len(acted) == 2 and all(line.endswith(note) for line in acted)
    assert result.stderr.count("needs RBAC verb 'create' on resource 'events'") == 1


def test_a_bare_pod_is_deleted_only_with_include_pods(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    pod = k8s.pod("scratch", NS, images["missing"])
    pod["status"]["startTime"] = ago(STARTED)
    kube_api.add(pod)

    result = reap(kube_api, tls_material, tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout == ("skipped: pod ci/scratch: a bare pod: only with --include-pods\n")
    assert kube_api.writes == []

    result = reap(kube_api, tls_material, tmp_path, "--include-pods")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"acted: pod ci/scratch: deleted the pod: missing {images['missing']} ("
    )
    event, delete = kube_api.writes
    assert (event.method, event.path, event.body["reason"]) == ("POST", EVENTS, "ImageMissing")
    assert event.body["involvedObject"]["name"] == "scratch"
    pod_path = "/api/v1/namespaces/ci/pods/scratch"
    assert (delete.method, delete.path, delete.status) == ("DELETE", pod_path, 200)
    with kube_api.store.lock:
        assert ("pods", NS, "scratch") not in kube_api.store.objects


def touch_job(name: str, versions: list[str]) -> Callable[[Store], None]:
    """Another writer (the Job controller, updating its status) changing the Job; the
    resourceVersion it leaves is appended to ``versions``."""

    def change(store: Store) -> None:
        status: dict[str, Any] = {"status": {"uncountedTerminatedPods": {}}}
        changed = store.patch(resource_of("batch/v1", "Job"), NS, name, status)
        versions.append(changed["metadata"]["resourceVersion"])

    return change


def test_a_conflict_on_patch_is_read_again_and_retried(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    stuck_job(kube_api, "train", images["missing"])
    read = version_of(kube_api, "jobs", "train")
    changed: list[str] = []
    kube_api.before("patch", "jobs", touch_job("train", changed))

    result = reap(kube_api, tls_material, tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("acted: pod ci/train-abcde (Job ci/train): failed the Job: ")
    refused, accepted, *events = kube_api.writes
    assert (refused.method, refused.status) == ("PATCH", 409)
    assert refused.body["metadata"]["resourceVersion"] == read
    assert (accepted.method, accepted.status) == ("PATCH", 200)
    assert accepted.body["metadata"]["resourceVersion"] == changed[0] != read
    assert [(e.method, e.body["involvedObject"]["kind"]) for e in events] == [
        ("POST", "Job"), ("POST", "Pod"),
    ]  # fmt: skip


def test_the_pods_pull_secret_is_read_from_the_api(
    kube_api: KubeAPI,
    images: dict[str, str],
    registry_token: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path: Path,
) -> None:
    stuck_job(kube_api, "denied", images["denied"])
    assert registry_token.username and registry_token.password
    kube_api.add(
        k8s.pull_secret(
            "regcred", NS, registry_token.host, registry_token.username, registry_token.password
        )
    )
    result = reap(kube_api, tls_material, tmp_path, "--act-on", "missing,denied")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"skipped: pod ci/denied-abcde (Job ci/denied): found {images['denied']}"
    )
    assert kube_api.writes == []


def test_act_on_denied_fails_the_denied_images_job(
    kube_api: KubeAPI, images: dict[str, str], tls_material: TLSMaterial, tmp_path: Path
) -> None:
    stuck_job(kube_api, "denied", images["denied"])
    result = reap(kube_api, tls_material, tmp_path, "--act-on", "missing,denied")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"acted: pod ci/denied-abcde (Job ci/denied): failed the Job: denied {images['denied']}"
    )
    assert [(w.method, w.path, w.status) for w in kube_api.writes] == [
        ("PATCH", f"{JOBS}/denied", 200), ("POST", EVENTS, 201), ("POST", EVENTS, 201),
    ]  # fmt: skip
