"""``imagecheck.webhook._review``: AdmissionReview in, images out, the verdict and the answer
back. Pure functions, so plain tables: every kind's pod spec, every container list, every
status under every policy, and the response's shape and caps."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from imagecheck.reference import parse_reference
from imagecheck.result import CheckResult, Status
from imagecheck.webhook._review import (
    API_VERSION,
    MAX_DEPTH,
    BadReview,
    ContainerImage,
    Review,
    decide,
    distinct_images,
    load_json,
    load_json_pruned,
    parse_review,
    response,
)
from tests.support.workloads import ARGO_WORKFLOW, SPEC, TEKTON_TASK, WORKLOADS, obj, templated

IMAGES = [
    ContainerImage("setup", "busybox:1.36"),
    ContainerImage("app", "ghcr.io/acme/app:2"),
    ContainerImage("proxy", "envoyproxy/envoy:v1.30"),
    ContainerImage("debug", "nicolaka/netshoot"),
]


def review_body(obj: Any, **request: Any) -> dict[str, Any]:
    kind = obj.get("kind", "") if isinstance(obj, dict) else ""
    fields: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "apps", "version": "v1", "kind": kind},
        "namespace": "team-a",
        "operation": "CREATE",
        "object": obj,
        **request,
    }
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "request": fields}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_kind_yields_every_container_list_in_order(workload: dict[str, Any]) -> None:
    review = parse_review(review_body(workload))
    assert review == Review(
        uid="705ab4f5-6393-11e8-b7cc-42010a800002",
        kind=workload["kind"],
        namespace="team-a",
        name="web",
        images=IMAGES,
        pull_secrets=["regcred", "mirror"],
    )


@pytest.mark.parametrize(
    "workload",
    [
        pytest.param(obj("ConfigMap", {}, "v1"), id="no-pod-template"),
        pytest.param({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}, id="no-spec"),
        pytest.param(obj("Service", {"template": "x"}, "v1"), id="template-not-an-object"),
        pytest.param(obj("Job", {"template": {"spec": None}}, "batch/v1"), id="template-spec-null"),
        pytest.param(None, id="delete-has-no-object"),
        pytest.param(obj("Pod", {"containers": []}, "v1"), id="pod-without-containers"),
    ],
)
def test_objects_without_images_yield_none(workload: Any) -> None:
    review = parse_review(review_body(workload))
    assert review.images == []
    assert review.pull_secrets == []


def test_any_kind_s_containers_are_found_by_shape() -> None:
    """The webhook finds what scan finds (issue #13): Tekton steps, step templates and
    sidecars; a step that refers to a StepAction has no image of its own."""
    review = parse_review(review_body(TEKTON_TASK))
    assert review.images == [
        ContainerImage("stepTemplate", "alpine:3.20"),
        ContainerImage("compile", "golang:1.22"),
        ContainerImage("docker", "docker:dind"),
    ]
    assert review.templated == [ContainerImage("push", "$(params.image)")]


def test_placeholders_of_a_controller_are_allowed_with_a_warning() -> None:
    review = parse_review(review_body(ARGO_WORKFLOW))
    assert review.images == [ContainerImage("say", "docker/whalesay")]
    assert review.templated == [ContainerImage("py", "{{inputs.parameters.py}}")]
    assert review.pull_secrets == ["argo-pull"]
    found = {"docker/whalesay": CheckResult("docker/whalesay", None, Status.FOUND)}
    verdict = decide(review, found, warn_only=False, errors_pass=False)
    assert (verdict.allowed, verdict.outcome) == (True, "allowed")
    assert verdict.warnings == [
        "container 'py': image '{{inputs.parameters.py}}' not checked: "
        "a template placeholder its controller fills in"
    ]


def test_placeholders_in_a_kind_kubernetes_runs_are_checked_as_written() -> None:
    """Nothing fills in $(TAG) in a Pod's image: the kubelet would pull it as written."""
    spec = {"containers": [{"name": "app", "image": "nginx:$(TAG)"}]}
    review = parse_review(review_body(obj("Pod", spec, "v1")))
    assert review.images == [ContainerImage("app", "nginx:$(TAG)")]
    assert review.templated == []


def test_containers_without_an_image_string_are_skipped() -> None:
    spec = {
        "containers": [
            {"name": "ok", "image": "nginx"},
            {"name": "no-image"},
            {"name": "number", "image": 5},
            "not-a-container",
        ],
        "initContainers": None,
        "imagePullSecrets": [{"name": "kept"}, {"nameless": True}, "x"],
    }
    review = parse_review(review_body(obj("Pod", spec, "v1")))
    assert review.images == [ContainerImage("ok", "nginx")]
    assert review.pull_secrets == ["kept"]


@pytest.mark.parametrize(
    ("metadata", "request_fields", "name", "namespace"),
    [
        ({"name": "web", "namespace": "ns-meta"}, {}, "web", "team-a"),
        ({"generateName": "web-"}, {}, "web-", "team-a"),
        ({}, {"name": "from-request"}, "from-request", "team-a"),
        ({"namespace": "ns-meta"}, {"namespace": None}, "", "ns-meta"),
    ],
    ids=["name", "generate-name", "request-name", "namespace-from-metadata"],
)
def test_name_and_namespace(
    metadata: dict[str, Any], request_fields: dict[str, Any], name: str, namespace: str
) -> None:
    workload = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": SPEC}
    review = parse_review(review_body(workload, **request_fields))
    assert (review.name, review.namespace) == (name, namespace)


def test_kind_falls_back_to_the_object() -> None:
    review = parse_review(review_body(obj("Pod", SPEC, "v1"), kind=None))
    assert review.kind == "Pod"


def without(key: str) -> dict[str, Any]:
    body = review_body(obj("Pod", SPEC, "v1"))
    del body["request"][key]
    return body


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(None, id="null"),
        pytest.param([], id="array"),
        pytest.param("AdmissionReview", id="string"),
        pytest.param(obj("Pod", SPEC, "v1"), id="a-pod"),
        pytest.param({**review_body({}), "apiVersion": "admission.k8s.io/v1beta1"}, id="v1beta1"),
        pytest.param({**review_body({}), "apiVersion": None}, id="no-api-version"),
        pytest.param({"apiVersion": API_VERSION, "kind": "AdmissionReview"}, id="no-request"),
        pytest.param({**review_body({}), "request": []}, id="request-not-an-object"),
        pytest.param(without("uid"), id="no-uid"),
        pytest.param(review_body({}, uid=7), id="uid-not-a-string"),
    ],
)
def test_what_is_not_a_v1_review_is_a_bad_review(body: Any) -> None:
    with pytest.raises(BadReview):
        parse_review(body)


