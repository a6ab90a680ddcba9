"""``cluster/gate.py``: what the verdicts on a gated pod's images decide, and the JSON patch
that lifts the gate (applied here as the API applies it)."""

from __future__ import annotations

from typing import Any

import pytest

from imagecheck.cluster._fields import Malformed, parse_time
from imagecheck.cluster._gate import (
    Action,
    GateOptions,
    decide,
    gated_pod,
    release_ops,
)
from imagecheck.cluster._model import GATE
from imagecheck.result import CheckResult, Status
from tests.support import jsonpatch

CREATED = "2026-12-03T09:00:00Z"
T0 = parse_time(CREATED)


def pod(gates: list[str], *, job: bool = True, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train-x", "namespace": "ci", "uid": "u1",
                            "creationTimestamp": CREATED}  # fmt: skip
    if job:
        meta["ownerReferences"] = [
            {"kind": "Job", "name": "train", "uid": "j1", "controller": True}
        ]
    return {
        "metadata": meta,
        "spec": {
            "schedulingGates": [{"name": g} for g in gates],
            "initContainers": [{"name": "init", "image": "r.example/init:1"}],
            "containers": [
                {"name": "a", "image": "r.example/app:1"},
                {"name": "b", "image": "r.example/app:1"},
            ],
            "ephemeralContainers": [{"name": "dbg", "image": "r.example/debug:1"}],
            **spec,
        },
    }


def result(status: Status, image: str = "r.example/app:1") -> CheckResult:
    return CheckResult(image, None, status, "manifest unknown" if status is Status.MISSING else "")


FOUND, MISSING = result(Status.FOUND), result(Status.MISSING)
DENIED, INVALID = result(Status.DENIED), result(Status.INVALID)


@pytest.mark.parametrize(
    ("results", "age", "job", "on_error", "action"),
    [
        ([FOUND], 1, True, "pass", Action.RELEASED),
        ([FOUND, MISSING], 10, True, "pass", Action.KEPT),  # within --wait: a push in flight
        ([FOUND, MISSING], 200, True, "pass", Action.FAILED_JOB),
        ([MISSING], 200, False, "pass", Action.KEPT),  # a Deployment's: kept until it appears
        ([INVALID], 1, True, "pass", Action.FAILED_JOB),  # no wait mends a bad name
        ([DENIED], 1, True, "pass", Action.RELEASED_ON_ERROR),
        ([DENIED], 1, True, "fail", Action.KEPT),
        ([MISSING, DENIED], 1, True, "pass", Action.KEPT),  # missing weighs more than denied
        ([MISSING], 1000, True, "pass", Action.RELEASED_MAX_AGE),  # the valve, whatever
        ([], 1000, False, "fail", Action.RELEASED_MAX_AGE),
    ],
    ids=["found", "missing-waiting", "missing-job", "missing-deployment", "invalid",
         "denied-pass", "denied-fail", "missing-and-denied", "max-age", "max-age-unasked"],
)  # fmt: skip
def test_decide(
    results: list[CheckResult], age: float, job: bool, on_error: Any, action: Action
) -> None:
    gated = gated_pod(pod([GATE], job=job))
    assert gated is not None
    options = GateOptions(wait=120, on_error=on_error, max_gate_age=900)
    assert decide(gated, results, T0 + age, options).action is action


def test_a_gated_pod_keeps_the_images_the_kubelet_pulls_once_each() -> None:
    gated = gated_pod(pod(["other", GATE], imagePullSecrets=[{"name": "regcred"}]))
    assert gated is not None
    assert gated.images == ("r.example/init:1", "r.example/app:1")
    assert (gated.job, gated.pull_secrets, gated.since) == ("train", ("regcred",), T0)


@pytest.mark.parametrize(
    "obj",
    [pod(["other"]), {**pod([GATE]), "metadata": {**pod([GATE])["metadata"],
                                                  "deletionTimestamp": CREATED}}],
    ids=["not-ours", "being-deleted"],
)  # fmt: skip
def test_not_gated(obj: dict[str, Any]) -> None:
    assert gated_pod(obj) is None


def test_malformed_gates() -> None:
    with pytest.raises(Malformed):
        gated_pod(pod([]) | {"spec": {"schedulingGates": "x"}})


def test_the_patch_removes_only_our_gate_and_keeps_the_others_in_order() -> None:
    obj = pod(["a", GATE, "b"])
    ops = release_ops(obj)
    assert ops is not None
    patched = jsonpatch.apply_patch(obj, ops)
    assert patched["spec"]["schedulingGates"] == [{"name": "a"}, {"name": "b"}]
    # Gate "a" lifted meanwhile: ours moved, the test fails rather than remove "b".
    moved = pod([GATE, "b"])
    with pytest.raises(jsonpatch.PatchError):
        jsonpatch.apply_patch(moved, ops)
    # The same name, another pod (recreated): the uid test fails.
    other = pod(["a", GATE, "b"])
    other["metadata"]["uid"] = "u2"
    with pytest.raises(jsonpatch.PatchError):
        jsonpatch.apply_patch(other, ops)
    assert release_ops(pod(["a"])) is None
