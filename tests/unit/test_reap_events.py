"""``imagecheck reap``'s Events (``cluster/reap_events.py``): the action stands when its Event
cannot be written (RBAC, an outage); a warning says so once a namespace, the outcome names the
annotation as the record, and the loop counts the error in its api_errors metric."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from imagecheck.cluster import Reaper, ReapLoop, ReapMetrics, ReapOptions
from imagecheck.cluster._jobs import REAPED
from imagecheck.cluster._model import JOB, JSON, POD, Kind, Unreachable
from imagecheck.cluster._reap import Action
from imagecheck.registry import ClientOptions, ImageChecker
from tests.support.fakecluster import FakeCluster, Write
from tests.support.reapcase import NOW, Setup, job, pod

RULE = "needs RBAC verb 'create' on resource 'events' (apiGroups: [\"\"]) in namespace 'ml'"
NOTE = f" (no Event written: the Job's {REAPED} annotation is the record)"


@pytest.fixture
def setup(small_trust_store: None) -> Setup:
    return Setup()


def two_stuck_jobs(cluster: FakeCluster) -> None:
    for name in ("a", "b"):
        cluster.add(JOB, job(name))
        cluster.add(POD, pod(f"{name}-pod", owner=("Job", name, f"uid-{name}")))


def test_events_forbidden_the_jobs_are_failed_and_one_warning_names_the_rule(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.cluster.forbidden.add(("create", "events"))
    two_stuck_jobs(setup.cluster)
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        outcomes = setup.run()
    assert [(o.pod.name, o.action) for o in outcomes] == [
        ("a-pod", Action.ACTED),
        ("b-pod", Action.ACTED),
    ]
    assert all(o.why.startswith("failed the Job: missing ") for o in outcomes)
    assert all(o.why.endswith(NOTE) for o in outcomes)
    # Refused once in the namespace, not asked again: both Jobs patched all the same.
    assert [(w.verb, w.kind, w.name) for w in setup.cluster.writes] == [
        ("patch", "jobs", "a"),
        ("create", "events", setup.cluster.writes[1].name),
        ("patch", "jobs", "b"),
    ]
    for name in ("a", "b"):
        annotations = setup.cluster.objects[("jobs", "ml", name)]["metadata"]["annotations"]
        assert annotations[REAPED].startswith("missing ")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"forbidden: {RULE}; no Events written there (the Job's {REAPED} annotation records it)"
    ]


def test_a_bare_pod_is_deleted_though_its_event_is_refused(setup: Setup) -> None:
    setup.cluster.forbidden.add(("create", "events"))
    setup.cluster.add(POD, pod("bare", owner=None))
    [outcome] = setup.run(include_pods=True)
    assert outcome.action is Action.ACTED
    assert outcome.why.endswith(" (no Event written)")
    assert [(w.verb, w.kind) for w in setup.cluster.writes] == [
        ("create", "events"),
        ("delete", "pods"),
    ]


class Outage(FakeCluster):
    """Events cannot be created: the API answers 5xx (or is not there) for them alone."""

    async def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> JSON:
        if kind.plural == "events":
            self.writes.append(Write("create", "events", namespace, body["metadata"]["name"], body))
            raise Unreachable("503 from the API server")
        return await super().create(kind, namespace, body)


def test_an_event_that_fails_is_a_warning_and_the_next_is_still_tried(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.cluster = Outage()
    two_stuck_jobs(setup.cluster)
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        outcomes = setup.run()
    assert [o.action for o in outcomes] == [Action.ACTED, Action.ACTED]
    assert all(o.why.endswith(NOTE) for o in outcomes)
    # Not a refusal: every Event is tried (two a Job), none remembered as refused.
    verbs = [(w.verb, w.kind) for w in setup.cluster.writes]
    assert verbs == [("patch", "jobs"), *[("create", "events")] * 2] * 2
    assert "Event on Job ml/a not written: 503 from the API server" in caplog.text
    assert "Event on Pod ml/b-pod not written: 503 from the API server" in caplog.text


def test_the_loop_counts_a_refused_event_in_api_errors(setup: Setup) -> None:
    setup.cluster.forbidden.add(("create", "events"))
    two_stuck_jobs(setup.cluster)
    metrics = ReapMetrics(stale_after=60)
    outcomes: list[Any] = []

    async def main() -> None:
        transport = httpx.MockTransport(setup.router.async_handler)
        async with ImageChecker(ClientOptions(retries=0), transport=transport) as checker:
            reaper = Reaper(setup.cluster, checker, ReapOptions(), clock=lambda: NOW)
            await ReapLoop(reaper, 0.05, outcomes.append, hooks=metrics).relist()

    asyncio.run(main())
    assert [o.action for o in outcomes] == [Action.ACTED, Action.ACTED]
    errors = metrics.registry.get_sample_value(
        "imagecheck_reap_api_errors_total", {"error": "forbidden"}
    )
    assert errors == 1  # asked once in the namespace, refused once
    failed = metrics.registry.get_sample_value(
        "imagecheck_reap_jobs_failed_total", {"kind": "job", "verdict": "missing"}
    )
    assert failed == 2
