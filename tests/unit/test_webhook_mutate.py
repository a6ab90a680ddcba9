"""``imagecheck.webhook._mutate`` and its route: which reviews get the scheduling gate, the
JSON Patch that adds it (applied with an RFC 6902 implementation, ``tests/support/jsonpatch``),
and the answers to what is not a review, on aiohttp's route and the framer's alike."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web import Application
from hypothesis import given
from hypothesis import strategies as st

from imagecheck.webhook import MutateEndpoint, mutate_review
from imagecheck.webhook._limits import MAX_REVIEW_BYTES
from imagecheck.webhook._review import MAX_DEPTH
from tests.support.admission import admission_review
from tests.support.jsonpatch import apply_patch

GATE = "imagecheck.io/images"
OTHER = [{"name": "example.com/quota"}, {"name": "kueue.x-k8s.io/admission"}]


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "train-", "namespace": "team-a"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }


def mutated(
    review: dict[str, Any],
    *,
    namespaces: frozenset[str] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """The ``response`` of the answer to ``review``, after checking its envelope."""
    body = json.dumps(review).encode()
    answer = asyncio.run(mutate_review(body, gate=GATE, namespaces=namespaces, ready=lambda: ready))
    envelope = json.loads(answer)
    assert (envelope["apiVersion"], envelope["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response: dict[str, Any] = envelope["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is True  # never a denial
    return response


def patched(review: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server stores it: the review's, with the answer's patch."""
    obj: dict[str, Any] = review["request"]["object"]
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    result: dict[str, Any] = apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    return result


GATED = {
    "no gates": (pod(), [{"name": GATE}]),
    "gates null": (pod(schedulingGates=None), [{"name": GATE}]),
    "gates empty": (pod(schedulingGates=[]), [{"name": GATE}]),
    "other gates kept in order": (pod(schedulingGates=OTHER), [*OTHER, {"name": GATE}]),
}


@pytest.mark.parametrize(("obj", "gates"), GATED.values(), ids=GATED)
def test_a_new_pod_gets_the_gate_after_the_gates_it_has(
    obj: dict[str, Any], gates: list[dict[str, str]]
) -> None:
    review = admission_review(obj)
    response = mutated(review)
    assert "warnings" not in response
    assert patched(review, response)["spec"]["schedulingGates"] == gates


def job() -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}


UNTOUCHED: dict[str, tuple[dict[str, Any], dict[str, Any], str | None]] = {
    "already gated": (
        admission_review(pod(schedulingGates=[*OTHER, {"name": GATE}])),
        {},
        None,
    ),
    "update": (admission_review(pod(), operation="UPDATE"), {}, None),
    "delete": (admission_review(pod(), operation="DELETE"), {}, None),
    "not a pod": (admission_review(job()), {}, None),
    "namespace not selected": (
        admission_review(pod(), namespace="team-b"),
        {"namespaces": frozenset({"team-a"})},
        None,
    ),
    "no controller ready": (admission_review(pod()), {"ready": False}, "no imagecheck gate"),
    "bound to a node": (admission_review(pod(nodeName="node-1")), {}, "spec.nodeName is set"),
    "no spec": (admission_review({"apiVersion": "v1", "kind": "Pod", "metadata": {}}), {}, None),
    "gates not a list": (admission_review(pod(schedulingGates={"a": 1})), {}, None),
}


@pytest.mark.parametrize(("review", "options", "warning"), UNTOUCHED.values(), ids=UNTOUCHED)
def test_any_other_review_is_allowed_as_it_is(
    review: dict[str, Any], options: dict[str, Any], warning: str | None
) -> None:
    response = mutated(review, **options)
    assert "patch" not in response
    assert "patchType" not in response
    if warning is None:
        assert "warnings" not in response
    else:
        assert warning in response["warnings"][0]


def test_a_selected_namespace_is_gated() -> None:
    review = admission_review(pod(), namespace="team-a")
    response = mutated(review, namespaces=frozenset({"team-a", "team-c"}))
    assert patched(review, response)["spec"]["schedulingGates"] == [{"name": GATE}]


