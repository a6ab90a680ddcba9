"""``imagecheck reap``'s pass (``cluster/reap_pass.py``) against the in-memory cluster and a
faked registry: what is written (the exact patch, events), what is left alone, and why."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import respx

from imagecheck.client import ClientOptions, ImageChecker
from imagecheck.cluster.model import JOB, POD, SECRET, Forbidden, Kind, Selector
from imagecheck.cluster.reap import REAPED, Action, Outcome
from imagecheck.cluster.reap_pass import Reaper, ReapOptions
from imagecheck.credentials import Keychain
from imagecheck.pullsecrets import PullSecretKeychain
from imagecheck.result import Status
from tests.support.fakecluster import FakeCluster

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC).timestamp()
REGISTRY = "https://registry.test"
MISSING = "registry.test/team/train:1.0.1"
FOUND = "registry.test/team/train:1.0.0"
DENIED = "registry.test/team/secret:1.0"
FLAKY = "registry.test/team/flaky:1.0"
PRIVATE = "registry.test/team/private:1.0"
DIGEST = "sha256:" + "a" * 64


def stamp(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    image: str = MISSING,
    *,
    owner: tuple[str, str, str] | None = ("Job", "train-1", "uid-train-1"),
    reason: str = "ImagePullBackOff",
    stuck_for: float = 600,
    init: bool = False,
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if owner:
        kind, owner_name, uid = owner
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": kind, "name": owner_name, "uid": uid, "controller": True}
        ]
    lists = (
        ("initContainers", "initContainerStatuses") if init else ("containers", "containerStatuses")
    )
    waiting = {"reason": reason, "message": f'Back-off pulling image "{image}"'}
    return {
        "metadata": meta,
        "spec": {
            lists[0]: [{"name": "train", "image": image}],
            **({"containers": [{"name": "main", "image": FOUND}]} if init else {}),
            "imagePullSecrets": [{"name": s} for s in secrets],
        },
        "status": {
            "phase": "Pending",
            "startTime": stamp(stuck_for),
            lists[1]: [{"name": "train", "image": image, "state": {"waiting": waiting}}],
        },
    }


def job(
    name: str = "train-1", *, age: float = 700, cron: str | None = "nightly", **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if cron:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": cron,
                "uid": "c",
                "controller": True,
            }
        ]
    meta.update(extra.pop("metadata", {}))
    body = {"metadata": meta, "spec": {"backoffLimit": 0, **extra.pop("spec", {})}}
    body["status"] = {"startTime": stamp(age), "active": 1, **extra.pop("status", {})}
    return body


def registry(router: respx.Router) -> respx.Router:
    router.get(f"{REGISTRY}/v2/").respond(200)
    manifests = f"{REGISTRY}/v2/team"
    router.head(f"{manifests}/train/manifests/1.0.1").respond(404)
    router.head(f"{manifests}/train/manifests/1.0.0").respond(
        200,
        headers={
            "Docker-Content-Digest": DIGEST,
            "Content-Type": "application/vnd.oci.image.manifest.v1+json",
        },
    )
    router.head(f"{manifests}/secret/manifests/1.0").respond(403)
    router.head(f"{manifests}/flaky/manifests/1.0").respond(503)

    def private(request: httpx.Request) -> httpx.Response:
        # Anonymous: 401, as a private repository answers; with credentials: it is missing.
        if "Authorization" in request.headers:
            return httpx.Response(404)
        return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="registry.test"'})

    router.head(f"{manifests}/private/manifests/1.0").mock(side_effect=private)
    return router


@dataclass
class Setup:
    cluster: FakeCluster = field(default_factory=FakeCluster)
    router: respx.Router = field(default_factory=lambda: registry(respx.Router()))

    def run(self, **options: Any) -> list[Outcome]:
        async def main() -> list[Outcome]:
            async with ImageChecker(
                ClientOptions(retries=0), transport=httpx.MockTransport(self.router.async_handler)
            ) as checker:
                reaper = Reaper(
                    self.cluster,
                    checker,
                    ReapOptions(**options),
                    keychain_for=_keychain,
                    clock=lambda: NOW,
                )
                return await reaper.run_once()

        return asyncio.run(main())

    def manifest_requests(self) -> list[str]:
        return [
            c.request.url.path for c in self.router.calls if "/manifests/" in c.request.url.path
        ]


def _keychain(texts: Sequence[tuple[str, str]]) -> Keychain:
    return PullSecretKeychain.from_paths([], texts)


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
    [outcome] = setup.run(grace=120)
    assert outcome.action is Action.SKIPPED
    assert outcome.why == "stuck for 30s, within --grace 120s"
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


class ChangingCluster(FakeCluster):
    """Changes the Job (another writer) just before each of the first ``changes`` patches."""

    changes: int = 1
    then: Mapping[str, Any] = {"metadata": {"labels": {"touched": "yes"}}}

    async def patch(self, kind: Kind, namespace: str, name: str, patch: Mapping[str, Any]) -> Any:
        if self.changes > 0:
            self.changes -= 1
            from tests.support.fakecluster import merge_patch  # noqa: PLC0415

            key = (kind.plural, namespace, name)
            self.objects[key] = merge_patch(self.objects[key], self.then)
            self._bump(self.objects[key])
        return await super().patch(kind, namespace, name, patch)


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
        ("create", "events", "needs RBAC verb 'create' on resource 'events' (apiGroups: [\"\"])"),
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


def _secret(user: str) -> dict[str, Any]:
    auth = base64.b64encode(f"{user}:pw".encode()).decode()
    config = json.dumps({"auths": {"registry.test": {"auth": auth}}})
    return {
        "metadata": {"name": "regcred", "namespace": "ml"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
    }


def test_the_pods_pull_secrets_are_used(setup: Setup) -> None:
    setup.cluster.add(SECRET, _secret("robot"))
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
    setup.cluster.add(SECRET, _secret("robot"))
    setup.cluster.add(JOB, job())
    setup.cluster.add(POD, pod("train-1-abcde", PRIVATE, secrets=["regcred"]))
    with caplog.at_level(logging.WARNING, logger="imagecheck"):
        [outcome] = setup.run()
    assert (outcome.action, outcome.verdict) == (Action.SKIPPED, Status.DENIED)
    assert "needs RBAC verb 'get' on resource 'secrets'" in caplog.text
    assert "checking without pull secrets (local config, anonymous)" in caplog.text
    assert setup.cluster.writes == []


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
