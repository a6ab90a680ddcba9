"""AdmissionReview bodies as the Kubernetes API server sends them, about a Pod or any
workload that holds a pod template (:data:`WORKLOADS`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

ADMISSION_V1 = "admission.k8s.io/v1"


def admission_review(
    obj: dict[str, Any] | None,
    *,
    uid: str | None = None,
    namespace: str = "team-a",
    operation: str = "CREATE",
    api_version: str = ADMISSION_V1,
) -> dict[str, Any]:
    """A review as the API server sends it (``k8s.io/api/admission/v1`` ``AdmissionRequest``)."""
    obj = obj or {}
    group, _, version = str(obj.get("apiVersion", "v1")).rpartition("/")
    kind = {"group": group, "version": version, "kind": obj.get("kind", "")}
    plural = str(obj.get("kind", "")).lower() + "s"
    return {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": kind,
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": kind,
            "requestResource": {"group": group, "version": version, "resource": plural},
            "name": obj.get("metadata", {}).get("name", ""),
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": obj or None,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


Containers = list[tuple[str, str]]  # (container name, image)


def pod_spec(init: Containers, main: Containers, ephemeral: Containers) -> dict[str, Any]:
    def listed(items: Containers) -> list[dict[str, Any]]:
        return [{"name": name, "image": image, "resources": {}} for name, image in items]

    spec: dict[str, Any] = {"containers": listed(main), "restartPolicy": "Always"}
    if init:
        spec["initContainers"] = listed(init)
    if ephemeral:
        spec["ephemeralContainers"] = [
            {**c, "targetContainerName": main[0][0]} for c in listed(ephemeral)
        ]
    return spec


def template(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "demo"}}, "spec": spec}


def selector(spec: dict[str, Any]) -> dict[str, Any]:
    return {"selector": {"matchLabels": {"app": "demo"}}, "template": template(spec)}


# kind -> (apiVersion, the object's spec around a pod spec)
WORKLOADS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "Pod": ("v1", lambda spec: spec),
    "Job": ("batch/v1", lambda spec: {"template": template(spec)}),
    "CronJob": (
        "batch/v1",
        lambda spec: {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": template(spec)}},
        },
    ),
    "Deployment": ("apps/v1", lambda spec: {"replicas": 2, **selector(spec)}),
    "StatefulSet": ("apps/v1", lambda spec: {"serviceName": "demo", **selector(spec)}),
    "DaemonSet": ("apps/v1", selector),
    "ReplicaSet": ("apps/v1", lambda spec: {"replicas": 1, **selector(spec)}),
    # A custom resource that keeps a pod template where the built-in workloads do.
    "Rollout": ("argoproj.io/v1alpha1", lambda spec: {"replicas": 1, **selector(spec)}),
}


def workload(kind: str, spec: dict[str, Any], name: str = "demo") -> dict[str, Any]:
    api_version, wrap = WORKLOADS[kind]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": wrap(spec),
    }


def pod(*images: str, name: str = "demo") -> dict[str, Any]:
    return workload("Pod", pod_spec([], [(f"c{i}", im) for i, im in enumerate(images)], []), name)
