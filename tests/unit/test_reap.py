"""``imagecheck reap``'s pass (``cluster/reap_pass.py``) against the in-memory cluster and a
faked registry: what it writes (the exact patch, the events) and for which verdicts."""

from __future__ import annotations

import asyncio
import base64
import logging

import httpx
import pytest

from imagecheck.cluster._jobs import REAPED
from imagecheck.cluster._model import JOB, POD, SECRET
from imagecheck.cluster._reap import Action
from imagecheck.result import Status
from tests.support.reapcase import (
    DENIED,
    FLAKY,
    FOUND,
    MISSING,
    PRIVATE,
    REGISTRY,
    Setup,
    job,
    pod,
    secret,
)


@pytest.fixture
def setup(small_trust_store: None) -> Setup:
    return Setup()


def test_missing_image_fails_the_job_with_its_reason_recorded(setup: Setup) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    version = setup.cluster.objects[("jobs", "ml", "train-1")]["metadata"]["resourceVersion"]

    [outcome] = setup.run()

    assert outcome.action is Action.ACTED
    assert outcome.verdict is Status.MISSING
    assert (outcome.job, outcome.cronjob) == ("ml/train-1", "ml/nightly")
    reason = (
        f"missing {MISSING} (tag '1.0.1' not found in registry.test/team/train (manifest unknown))"
    )
    assert outcome.text() == (
        f"acted: pod ml/train-1-abcde (Job ml/train-1 of CronJob ml/nightly): "
        f"failed the Job: {reason}"
    )
    patch, job_event, pod_event = setup.cluster.writes
    assert (patch.verb, patch.kind, patch.name) == ("patch", "jobs", "train-1")
    assert patch.body == {
        "metadata": {"resourceVersion": version, "annotations": {REAPED: reason}},
        "spec": {"activeDeadlineSeconds": 700},  # the Job's age: the controller fails it now
    }
    for write, kind, name in ((job_event, "Job", "train-1"), (pod_event, "Pod", "train-1-abcde")):
        assert (write.verb, write.kind, write.namespace) == ("create", "events", "ml")
        body = write.body
        assert body is not None
        assert body["involvedObject"]["kind"] == kind
        assert body["involvedObject"]["name"] == name
        assert body["involvedObject"]["uid"] == f"uid-{name}"
        assert (body["reason"], body["type"]) == ("ImageMissing", "Warning")
        assert body["source"] == {"component": "imagecheck-reap"}
        assert body["metadata"]["name"].startswith(f"{name}.")
        assert reason in body["message"]


def test_dry_run_writes_nothing(setup: Setup) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    [outcome] = setup.run(dry_run=True)
    assert outcome.action is Action.WOULD_ACT
    assert outcome.text().startswith("would act: pod ml/train-1-abcde (Job ml/train-1 of CronJob")
    assert setup.cluster.writes == []


@pytest.mark.parametrize(
    ("image", "act_on", "action", "verdict"),
    [
        pytest.param(FOUND, None, Action.SKIPPED, Status.FOUND, id="found-node-problem"),
        pytest.param(DENIED, None, Action.SKIPPED, Status.DENIED, id="denied-kept"),
        pytest.param(FLAKY, None, Action.SKIPPED, Status.ERROR, id="outage-kept"),
        pytest.param(DENIED, {Status.DENIED}, Action.ACTED, Status.DENIED, id="denied-as-asked"),
        pytest.param(FLAKY, {Status.ERROR}, Action.ACTED, Status.ERROR, id="error-as-asked"),
        pytest.param(MISSING, {Status.DENIED}, Action.SKIPPED, Status.MISSING, id="narrowed"),
    ],
)
def test_only_the_verdicts_asked_for_are_acted_on(
    setup: Setup, image: str, act_on: set[Status] | None, action: Action, verdict: Status
) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde", image))
    options = {} if act_on is None else {"act_on": frozenset(act_on)}
    [outcome] = setup.run(**options)
    assert (outcome.action, outcome.verdict) == (action, verdict)
    assert bool(setup.cluster.writes) is (action is Action.ACTED)
    if action is Action.SKIPPED:
        assert outcome.why.endswith("not acted on")


def test_invalid_image_name_is_acted_on_without_asking_a_registry(setup: Setup) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(
        POD, pod("train-1-abcde", "Registry.test/Team:x:y", reason="InvalidImageName")
    )
    [outcome] = setup.run()
    assert (outcome.action, outcome.verdict) == (Action.ACTED, Status.INVALID)
    assert setup.router.calls.call_count == 0
    patch = setup.cluster.writes[0].body
    assert patch is not None
    assert patch["metadata"]["annotations"][REAPED].startswith("invalid Registry.test/Team:x:y (")


def test_init_container_waiting_is_found(setup: Setup) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde", init=True))
    [outcome] = setup.run()
    assert (outcome.action, outcome.pod.container, outcome.pod.image) == (
        Action.ACTED,
        "train",
        MISSING,
    )


def test_within_grace_nothing_is_asked_or_written(setup: Setup) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde", stuck_for=30))
    setup.cluster.forbidden.add(("get", "jobs"))  # reading the Job would end the pass
    [outcome] = setup.run(grace=120)
    assert outcome.action is Action.SKIPPED
    assert outcome.why == "stuck for 30s, within --grace 120s"
    # The Job's name from the pod's ownerReference, without reading the Job (nor its CronJob).
    assert (outcome.job, outcome.cronjob) == ("ml/train-1", None)
    assert outcome.text() == (
        "skipped: pod ml/train-1-abcde (Job ml/train-1): stuck for 30s, within --grace 120s"
    )
    assert setup.router.calls.call_count == 0
    assert setup.cluster.writes == []