@pytest.mark.parametrize(
    "workload",
    [
        pytest.param(
            obj("Thing", templated({"containers": 5}), "example.com/v1"),
            id="containers-a-number",
        ),
        pytest.param(
            obj("Thing", templated({"imagePullSecrets": 5}), "example.com/v1"),
            id="pull-secrets-a-number",
        ),
        pytest.param(
            {"apiVersion": "v1", "kind": "Pod", "metadata": "x", "spec": SPEC},
            id="metadata-a-string",
        ),
        pytest.param(
            obj("Thing", templated({"containers": {"a": 1}}), "x/v1"), id="containers-a-map"
        ),
    ],
)
def test_malformed_objects_raise_nothing_but_bad_review(workload: Any) -> None:
    """A custom resource with ``x-kubernetes-preserve-unknown-fields`` reaches the webhook
    unvalidated; whatever its shape, the server must answer (400 or a verdict), not crash."""
    with contextlib.suppress(BadReview):
        parse_review(review_body(workload))


# -- decide ----------------------------------------------------------------------------------

IMAGE = "ghcr.io/acme/app:2"


def one_image(status: Status) -> tuple[Review, dict[str, CheckResult]]:
    review = Review("u", "Deployment", "team-a", "web", [ContainerImage("app", IMAGE)], [])
    result = CheckResult(IMAGE, parse_reference(IMAGE), status, message="why")
    return review, {IMAGE: result}


# status, warn_only, errors_pass -> allowed, outcome, has a refusal message, warnings
DECISIONS = [
    (Status.FOUND, False, False, True, "allowed", False, 0),
    (Status.FOUND, True, True, True, "allowed", False, 0),
    (Status.MISSING, False, True, False, "denied", True, 0),
    (Status.MISSING, False, False, False, "denied", True, 0),
    (Status.MISSING, True, True, True, "warned", False, 1),
    (Status.MISSING, True, False, True, "warned", False, 1),
    (Status.INVALID, False, True, False, "denied", True, 0),
    (Status.INVALID, True, True, True, "warned", False, 1),
    (Status.DENIED, False, True, True, "error", False, 1),
    (Status.DENIED, False, False, False, "denied", True, 0),
    (Status.DENIED, True, True, True, "error", False, 1),
    (Status.DENIED, True, False, True, "warned", False, 1),
    (Status.ERROR, False, True, True, "error", False, 1),
    (Status.ERROR, False, False, False, "denied", True, 0),
    (Status.ERROR, True, True, True, "error", False, 1),
    (Status.ERROR, True, False, True, "warned", False, 1),
]


