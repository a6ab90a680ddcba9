"""``cluster/_kueue.py``: the check state for each set of registry answers, the Workloads it
acts on, the pod sets' images and secrets, and the status patches as Kueue writes them."""

from __future__ import annotations

import pytest

from imagecheck.cluster._kueue import (
    ACTIVE,
    OnError,
    State,
    active_patch,
    decide,
    open_checks,
    pod_sets,
    state_patch,
)
from imagecheck.result import CheckResult, Status
from tests.support.kubeapi import kueue

FOUND = CheckResult("r.example/a:1", None, Status.FOUND)
MISSING = CheckResult("r.example/b:1", None, Status.MISSING, "manifest unknown")
DENIED = CheckResult("r.example/c:1", None, Status.DENIED, "401")
ERROR = CheckResult("r.example/d:1", None, Status.ERROR, "connection refused")
INVALID = CheckResult("r.example/E:1", None, Status.INVALID, "uppercase")
NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("results", "waited", "on_error", "state", "verdict"),
    [
        ([FOUND], 0, OnError.PASS, State.READY, Status.FOUND),
        ([], 0, OnError.PASS, State.READY, Status.FOUND),
        ([FOUND, MISSING], 10, OnError.PASS, State.RETRY, Status.MISSING),
        ([FOUND, MISSING], 600, OnError.PASS, State.REJECTED, Status.MISSING),
        ([INVALID], 0, OnError.PASS, State.REJECTED, Status.INVALID),
        ([MISSING, INVALID], 0, OnError.PASS, State.REJECTED, Status.INVALID),
        ([DENIED], 0, OnError.PASS, State.READY, Status.DENIED),
        ([ERROR], 9999, OnError.PASS, State.READY, Status.ERROR),
        ([DENIED], 10, OnError.FAIL, State.RETRY, Status.DENIED),
        ([ERROR], 600, OnError.FAIL, State.REJECTED, Status.ERROR),
        ([ERROR, MISSING], 10, OnError.PASS, State.RETRY, Status.MISSING),
    ],
    ids=[
        "found",
        "no-images",
        "missing-within-wait",
        "missing-after-wait",
        "invalid-at-once",
        "invalid-beats-missing",
        "denied-passed",
        "error-passed",
        "denied-failed-within-wait",
        "error-failed-after-wait",
        "missing-beats-passed-error",
    ],
)
def test_decide(
    results: list[CheckResult], waited: float, on_error: OnError, state: State, verdict: Status
) -> None:
    decision = decide(results, waited, 600, on_error)
    assert (decision.state, decision.verdict) == (state, verdict)
    assert len(decision.message) <= 1100
    for result in results:
        if result.status is verdict is not Status.FOUND:
            assert result.image in decision.message


def test_a_message_names_a_few_images_and_counts_the_rest() -> None:
    many = [CheckResult(f"r.example/x{i}:1", None, Status.MISSING, "x" * 500) for i in range(40)]
    message = decide(many, 0, 600, OnError.PASS).message
    assert "and 35 more" in message
    assert len(message) <= 1024 + 3


def test_open_checks_are_ours_pending_or_retry_on_an_active_workload() -> None:
    wl = kueue.workload(
        "w",
        "ns",
        ["a"],
        [
            kueue.check_state("ours"),
            kueue.check_state("ours2", "Retry"),
            kueue.check_state("done", "Ready"),
            kueue.check_state("theirs"),
        ],
    )
    assert sorted(open_checks(wl, {"ours", "ours2", "done"})) == ["ours", "ours2"]
    wl["spec"]["active"] = False
    assert open_checks(wl, {"ours"}) == {}


