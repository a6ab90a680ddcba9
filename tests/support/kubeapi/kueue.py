"""Kueue's objects (``kueue.x-k8s.io/v1beta1``) as Kueue writes them, for the API stand-in to
hold: shapes from ``apis/kueue/v1beta1/workload_types.go`` and ``admissioncheck_types.go``.

A Workload is what Kueue's job integration makes of a suspended Job: ``spec.podSets[]`` carry
the Job's pod template; ``status.admissionChecks[]`` is filled by Kueue's workload controller
from its ClusterQueue's admission checks, each ``Pending`` until its controller says more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

JSON = dict[str, Any]
API_VERSION = "kueue.x-k8s.io/v1beta1"
SINCE = "2026-12-03T09:00:00Z"
CONTROLLER = "imagecheck.io/images"


def admission_check(name: str, controller: str = CONTROLLER) -> JSON:
    """An AdmissionCheck (cluster-scoped) as an admin applies it: no status yet."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }


def check_state(name: str, state: str = "Pending", since: str = SINCE, message: str = "") -> JSON:
    """One entry of ``status.admissionChecks`` (lastTransitionTime and message are required)."""
    return {"name": name, "state": state, "lastTransitionTime": since, "message": message}


def workload(
    name: str,
    namespace: str,
    images: Sequence[str],
    checks: Sequence[JSON] = (),
    *,
    pull_secrets: Sequence[str] = (),
    service_account: str | None = None,
    extra_pod_sets: Mapping[str, Sequence[str]] | None = None,
) -> JSON:
    """The Workload of a Job named ``name`` (``job-NAME-xxxxx``, as Kueue names them) whose
    pod template runs ``images``; ``extra_pod_sets``: more pod sets, name -> images."""
    pod_sets = [_pod_set("main", images, pull_secrets, service_account)]
    for set_name, set_images in (extra_pod_sets or {}).items():
        pod_sets.append(_pod_set(set_name, set_images, pull_secrets, service_account))
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": name,
        "uid": f"uid-job-{name}",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}-3f2a1",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/job-uid": f"uid-job-{name}"},
            "ownerReferences": [owner],
        },
        "spec": {"active": True, "queueName": "user-queue", "podSets": pod_sets},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "waiting for quota",
                    "lastTransitionTime": SINCE,
                }
            ],
            "admissionChecks": list(checks),
        },
    }


def _pod_set(
    name: str, images: Sequence[str], pull_secrets: Sequence[str], account: str | None
) -> JSON:
    spec: JSON = {
        "restartPolicy": "Never",
        "containers": [
            {"name": f"c{i}", "image": image, "resources": {"requests": {"cpu": "1"}}}
            for i, image in enumerate(images)
        ],
    }
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    if account:
        spec["serviceAccountName"] = account
    return {"name": name, "count": 1, "template": {"metadata": {}, "spec": spec}}
