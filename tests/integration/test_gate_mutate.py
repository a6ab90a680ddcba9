"""A pod created through the Kubernetes API stand-in gets imagecheck's scheduling gate from
``POST /mutate`` served over TLS as ``imagecheck gate`` serves it (the listener, the framer
or aiohttp's own path), and what the API server does when that webhook is down."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from aiohttp import web

from tests.support.kubeapi import KubeAPI, MutatingWebhook
from tests.support.mutateserver import GATE, MutateServer
from tests.support.net import free_port
from tests.support.pki import TLSMaterial

pytestmark = pytest.mark.usefixtures("fastpath_mode")

OTHER = {"name": "example.com/quota"}


@pytest.fixture
def mutate_server(tls_material: TLSMaterial) -> Iterator[MutateServer]:
    with MutateServer(tls_material.server_context()) as server:
        yield server


def register(kube_api: KubeAPI, url: str, tls_material: TLSMaterial, policy: str = "Fail") -> None:
    kube_api.register(
        MutatingWebhook(
            "gate.imagecheck.io",
            url,
            trust=tls_material.client_context(),
            failure_policy=policy,
            timeout=5.0,
        )
    )


def create_pod(kube_api: KubeAPI, tls_material: TLSMaterial, **spec: Any) -> httpx.Response:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "train-"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }
    return httpx.post(
        f"{kube_api.server.url}/api/v1/namespaces/team-a/pods",
        json=pod,
        headers={"Authorization": f"Bearer {kube_api.token}"},
        verify=tls_material.client_context(),
        trust_env=False,
        timeout=20,
    )


def stored_gates(kube_api: KubeAPI, answer: httpx.Response) -> Any:
    assert answer.status_code == 201, answer.text
    name = answer.json()["metadata"]["name"]
    stored = kube_api.store.objects[("pods", "team-a", name)]
    assert answer.json()["spec"] == stored["spec"]
    return stored["spec"].get("schedulingGates")


def test_a_created_pod_is_stored_with_the_gate(
    kube_api: KubeAPI, mutate_server: MutateServer, tls_material: TLSMaterial
) -> None:
    register(kube_api, mutate_server.url, tls_material)
    assert stored_gates(kube_api, create_pod(kube_api, tls_material)) == [{"name": GATE}]
    assert mutate_server.outcomes == ["gated"]


def test_other_gates_are_kept_before_ours(
    kube_api: KubeAPI, mutate_server: MutateServer, tls_material: TLSMaterial
) -> None:
    register(kube_api, mutate_server.url, tls_material)
    answer = create_pod(kube_api, tls_material, schedulingGates=[OTHER])
    assert stored_gates(kube_api, answer) == [OTHER, {"name": GATE}]


def test_no_gate_while_no_controller_is_ready(
    kube_api: KubeAPI, mutate_server: MutateServer, tls_material: TLSMaterial
) -> None:
    register(kube_api, mutate_server.url, tls_material)
    mutate_server.ready = False
    assert stored_gates(kube_api, create_pod(kube_api, tls_material)) is None
    assert mutate_server.outcomes == ["not_ready"]


def test_a_webhook_down_is_skipped_under_ignore(
    kube_api: KubeAPI, tls_material: TLSMaterial
) -> None:
    register(kube_api, f"https://127.0.0.1:{free_port()}/mutate", tls_material, "Ignore")
    assert stored_gates(kube_api, create_pod(kube_api, tls_material)) is None


def test_a_webhook_down_fails_the_create_under_fail(
    kube_api: KubeAPI, tls_material: TLSMaterial
) -> None:
    register(kube_api, f"https://127.0.0.1:{free_port()}/mutate", tls_material, "Fail")
    answer = create_pod(kube_api, tls_material)
    assert answer.status_code == 500
    assert answer.json()["reason"] == "InternalError"
    assert 'failed calling webhook "gate.imagecheck.io"' in answer.json()["message"]
    assert not [key for key in kube_api.store.objects if key[0] == "pods"]


def test_the_framer_answers_the_review_itself_when_on(
    kube_api: KubeAPI, tls_material: TLSMaterial, fastpath_mode: str
) -> None:
    server = MutateServer(tls_material.server_context())
    routed: list[str] = []
    route = server.endpoint.mutate

    async def counted(request: web.Request) -> web.Response:
        routed.append(request.path)
        return await route(request)

    server.endpoint.mutate = counted  # type: ignore[method-assign]
    with server:
        register(kube_api, server.url, tls_material)
        assert stored_gates(kube_api, create_pod(kube_api, tls_material)) == [{"name": GATE}]
    assert routed == ([] if fastpath_mode == "fast" else ["/mutate"])