@pytest.mark.parametrize(
    ("status", "warn_only", "errors_pass", "allowed", "outcome", "refused", "warnings"),
    DECISIONS,
    ids=[
        f"{s.value}-{'warn' if w else 'deny'}-{'pass' if p else 'fail'}"
        for s, w, p, *_ in DECISIONS
    ],
)
def test_decide(
    status: Status,
    warn_only: bool,
    errors_pass: bool,
    allowed: bool,
    outcome: str,
    refused: bool,
    warnings: int,
) -> None:
    review, results = one_image(status)
    verdict = decide(review, results, warn_only=warn_only, errors_pass=errors_pass)
    assert (verdict.allowed, verdict.outcome) == (allowed, outcome)
    assert len(verdict.warnings) == warnings
    if refused:
        assert verdict.message == (
            f"imagecheck refused Deployment web: container 'app': image {IMAGE} is "
            f"{status.value}: why"
        )
    else:
        assert verdict.message == ""
    for warning in verdict.warnings:
        assert f"container 'app': image {IMAGE} is {status.value}: why" in warning
        passed = status in (Status.DENIED, Status.ERROR) and errors_pass
        assert warning.startswith("not checked, allowed by --on-error pass") == passed


def test_decide_names_every_problem_and_keeps_passed_errors_as_warnings() -> None:
    items = [
        ("a", "x/a:1", Status.MISSING),
        ("b", "x/b:1", Status.ERROR),
        ("c", "x/c:1", Status.FOUND),
    ]
    review = Review("u", "Pod", "ns", "p", [ContainerImage(n, i) for n, i, _ in items], [])
    results = {i: CheckResult(i, parse_reference(i), s, message=s.value) for _, i, s in items}
    verdict = decide(review, results, warn_only=False, errors_pass=True)
    assert not verdict.allowed
    assert "container 'a': image docker.io/x/a:1 is missing" in verdict.message
    assert "'b'" not in verdict.message and "'c'" not in verdict.message
    [warning] = verdict.warnings
    assert "container 'b': image docker.io/x/b:1 is error" in warning


def test_decide_with_an_invalid_reference_shows_it_as_given() -> None:
    review = Review("u", "Pod", "ns", "p", [ContainerImage("app", "UPPER/case")], [])
    results = {"UPPER/case": CheckResult("UPPER/case", None, Status.INVALID, message="bad")}
    verdict = decide(review, results, warn_only=False, errors_pass=True)
    assert (
        verdict.message
        == "imagecheck refused Pod p: container 'app': image UPPER/case is invalid: bad"
    )


# -- response --------------------------------------------------------------------------------


def test_response_allowed_is_minimal() -> None:
    review, results = one_image(Status.FOUND)
    verdict = decide(review, results, warn_only=False, errors_pass=True)
    assert response("uid-1", verdict) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "uid-1", "allowed": True},
    }


def test_response_refused_carries_a_403_status() -> None:
    review, results = one_image(Status.MISSING)
    verdict = decide(review, results, warn_only=False, errors_pass=True)
    answer = response("uid-2", verdict)["response"]
    assert answer == {
        "uid": "uid-2",
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": verdict.message},
    }


def test_response_warnings_and_message_are_capped() -> None:
    items = [ContainerImage(f"c{i}", f"r.example.com/{'a' * 200}/app{i}:1") for i in range(25)]
    review = Review("u", "Pod", "ns", "p", items, [])
    results = {
        c.image: CheckResult(c.image, parse_reference(c.image), Status.MISSING, message="gone")
        for c in items
    }
    warned = response("u", decide(review, results, warn_only=True, errors_pass=True))["response"]
    assert warned["allowed"] is True
    assert "status" not in warned
    assert len(warned["warnings"]) == 20
    assert all(len(w) == 256 for w in warned["warnings"])
    assert warned["warnings"][0].startswith("container 'c0': image r.example.com/aaa")
    refused = response("u", decide(review, results, warn_only=False, errors_pass=True))["response"]
    assert len(refused["status"]["message"]) == 4096
    assert "warnings" not in refused


def test_distinct_images_keeps_first_seen_order() -> None:
    items = [ContainerImage(n, i) for n, i in [("a", "x:1"), ("b", "y:1"), ("c", "x:1")]]
    review = Review("u", "Pod", "ns", "p", items, [])
    assert distinct_images(review) == ["x:1", "y:1"]


# -- untrusted JSON (issue #10) ----------------------------------------------------------------