def test_pods_not_owned_by_a_job_are_never_touched(setup: Setup) -> None:
    setup.cluster.add(POD, pod("web-1", owner=("ReplicaSet", "web-5d8f", "uid-rs")))
    setup.cluster.add(POD, pod("bare"))
    setup.cluster.objects[("pods", "ml", "bare")]["metadata"].pop("ownerReferences")
    web, bare = setup.run(include_pods=False)
    assert web.action is Action.SKIPPED
    assert web.why == "owned by ReplicaSet web-5d8f: reap acts on Jobs only"
    assert bare.why == "a bare pod: only with --include-pods"
    assert setup.cluster.writes == []


def test_bare_pod_is_deleted_with_include_pods(setup: Setup) -> None:
    setup.cluster.add(POD, pod("bare", owner=None))
    [outcome] = setup.run(include_pods=True)
    assert outcome.action is Action.ACTED
    event, delete = setup.cluster.writes
    assert (event.verb, event.kind) == ("create", "events")
    assert (delete.verb, delete.kind, delete.name) == ("delete", "pods", "bare")
    assert ("pods", "ml", "bare") not in setup.cluster.objects


def test_a_second_pass_does_nothing_more(setup: Setup) -> None:
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde"))
    setup.run()
    writes = len(setup.cluster.writes)
    [again] = setup.run()
    assert again.action is Action.SKIPPED
    assert again.why.startswith("Job reaped already (missing ")
    assert len(setup.cluster.writes) == writes


def test_each_distinct_image_is_checked_once_a_pass(setup: Setup) -> None:
    for n in (1, 2, 3):
        setup.cluster.add(JOB, job(f"train-{n}"))
        setup.cluster.add(POD, pod(f"train-{n}-x", owner=("Job", f"train-{n}", f"uid-train-{n}")))
    outcomes = setup.run()
    assert [o.action for o in outcomes] == [Action.ACTED] * 3
    assert setup.manifest_requests() == ["/v2/team/train/manifests/1.0.1"]


def test_the_pods_pull_secrets_are_used(setup: Setup) -> None:
    setup.cluster.add(SECRET, secret("robot"))
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde", PRIVATE, secrets=["regcred"]))
    [outcome] = setup.run()
    assert (outcome.action, outcome.verdict) == (Action.ACTED, Status.MISSING)
    sent = [c.request.headers.get("Authorization") for c in setup.router.calls]
    assert "Basic " + base64.b64encode(b"robot:pw").decode() in sent


def test_secrets_rbac_refused_checks_without_them(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.cluster.forbidden.add(("get", "secrets"))
    setup.cluster.add(SECRET, secret("robot"))
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde", PRIVATE, secrets=["regcred"]))
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        [outcome] = setup.run()
    assert (outcome.action, outcome.verdict) == (Action.SKIPPED, Status.DENIED)
    assert "needs RBAC verb 'get' on resource 'secrets'" in caplog.text
    assert "checking without pull secrets (local config, anonymous)" in caplog.text
    assert setup.cluster.writes == []


def test_an_absent_secret_is_silent_and_one_that_is_not_a_docker_config_is_named(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    opaque = {"metadata": {"name": "opaque", "namespace": "ml"}, "data": {"x": "eA=="}}
    setup.cluster.add(SECRET, opaque)
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde", PRIVATE, secrets=["absent", "opaque"]))
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        [outcome] = setup.run()
    assert (outcome.action, outcome.verdict) == (Action.SKIPPED, Status.DENIED)
    assert "absent" not in caplog.text  # a loop would repeat it for every pod of every pass
    assert "pull secret not used: secret ml/opaque holds neither" in caplog.text
    assert "eA==" not in caplog.text


def test_outcome_json_fields(setup: Setup) -> None:
    setup.cluster.add(JOB, job(cron=None))
    setup.cluster.add(POD, pod("train-1-abcde"))
    [outcome] = setup.run(dry_run=True)
    assert outcome.to_dict() == {
        "namespace": "ml",
        "pod": "train-1-abcde",
        "container": "train",
        "image": MISSING,
        "reason": "ImagePullBackOff",
        "job": "ml/train-1",
        "cronjob": None,
        "verdict": "missing",
        "action": "would act",
        "why": outcome.why,
    }
    assert outcome.text().startswith(
        "would act: pod ml/train-1-abcde (Job ml/train-1): fail the Job"
    )


def test_distinct_images_are_checked_together_each_once(setup: Setup) -> None:
    # Three stuck pods on two images: two checks, in flight at the same time.
    in_flight, most, asked = [0], [0], []

    async def slow_missing(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        await asyncio.sleep(0.05)
        in_flight[0] -= 1
        return httpx.Response(404)

    for tag in ("2.0", "3.0"):
        setup.router.head(f"{REGISTRY}/v2/team/train/manifests/{tag}").mock(
            side_effect=slow_missing
        )
    images = {"a": "2.0", "b": "3.0", "c": "3.0"}
    for name, tag in images.items():
        setup.cluster.add(JOB, job(f"j{name}"))
        owner = ("Job", f"j{name}", f"uid-j{name}")
        setup.cluster.add(POD, pod(name, f"registry.test/team/train:{tag}", owner=owner))
    outcomes = setup.run()
    assert [o.action for o in outcomes] == [Action.ACTED] * 3
    assert sorted(asked) == ["/v2/team/train/manifests/2.0", "/v2/team/train/manifests/3.0"]
    assert most[0] == 2
