"""``imagecheck gate`` as the long-running process it is in a cluster: a real subprocess
against the Kubernetes API stand-in and the real registry. A tag pushed while the pod waits
releases it; a controller killed mid-way is started again and finishes from the list; the
mutating endpoint adds the gate only once the controller has listed."""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagecheck.cluster._jobs import REAPED
from imagecheck.cluster._model import GATE
from tests.integration.test_gate_e2e import NS, gated_job, stored
from tests.support.endpoint import RegistryEndpoint
from tests.support.images import push_image
from tests.support.kubeapi import KubeAPI
from tests.support.pki import TLSMaterial

Start = Callable[..., "subprocess.Popen[str]"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


@pytest.fixture
def start(kube_api: KubeAPI, tls_material: TLSMaterial, tmp_path: Path) -> Iterator[Start]:
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


def test_an_image_pushed_while_the_pod_waits_releases_it(
    kube_api: KubeAPI, registry_plain: RegistryEndpoint, start: Start
) -> None:
    repo = f"pushed/{secrets.token_hex(4)}"
    gated_job(kube_api, "train", f"{registry_plain.host}/{repo}:1.0")
    process = start("--listen", f"127.0.0.1:{free_port()}", "--wait", "5m")
    assert process.stdout is not None
    first = json.loads(process.stdout.readline())  # the first check: not there yet
    assert (first["pod"], first["action"], first["verdict"]) == ("train-abcde", "kept", "missing")
    with httpx.Client(trust_env=False) as client:
        push_image(client, registry_plain.url, repo, "1.0")
    eventually(lambda: gates(kube_api, "train-abcde") == [])
    assert REAPED not in stored(kube_api, "jobs", "train")["metadata"]["annotations"]


def test_a_controller_killed_mid_way_is_started_again_and_finishes(
    kube_api: KubeAPI, registry_plain: RegistryEndpoint, start: Start
) -> None:
    repo = f"pushed/{secrets.token_hex(4)}"
    gated_job(kube_api, "train", f"{registry_plain.host}/{repo}:1.0")
    gated_job(kube_api, "found", registry_plain.ref("sample/app:1.0.0"))
    first = start("--listen", f"127.0.0.1:{free_port()}", "--wait", "5m")
    assert first.stdout is not None
    seen = {json.loads(first.stdout.readline())["pod"] for _ in range(2)}
    assert seen == {"train-abcde", "found-abcde"}
    first.send_signal(signal.SIGKILL)  # no clean stop: nothing handed over
    first.wait(timeout=10)
    assert gates(kube_api, "found-abcde") == []
    assert gates(kube_api, "train-abcde") == [{"name": GATE}]
    with httpx.Client(trust_env=False) as client:
        push_image(client, registry_plain.url, repo, "1.0")
    start("--listen", f"127.0.0.1:{free_port()}", "--wait", "5m")
    eventually(lambda: gates(kube_api, "train-abcde") == [])


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


def test_mutate_adds_the_gate_once_the_controller_listed(kube_api: KubeAPI, start: Start) -> None:
    port = free_port()
    start("--listen", f"127.0.0.1:{port}", "-n", NS)
    eventually(lambda: gates_new_pods(port))
    answer = mutate(port)
    assert answer is not None
    ops = json.loads(base64.b64decode(answer["patch"]))
    assert ops == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
    assert "patch" not in (mutate(port, "other") or {"patch": "no answer"})  # not one of -n