def deep(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def test_load_json_reads_numbers_of_any_length() -> None:
    # Python refuses int() of more than 4,300 digits; such a number must not sink the review.
    body = review_body(obj("Pod", SPEC, "v1"))
    text = json.dumps(body).replace('"operation"', f'"n": {"9" * 5000}, "m": 42, "operation"')
    data = load_json(text.encode())
    assert data["request"]["n"] == float("inf")
    assert data["request"]["m"] == 42
    assert parse_review(data).images == IMAGES


@pytest.mark.parametrize("depth", [2_000, 60_000])
def test_a_review_with_a_deeply_nested_field_is_read_with_that_field_pruned(depth: int) -> None:
    """Deeper than Python's parser goes: the review is still read, and its pod spec with it."""
    body = review_body(obj("Rollout", templated(SPEC), "argoproj.io/v1alpha1"))
    text = json.dumps(body).replace(
        '"operation"', f'"deep": {deep(depth, chr(34) + "]]}}[[" + chr(34))}, "operation"'
    )
    with pytest.raises(RecursionError):
        load_json(text.encode())
    data = load_json_pruned(text.encode())
    review = parse_review(data)
    assert review.images == IMAGES
    assert review.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    pruned = data["request"]["deep"]
    for _ in range(MAX_DEPTH - 2):  # the review is at depth 1, its request 2, "deep" 3
        pruned = pruned[0]
    assert pruned == []  # the first container deeper than MAX_DEPTH, read as empty


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(deep(3), [[[1]]], id="shallow-untouched"),
        pytest.param(deep(6), [[[[[]]]]], id="cut-at-depth"),
        pytest.param('[["[[[[[", {"a": [[[[1]]]]}], 2]', [["[[[[[", {"a": [[]]}], 2], id="strings"),
        pytest.param('[[[["\\"[[[[", [[1]]]]], 3]', [[[['"[[[[', []]]], 3], id="escaped-quote"),
        pytest.param('{"a": {"b": {"c": {"d": {"e": 1}}}}, "f": [1]}',
                     {"a": {"b": {"c": {"d": {}}}}, "f": [1]}, id="objects"),
    ],
)  # fmt: skip
def test_pruning_keeps_what_is_shallow_and_empties_what_is_deep(text: str, expected: Any) -> None:
    assert load_json_pruned(text.encode(), max_depth=4) == expected


def test_names_that_are_not_strings_are_left_out() -> None:
    spec = {"containers": [{"name": ["x"] * 10_000, "image": "nginx"}]}
    body = review_body(
        {"kind": "Pod", "metadata": {"name": {"a": 1}, "namespace": 5}, "spec": spec},
        namespace=None,
    )
    review = parse_review(body)
    assert (review.name, review.namespace) == ("", "")
    assert review.images == [ContainerImage("", "nginx")]


# -- images not checked ------------------------------------------------------------------------


def big_review(count: int) -> Review:
    images = [ContainerImage(f"c{i}", f"x/i{i}:1") for i in range(count)]
    return Review("u", "Pod", "ns", "p", images, [])


@pytest.mark.parametrize("errors_pass", [True, False], ids=["pass", "fail"])
def test_images_not_checked_are_refused_whatever_on_error_says(errors_pass: bool) -> None:
    review = big_review(5)
    found = {f"x/i{i}:1": CheckResult(f"x/i{i}:1", None, Status.FOUND) for i in range(2)}
    unchecked = {f"x/i{i}:1": "over the limit" for i in range(2, 5)}
    verdict = decide(review, found, warn_only=False, errors_pass=errors_pass, unchecked=unchecked)
    assert (verdict.allowed, verdict.outcome) == (False, "denied")
    assert verdict.message == (
        "imagecheck refused Pod p: 3 image(s) not checked (container 'c2', 'c3', 'c4'): "
        "over the limit"
    )
    assert verdict.warnings == []


def test_images_not_checked_are_summed_up_first_and_warned_in_warn_mode() -> None:
    review = big_review(6)
    missing = CheckResult("x/i0:1", None, Status.MISSING, message="gone")
    unchecked = {f"x/i{i}:1": "queued" for i in range(1, 6)}
    refused = decide(review, {"x/i0:1": missing}, warn_only=False, errors_pass=True,
                     unchecked=unchecked)  # fmt: skip
    assert refused.message.startswith(
        "imagecheck refused Pod p: 5 image(s) not checked "
        "(container 'c1', 'c2', 'c3' and 2 more): queued; container 'c0': image x/i0:1 is missing"
    )
    warned = decide(review, {"x/i0:1": missing}, warn_only=True, errors_pass=True,
                    unchecked=unchecked)  # fmt: skip
    assert (warned.allowed, warned.outcome, warned.message) == (True, "warned", "")
    assert warned.warnings[0].startswith("5 image(s) not checked")


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' * 100_000], ids=["array", "object"])
def test_pruning_an_unclosed_deep_body_leaves_invalid_json_not_the_whole_body(text: str) -> None:
    """Never closed: the pruned text ends at the cut (a ValueError, answered 400), instead of
    the whole body kept again behind it (a RecursionError, answered 500)."""
    with pytest.raises(ValueError):
        load_json_pruned(text.encode())