def test_readiness_is_asked_per_review() -> None:
    state = [False]
    body = json.dumps(admission_review(pod())).encode()

    def answer() -> dict[str, Any]:
        raw = asyncio.run(mutate_review(body, gate=GATE, namespaces=None, ready=lambda: state[0]))
        return dict(json.loads(raw)["response"])

    assert "patch" not in answer()
    state[0] = True
    assert "patch" in answer()


gate_names = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?(/[a-z0-9]{1,10})?", fullmatch=True)


@given(st.lists(gate_names.filter(lambda name: name != GATE), max_size=6, unique=True))
def test_the_patch_applied_yields_exactly_the_old_gates_then_ours(names: list[str]) -> None:
    gates = [{"name": name} for name in names]
    review = admission_review(pod(schedulingGates=gates) if gates else pod())
    after = patched(review, mutated(review))
    assert after["spec"]["schedulingGates"] == [*gates, {"name": GATE}]
    del after["spec"]["schedulingGates"]
    before = review["request"]["object"]
    before["spec"].pop("schedulingGates", None)
    assert after == before  # nothing else changed


# --- what is not a review: the route and the framer answer alike --------------------------

BAD = {
    "not JSON": (b"{", 400, "not JSON"),
    "not a review": (b'{"kind": "Pod"}', 400, "not an AdmissionReview"),
    "v1beta1": (
        json.dumps(admission_review(pod(), api_version="admission.k8s.io/v1beta1")).encode(),
        400,
        "only admission.k8s.io/v1",
    ),
    "no uid": (
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
        400,
        "request.uid",
    ),
}


def endpoint(outcomes: list[str] | None = None) -> MutateEndpoint:
    sink = outcomes if outcomes is not None else []
    return MutateEndpoint(gate=GATE, namespaces=None, ready=lambda: True, observe=sink.append)


@pytest.mark.parametrize(("body", "status", "reason"), BAD.values(), ids=BAD)
def test_a_body_that_is_no_review_is_refused_on_both_paths(
    body: bytes, status: int, reason: str
) -> None:
    outcomes: list[str] = []
    now = endpoint(outcomes).answer_now(body)
    assert now is not None
    assert now[0] == status
    assert reason in json.loads(now[1])["error"]
    routed = asyncio.run(_post(endpoint(outcomes), body))
    assert routed == now
    assert outcomes == ["bad_request", "bad_request"]


def test_an_oversized_body_is_413_on_both_paths() -> None:
    body = b" " * (MAX_REVIEW_BYTES + 1)
    now = endpoint().answer_now(body)
    assert now is not None
    assert now[0] == 413
    status, _ = asyncio.run(_post(endpoint(), body))
    assert status == 413


def test_a_review_nested_too_deeply_is_pruned_off_the_loop() -> None:
    review = admission_review(pod())
    review["request"]["object"]["metadata"]["annotations"] = {"deep": "DEEP"}
    depth = 50 * MAX_DEPTH  # past Python's parser
    body = json.dumps(review).encode().replace(b'"DEEP"', b"[" * depth + b"]" * depth)
    assert endpoint().answer_now(body) is None  # aiohttp's route prunes it in a thread
    status, answer = asyncio.run(_post(endpoint(), body))
    assert status == 200
    assert json.loads(answer)["response"]["patchType"] == "JSONPatch"


def test_a_review_is_answered_alike_on_both_paths_and_observed() -> None:
    outcomes: list[str] = []
    body = json.dumps(admission_review(pod(schedulingGates=OTHER))).encode()
    now = endpoint(outcomes).answer_now(body)
    assert asyncio.run(_post(endpoint(outcomes), body)) == now
    assert outcomes == ["gated", "gated"]


async def _post(target: MutateEndpoint, body: bytes) -> tuple[int, bytes]:
    app = Application(client_max_size=2 * MAX_REVIEW_BYTES)
    app.add_routes(target.routes())
    async with TestClient(TestServer(app)) as client:
        answer = await client.post("/mutate", data=body)
        return answer.status, await answer.read()