def test_pod_sets_walk_every_template_with_its_secrets_or_service_account() -> None:
    wl = kueue.workload("w", "ns", ["a:1", "b:1", "a:1"], extra_pod_sets={"workers": ["c:1"]})
    main_spec = wl["spec"]["podSets"][0]["template"]["spec"]
    main_spec["initContainers"] = [{"name": "i", "image": "i:1"}]
    wl["spec"]["podSets"][1]["template"]["spec"]["imagePullSecrets"] = [{"name": "pull"}]
    main, workers = pod_sets(wl)
    assert (main.name, main.images, main.pull_secrets) == ("main", ("a:1", "b:1", "i:1"), ())
    assert main.service_account == "default"
    assert (workers.images, workers.pull_secrets, workers.service_account) == (
        ("c:1",),
        ("pull",),
        None,
    )


def test_state_patch_keeps_other_entries_and_moves_the_time_on_a_change_only() -> None:
    wl = kueue.workload(
        "w", "ns", ["a"], [kueue.check_state("theirs", "Ready"), kueue.check_state("ours")]
    )
    wl["metadata"]["resourceVersion"] = "7"
    patch = state_patch(wl, "ours", State.RETRY, "not found yet", NOW)
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "7"}
    theirs, ours = patch["status"]["admissionChecks"]
    assert theirs == kueue.check_state("theirs", "Ready")
    assert ours == kueue.check_state("ours", "Retry", "2027-01-15T08:00:00Z", "not found yet")
    wl["status"]["admissionChecks"] = patch["status"]["admissionChecks"]
    same = state_patch(wl, "ours", State.RETRY, "not found yet", NOW + 60)
    assert same is None  # nothing to write
    again = state_patch(wl, "ours", State.RETRY, "still not found", NOW + 60)
    assert again is not None
    assert again["status"]["admissionChecks"][1]["lastTransitionTime"] == "2027-01-15T08:00:00Z"
    assert state_patch(wl, "gone", State.READY, "x", NOW) is None  # not ours to add


def test_active_patch_sets_the_condition_once() -> None:
    check = kueue.admission_check("images")
    check["metadata"].update(generation=2, resourceVersion="5")
    check["status"] = {"conditions": [{"type": "Other", "status": "True"}]}
    patch = active_patch(check, NOW)
    assert patch is not None
    other, active = patch["status"]["conditions"]
    assert other == {"type": "Other", "status": "True"}
    assert (active["type"], active["status"], active["observedGeneration"]) == (ACTIVE, "True", 2)
    check["status"] = patch["status"]
    assert active_patch(check, NOW + 5) is None
    check["metadata"]["generation"] = 3
    moved = active_patch(check, NOW + 5)
    assert moved is not None  # a new generation observed; the time stays, still True
    assert moved["status"]["conditions"][1]["lastTransitionTime"] == active["lastTransitionTime"]


def test_metrics_count_written_states_on_the_shared_server() -> None:
    import asyncio  # noqa: PLC0415

    import httpx  # noqa: PLC0415

    from imagecheck.cluster._kueue_loop import KueueMetrics  # noqa: PLC0415
    from imagecheck.cluster._kueue_pass import Outcome  # noqa: PLC0415
    from imagecheck.cluster._reap_metrics import serve  # noqa: PLC0415

    clock = [0.0]
    metrics = KueueMetrics(stale_after=10, monotonic=lambda: clock[0])
    for written in (True, False):
        metrics.outcome(Outcome("ns", "w", "c", "Pending", "Retry", "x", Status.MISSING, written))
    metrics.passed()

    async def main() -> tuple[str, int, int]:
        runner = await serve(metrics, "127.0.0.1", 0)
        port = runner.addresses[0][1]
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                page = (await client.get("/metrics")).text
                healthy = (await client.get("/healthz")).status_code
                clock[0] = 11.0
                stale = (await client.get("/healthz")).status_code
        finally:
            await runner.cleanup()
        return page, healthy, stale

    page, healthy, stale = asyncio.run(main())
    assert 'imagecheck_kueue_states_set_total{state="Retry",verdict="missing"} 1.0' in page
    assert "imagecheck_kueue_passes_total 1.0" in page
    assert (healthy, stale) == (200, 503)
