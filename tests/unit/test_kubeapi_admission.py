"""The stand-in API's mutating admission (``tests/support/kubeapi/admission.py``) against
webhooks that answer anything: which failures ``failurePolicy: Ignore`` lets through (a failed
call, an invalid answer) and which fail the create whatever the policy (a denial, a patch that
is no JSON Patch or does not apply), as kube-apiserver's mutating dispatcher decides."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.kubeapi.admission import MutatingWebhook, mutate
from tests.support.kubeapi.store import RESOURCES, ApiError

PODS = next(res for res in RESOURCES if res.plural == "pods")
JOBS = next(res for res in RESOURCES if res.plural == "jobs")
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}

Answer = Callable[[dict[str, Any]], web.Response]


def reply(**response: Any) -> Answer:
    def answer(review: dict[str, Any]) -> web.Response:
        body = {"uid": review["request"]["uid"], **response}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "response": body})

    return answer


def patch(operations: Any) -> str:
    return base64.b64encode(json.dumps(operations).encode()).decode()


GATE_PATCH = patch([{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "g"}]}])

CALL_FAILED: dict[str, Answer] = {
    "HTTP 500": lambda review: web.Response(status=500),
    "not JSON": lambda review: web.Response(text="<html>"),
    "no response": lambda review: web.json_response({"kind": "AdmissionReview"}),
    "another uid": lambda review: web.json_response({"response": {"uid": "x", "allowed": True}}),
    "patch without patchType": reply(allowed=True, patch=GATE_PATCH),
    "patchType not JSONPatch": reply(allowed=True, patch=GATE_PATCH, patchType="MergePatch"),
    "patch not base64": reply(allowed=True, patch="%%%", patchType="JSONPatch"),
}

ALWAYS_FAILS: dict[str, tuple[Answer, int]] = {
    "denied": (reply(allowed=False, status={"code": 403, "message": "no"}), 403),
    "denied without a code": (reply(allowed=False), 400),
    "patch not JSON": (
        reply(allowed=True, patch=base64.b64encode(b"{").decode(), patchType="JSONPatch"),
        500,
    ),
    "patch not an array": (
        reply(allowed=True, patch=patch({"op": "add"}), patchType="JSONPatch"),
        500,
    ),
    "patch does not apply": (
        reply(
            allowed=True,
            patch=patch([{"op": "add", "path": "/nothing/here", "value": 1}]),
            patchType="JSONPatch",
        ),
        500,
    ),
}


def admitted(answer: Answer, policy: str, res: Any = PODS) -> Any:
    async def run() -> Any:
        async def handle(request: web.Request) -> web.Response:
            return answer(await request.json())

        app = web.Application()
        app.router.add_post("/mutate", handle)
        async with TestServer(app) as server:
            hook = MutatingWebhook("w", str(server.make_url("/mutate")), failure_policy=policy)
            return await mutate([hook], res, "team-a", POD)

    return asyncio.run(run())


@pytest.mark.parametrize("answer", CALL_FAILED.values(), ids=CALL_FAILED)
def test_a_failed_call_is_skipped_under_ignore_and_fails_the_create_under_fail(
    answer: Answer,
) -> None:
    assert admitted(answer, "Ignore")["spec"] == POD["spec"]
    with pytest.raises(ApiError) as failed:
        admitted(answer, "Fail")
    assert failed.value.status["code"] == 500
    assert 'failed calling webhook "w"' in failed.value.status["message"]


@pytest.mark.parametrize(("answer", "code"), ALWAYS_FAILS.values(), ids=ALWAYS_FAILS)
@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_a_denial_or_a_bad_patch_fails_the_create_whatever_the_policy(
    answer: Answer, code: int, policy: str
) -> None:
    with pytest.raises(ApiError) as failed:
        admitted(answer, policy)
    assert failed.value.status["code"] == code


def test_a_patch_is_applied_to_the_object_stored() -> None:
    obj = admitted(reply(allowed=True, patch=GATE_PATCH, patchType="JSONPatch"), "Fail")
    assert obj["spec"]["schedulingGates"] == [{"name": "g"}]
    assert obj["metadata"]["namespace"] == "team-a"


def test_a_resource_the_webhook_is_not_registered_for_is_not_sent() -> None:
    def never(review: dict[str, Any]) -> web.Response:
        raise AssertionError("called")

    assert admitted(never, "Fail", JOBS) == POD
