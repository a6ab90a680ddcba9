"""``imagecheck reap``'s pass: what it leaves alone and why (grace, owners, finished or reaped
Jobs), conflicts, RBAC refusals, malformed objects, bounded memory."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from imagecheck.cluster import Selector
from imagecheck.cluster._fields import Malformed
from imagecheck.cluster._jobs import REAPED
from imagecheck.cluster._model import JOB, POD, Forbidden, Kind
from imagecheck.cluster._reap import Action, stuck_pod
from tests.support.fakecluster import FakeCluster
from tests.support.reapcase import (
    Setup,
    job,
    pod,
    stamp,
)


@pytest.fixture
def setup(small_trust_store: None) -> Setup:
    return Setup()


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        pytest.param(
            {"metadata": {"annotations": {REAPED: "missing x"}}},
            "Job reaped already (missing x)",
            id="reaped",
        ),
        pytest.param(
            {"status": {"conditions": [{"type": "Complete", "status": "True"}]}},
            "Job finished already (Complete)",
            id="complete",
        ),
        pytest.param(
            {"status": {"conditions": [{"type": "Failed", "status": "True"}]}},
            "Job finished already (Failed)",
            id="failed",
        ),
        pytest.param(
            {"spec": {"activeDeadlineSeconds": 600}},
            "Job's activeDeadlineSeconds is already past (the controller is failing it)",
            id="deadline-past",
        ),
        pytest.param(
            {"spec": {"suspend": True}},
            "Job is suspended (the controller deletes its pods itself)",
            id="suspended",
        ),
        pytest.param(
            {"metadata": {"uid": "another"}},
            "its Job was replaced by another of the same name",
            id="replaced",
        ),
    ],
)
def test_jobs_left_alone(setup: Setup, changes: dict[str, Any], why: str) -> None:
    setup.cluster.add(JOB, job(**changes))
    setup.cluster.add(POD, pod("train-1-abcde"))
    [outcome] = setup.run()
    assert (outcome.action, outcome.why) == (Action.SKIPPED, why)
    assert setup.cluster.writes == []
    assert setup.manifest_requests() == []  # decided before the registry is asked


class ChangingCluster(FakeCluster):
    """Changes the Job (another writer) just before each of the first ``changes`` patches."""

    changes: int = 1
    then: Mapping[str, Any] = {"metadata": {"labels": {"touched": "yes"}}}

    async def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        status: bool = False,
    ) -> Any:
        if self.changes > 0:
            self.changes -= 1
            from tests.support.fakecluster import merge_patch  # noqa: PLC0415

            key = (kind.plural, namespace, name)
            self.objects[key] = merge_patch(self.objects[key], self.then)
            self._bump(self.objects[key])
        return await super().patch(kind, namespace, name, patch, status=status)


def test_conflict_reads_again_and_retries(small_trust_store: None) -> None:
    setup = Setup(cluster=ChangingCluster())
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    [outcome] = setup.run()
    assert outcome.action is Action.ACTED
    first, second = [w for w in setup.cluster.writes if w.verb == "patch"]
    assert first.body and second.body
    assert int(second.body["metadata"]["resourceVersion"]) > int(
        first.body["metadata"]["resourceVersion"]
    )
    assert setup.cluster.objects[("jobs", "ml", "train-1")]["metadata"]["labels"] == {
        "touched": "yes"
    }


def test_conflict_with_a_job_that_finished_meanwhile_is_skipped(small_trust_store: None) -> None:
    cluster = ChangingCluster()
    cluster.then = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    setup = Setup(cluster=cluster)
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    [outcome] = setup.run()
    assert (outcome.action, outcome.why) == (Action.SKIPPED, "Job finished already (Complete)")
    assert [w.verb for w in setup.cluster.writes] == ["patch"]  # refused, then nothing


def test_conflicts_without_end_give_up(small_trust_store: None) -> None:
    cluster = ChangingCluster()
    cluster.changes = 10
    setup = Setup(cluster=cluster)
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    [outcome] = setup.run()
    assert outcome.action is Action.SKIPPED
    assert outcome.why == "its Job changed 4 times while being patched"
    assert [w.verb for w in setup.cluster.writes] == ["patch"] * 4


@pytest.mark.parametrize(
    ("verb", "kind", "message"),
    [
        (
            "list",
            "pods",
            "needs RBAC verb 'list' on resource 'pods' (apiGroups: [\"\"]) cluster-wide",
        ),
        (
            "get",
            "jobs",
            "needs RBAC verb 'get' on resource 'jobs' (apiGroups: [batch]) in namespace 'ml'",
        ),
        ("patch", "jobs", "needs RBAC verb 'patch' on resource 'jobs' (apiGroups: [batch])"),
    ],
)
def test_forbidden_names_the_rbac_rule(setup: Setup, verb: str, kind: str, message: str) -> None:
    setup.cluster.forbidden.add((verb, kind))
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    with pytest.raises(
        Forbidden, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
    ):
        setup.run()


def test_malformed_pods_are_skipped_with_a_log_line(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.cluster.add(JOB, job())
    broken = pod("broken")
    broken["status"]["containerStatuses"] = "nope"
    setup.cluster.add(POD, broken)
    no_time = pod("no-time")
    no_time["status"]["startTime"] = 12
    setup.cluster.add(POD, no_time)
    setup.cluster.add(POD, pod("train-1-abcde"))
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        outcomes = setup.run()
    assert [o.pod.name for o in outcomes] == ["train-1-abcde"]
    with pytest.raises(Malformed, match="not an object"):
        stuck_pod(["not", "a", "pod"])  # type: ignore[arg-type]
    assert "skipping pod ml/broken: status.containerStatuses is not a list" in caplog.text
    assert "skipping pod ml/no-time: not a time: 12" in caplog.text


def test_healthy_and_finished_pods_are_not_kept(setup: Setup) -> None:
    running = pod("running")
    running["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": stamp(5)}}
    setup.cluster.add(POD, running)
    crashing = pod("crashing")
    crashing["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] = "CrashLoopBackOff"
    setup.cluster.add(POD, crashing)
    assert setup.run() == []


def test_stuck_pods_kept_are_bounded(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    for n in range(5):
        setup.cluster.add(POD, pod(f"p{n}", stuck_for=1))
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        outcomes = setup.run(max_stuck=2)
    assert len(outcomes) == 2
    assert "more than 2 stuck pods: the rest wait for the next pass" in caplog.text


def test_selector_limits_the_pods(setup: Setup) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    assert setup.run(selector=Selector(namespace="other")) == []


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        pytest.param(
            {"metadata": {"annotations": ["x"]}},
            "its Job is malformed: annotations is not an object",
            id="annotations",
        ),
        pytest.param(
            {"status": {"startTime": "yesterday"}},
            "its Job is malformed: not a time: yesterday",
            id="start-time",
        ),
    ],
)
def test_malformed_jobs_are_left_alone(setup: Setup, changes: dict[str, Any], why: str) -> None:
    setup.cluster.add(JOB, job(**changes))
    setup.cluster.add(POD, pod("train-1-abcde"))
    [outcome] = setup.run()
    assert (outcome.action, outcome.why) == (Action.SKIPPED, why)
    assert setup.cluster.writes == []
