"""``imagecheck gate`` as the long-running process it is in a cluster: a real subprocess
against the Kubernetes API stand-in and the real registry. A tag pushed while the pod waits
releases it; a controller killed mid-way is started again and finishes from the list; the
mutating endpoint adds the gate only once the controller has listed."""

from __future__ import annotations

import base64
import json
import secrets
import signal

import httpx

from imagecheck.cluster._jobs import REAPED
from imagecheck.cluster._model import GATE
from tests.support.endpoint import RegistryEndpoint
from tests.support.gatecase import (
    NS,
    Start,
    eventually,
    gated_job,
    gates,
    gates_new_pods,
    mutate,
    start_fixture,  # noqa: F401 (a fixture)
    stored,
)
from tests.support.images import push_image
from tests.support.kubeapi import KubeAPI
from tests.support.net import free_port


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


def test_mutate_adds_the_gate_once_the_controller_listed(kube_api: KubeAPI, start: Start) -> None:
    port = free_port()
    start("--listen", f"127.0.0.1:{port}", "-n", NS)
    eventually(lambda: gates_new_pods(port))
    answer = mutate(port)
    assert answer is not None
    ops = json.loads(base64.b64decode(answer["patch"]))
    assert ops == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
    assert "patch" not in (mutate(port, "other") or {"patch": "no answer"})  # not one of -n
