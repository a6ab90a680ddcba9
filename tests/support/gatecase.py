"""What the gate's integration tests share: gated pods (and their Jobs) in the Kubernetes API
stand-in, the ``imagecheck gate`` process as a fixture, and ``POST /mutate`` asked as the API
server asks it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagecheck.cluster._model import GATE
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.kubecli import ago
from tests.support.pki import TLSMaterial

NS = "ci"
PODS = "/api/v1/namespaces/ci/pods"
JSON_PATCH = "application/json-patch+json"


def gated_job(
    kube_api: KubeAPI, name: str, image: str, *, age: float = 10, gates: tuple[str, ...] = (GATE,),
    job: bool = True,
) -> None:  # fmt: skip
    """A Job (or, ``job`` False, a ReplicaSet's pod) whose pod was created ``age`` seconds
    ago with ``gates``: pending, never scheduled."""
    pod = k8s.pod(f"{name}-abcde", NS, image, waiting=None, job_name=name if job else None)
    if not job:
        pod["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-7d9f",
             "uid": "uid-rs", "controller": True}
        ]  # fmt: skip
    del pod["spec"]["nodeName"]
    pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    pod["status"] = {"phase": "Pending", "qosClass": "Burstable", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}  # fmt: skip
    if job:
        record = k8s.job(name, NS, image)
        record["status"]["startTime"] = ago(age)
        kube_api.add(record)
    kube_api.add(pod)
    with kube_api.store.lock:  # the store stamps a fixed time; the command reads the clock
        kube_api.store.objects[("pods", NS, f"{name}-abcde")]["metadata"]["creationTimestamp"] = (
            ago(age)
        )


def stored(kube_api: KubeAPI, plural: str, name: str) -> Any:
    with kube_api.store.lock:
        return kube_api.store.objects[(plural, NS, name)]


Start = Callable[..., "subprocess.Popen[str]"]


def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


@pytest.fixture(name="start")
def start_fixture(kube_api: KubeAPI, tls_material: TLSMaterial, tmp_path: Path) -> Iterator[Start]:
    started: list[subprocess.Popen[str]] = []
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGECHECK_", "KUBE"))}
    env.update(HOME=str(tmp_path), DOCKER_CONFIG=str(empty), XDG_RUNTIME_DIR=str(empty))

    def run(*args: str, pod: str = "imagecheck-gate") -> subprocess.Popen[str]:
        """``gate`` without leader election unless ``args`` say ``--leader-elect`` (the last
        of the two wins); ``pod`` is the replica's name (its Lease identity)."""
        command = [sys.executable, "-m", "imagecheck", "gate", "--kubeconfig",
                   str(kube_api.kubeconfig), "--ca-file", str(tls_material.ca_file),
                   "--insecure-http", "--no-leader-elect", "--resync", "5s", "-o", "json",
                   *args]  # fmt: skip
        process = subprocess.Popen(command, env={**env, "POD_NAME": pod},
                                   stdout=subprocess.PIPE, text=True)  # fmt: skip
        started.append(process)
        return process

    yield run
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)


def gates(kube_api: KubeAPI, name: str) -> list[Any]:
    return list(stored(kube_api, "pods", name)["spec"].get("schedulingGates") or [])


def mutate(port: int, namespace: str = NS) -> dict[str, Any] | None:
    """What ``POST /mutate`` on ``port`` answers for a pod created in ``namespace`` (None: no
    answer yet, the server is not up)."""
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "operation": "CREATE", "namespace": namespace,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "object": {"kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}}}}  # fmt: skip
    try:
        with httpx.Client(trust_env=False) as client:
            got = client.post(f"http://127.0.0.1:{port}/mutate", json=review)
    except httpx.HTTPError:
        return None
    return got.json()["response"]  # type: ignore[no-any-return]


def gates_new_pods(port: int) -> bool:
    """``/mutate`` answers with the gate: allowed, with a patch."""
    answer = mutate(port)
    return answer is not None and answer["allowed"] is True and "patch" in answer
