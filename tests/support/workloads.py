"""Workload objects of every kind the webhook reviews, around one pod spec (:data:`SPEC`):
the built-in kinds and a custom resource that keeps a pod template (:data:`WORKLOADS`), and
kinds whose containers are found by shape alone (:data:`TEKTON_TASK`, :data:`ARGO_WORKFLOW`)."""

from __future__ import annotations

from typing import Any

import pytest

SPEC: dict[str, Any] = {
    "initContainers": [{"name": "setup", "image": "busybox:1.36"}],
    "containers": [
        {"name": "app", "image": "ghcr.io/acme/app:2"},
        {"name": "proxy", "image": "envoyproxy/envoy:v1.30"},
    ],
    "ephemeralContainers": [{"name": "debug", "image": "nicolaka/netshoot"}],
    "imagePullSecrets": [{"name": "regcred"}, {"name": "mirror"}],
}


def templated(spec: dict[str, Any]) -> dict[str, Any]:
    return {"template": {"metadata": {"labels": {"a": "b"}}, "spec": spec}}


def obj(kind: str, spec: dict[str, Any], api_version: str = "apps/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "web"}, "spec": spec}


WORKLOADS = [
    pytest.param(obj("Pod", SPEC, "v1"), id="Pod"),
    pytest.param(obj("Job", templated(SPEC), "batch/v1"), id="Job"),
    pytest.param(
        obj(
            "CronJob", {"schedule": "@daily", "jobTemplate": {"spec": templated(SPEC)}}, "batch/v1"
        ),
        id="CronJob",
    ),
    pytest.param(obj("Deployment", templated(SPEC)), id="Deployment"),
    pytest.param(obj("StatefulSet", templated(SPEC)), id="StatefulSet"),
    pytest.param(obj("DaemonSet", templated(SPEC)), id="DaemonSet"),
    pytest.param(obj("ReplicaSet", templated(SPEC)), id="ReplicaSet"),
    pytest.param(obj("Rollout", templated(SPEC), "argoproj.io/v1alpha1"), id="custom-resource"),
]


TEKTON_TASK = {
    "apiVersion": "tekton.dev/v1",
    "kind": "Task",
    "metadata": {"name": "build"},
    "spec": {
        "params": [{"name": "image"}],
        "stepTemplate": {"image": "alpine:3.20", "env": []},
        "steps": [
            {"name": "compile", "image": "golang:1.22", "script": "go build"},
            {"name": "push", "image": "$(params.image)"},
            {"name": "shared", "ref": {"name": "git-clone"}},
        ],
        "sidecars": [{"name": "docker", "image": "docker:dind"}],
    },
}


ARGO_WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"generateName": "hello-"},
    "spec": {
        "imagePullSecrets": [{"name": "argo-pull"}],
        "templates": [
            {"name": "main", "steps": [[{"name": "a", "template": "say"}]]},
            {"name": "say", "container": {"image": "docker/whalesay", "command": ["cowsay"]}},
            {"name": "py", "script": {"image": "{{inputs.parameters.py}}", "source": "1"}},
        ],
    },
}
