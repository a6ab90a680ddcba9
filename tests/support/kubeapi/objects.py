"""Objects as the Kubernetes API serves them (shapes from the API reference, v1.31: Pod,
Job, CronJob, Event, Lease, Secret, Deployment), for the API stand-in to hold.

Server-set fields (uid, resourceVersion, creationTimestamp) are filled in by the stand-in.
"""

from __future__ import annotations

import base64
import json
from typing import Any

JSON = dict[str, Any]

CREATED = "2026-12-03T09:00:00Z"


def cronjob(
    name: str, namespace: str = "default", image: str = "registry.example.com/team/train:1.0.1"
) -> JSON:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyPolicy": "Forbid",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"backoffLimit": 2, "template": _pod_template(name, image)}},
        },
        "status": {"lastScheduleTime": CREATED},
    }


def job(
    name: str,
    namespace: str = "default",
    image: str = "registry.example.com/team/train:1.0.1",
    cronjob_name: str | None = None,
) -> JSON:
    """A Job as the Job controller shows it while its pod waits; with ``cronjob_name``, as
    the CronJob controller created it (ownerReferences, controller: true)."""
    meta: JSON = {
        "name": name,
        "namespace": namespace,
        "labels": {"app": cronjob_name or name, "batch.kubernetes.io/job-name": name},
        "annotations": {"batch.kubernetes.io/job-tracking": ""},
    }
    if cronjob_name:
        meta["ownerReferences"] = [_owner("batch/v1", "CronJob", cronjob_name)]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 2,
            "completionMode": "NonIndexed",
            "suspend": False,
            "template": _pod_template(name, image),
        },
        "status": {"active": 1, "startTime": CREATED, "ready": 0, "terminating": 0},
    }


def pod(
    name: str,
    namespace: str = "default",
    image: str = "registry.example.com/team/train:1.0.1",
    waiting: str | None = "ImagePullBackOff",
    job_name: str | None = None,
    labels: dict[str, str] | None = None,
) -> JSON:
    """A pod; ``waiting``: its container's status.containerStatuses[].state.waiting.reason
    (ImagePullBackOff, ErrImagePull, InvalidImageName), None for a running one."""
    meta: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if job_name:
        meta["labels"].update({"batch.kubernetes.io/job-name": job_name, "job-name": job_name})
        meta["ownerReferences"] = [_owner("batch/v1", "Job", job_name)]
    state: JSON = {"running": {"startedAt": CREATED}}
    if waiting:
        state = {
            "waiting": {"reason": waiting, "message": _WAITING_MESSAGES[waiting].format(image)}
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            **_pod_template(name, image)["spec"],
            "nodeName": "node-1",
            "serviceAccountName": "default",
        },
        "status": {
            "phase": "Pending" if waiting else "Running",
            "hostIP": "10.0.0.11",
            "podIP": "10.244.1.7",
            "startTime": CREATED,
            "qosClass": "Burstable",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": CREATED}
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "image": image,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": state,
                    "lastState": {},
                }
            ],
        },
    }


def event(name: str, namespace: str, involved: JSON, reason: str, message: str) -> JSON:
    """A core/v1 Event about ``involved`` (an object as stored)."""
    meta = involved["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved["apiVersion"],
            "kind": involved["kind"],
            "name": meta["name"],
            "namespace": meta.get("namespace", namespace),
            "uid": meta.get("uid", ""),
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": "imagecheck"},
        "firstTimestamp": CREATED,
        "lastTimestamp": CREATED,
        "count": 1,
        "reportingComponent": "imagecheck",
        "reportingInstance": "imagecheck-reap",
    }


def lease(name: str, namespace: str, holder: str) -> JSON:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-12-03T09:00:00.000000Z",
            "renewTime": "2026-12-03T09:00:10.000000Z",
            "leaseTransitions": 0,
        },
    }


def pull_secret(name: str, namespace: str, registry: str, username: str, password: str) -> JSON:
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    config = {"auths": {registry: {"username": username, "password": password, "auth": auth}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }


def service_account(name: str, namespace: str = "default", *pull_secrets: str) -> JSON:
    """A ServiceAccount whose ``imagePullSecrets`` name ``pull_secrets``, in order."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
        "imagePullSecrets": [{"name": secret} for secret in pull_secrets],
    }


def deployment(
    name: str, namespace: str = "default", image: str = "registry.example.com/team/web:2.0"
) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": name},
            "generation": 1,
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "template": _pod_template(name, image, restart="Always"),
        },
        "status": {
            "observedGeneration": 1,
            "replicas": 2,
            "updatedReplicas": 2,
            "unavailableReplicas": 2,
        },
    }


_WAITING_MESSAGES = {
    "ImagePullBackOff": 'Back-off pulling image "{}"',
    "ErrImagePull": 'failed to pull and unpack image "{}": not found',
    "InvalidImageName": 'Failed to apply default image tag "{}": invalid reference format',
}


def _pod_template(name: str, image: str, restart: str = "Never") -> JSON:
    return {
        "metadata": {"labels": {"app": name}},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "imagePullSecrets": [{"name": "regcred"}],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "resources": {"requests": {"cpu": "2", "memory": "15Gi"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
        },
    }


def _owner(api_version: str, kind: str, name: str) -> JSON:
    # uid as the stand-in assigns it (KubeAPI.add), so owner and owned agree.
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{kind.lower()}-{name}",
        "controller": True,
        "blockOwnerDeletion": True,
    }
