"""One pass of ``imagecheck reap`` over a :class:`~imagecheck.cluster._model.Cluster`: list the
pods, keep the stuck ones (``reap.py``), ask the registry about their distinct images together
(each once, at most the checker's concurrency at a time), and fail the Jobs whose image is
confirmed missing.

Memory is bounded whatever the cluster's size: pods stream from the list and only the stuck
ones are kept, as a few strings each, at most ``max_stuck`` of them a pass (the rest wait for
the next). Registry answers are kept for the pass only.

Safety, in the order it is applied: the pod must have been stuck for ``grace``; it must be a
Job's (a bare pod only with ``include_pods``; any other owner is never touched); the Job must
not be finished, suspended, reaped or past its deadline already; the registry's verdict must be
one of ``act_on`` (missing and invalid by default: *denied* and *error* may be the node's
credentials or an outage, which a Job should outlive).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from imagecheck.cluster._fields import Malformed, Owner, controller, now, object_name
from imagecheck.cluster._images import (
    ImagePass,
    VerdictKey,
    Verdicts,
    check_each,
    reason_text,
    verdict_key,
)
from imagecheck.cluster._jobs import fail_job, job_skip_reason
from imagecheck.cluster._model import (
    JOB,
    JSON,
    POD,
    Cluster,
    Selector,
)
from imagecheck.cluster._reap import DEFAULT_ACT_ON, Action, Outcome, StuckPod, stuck_pod
from imagecheck.cluster._reap_events import NO_EVENT_JOB, NO_EVENT_POD, Recorder, pod_ref
from imagecheck.cluster._secrets import KeychainFor
from imagecheck.registry import ImageChecker
from imagecheck.result import CheckResult, Status

log = logging.getLogger("imagecheck")

MAX_STUCK = 10_000


@dataclass(frozen=True)
class ReapOptions:
    """What one pass may do (the command's options)."""

    grace: float = 120.0
    act_on: frozenset[Status] = DEFAULT_ACT_ON
    dry_run: bool = False
    include_pods: bool = False
    selector: Selector = field(default_factory=Selector)
    deadline: float = 60.0  # seconds for one image's check, retries included
    max_stuck: int = MAX_STUCK


class Reaper(ImagePass[ReapOptions]):
    """Runs passes; one instance per process (it remembers what RBAC refused)."""

    def __init__(
        self,
        cluster: Cluster,
        checker: ImageChecker,
        options: ReapOptions,
        *,
        keychain_for: KeychainFor | None = None,
        clock: Callable[[], float] = now,
    ) -> None:
        super().__init__(cluster, checker, options, keychain_for=keychain_for, clock=clock)
        self.events = Recorder(cluster, clock)

    async def run_once(self) -> list[Outcome]:
        """One pass: an outcome per stuck pod found. Raises
        :class:`~imagecheck.cluster._model.ClusterError` when the API refuses or fails."""
        return await self.act(await self.stuck_pods())

    async def stuck_pods(self) -> list[StuckPod]:
        stuck: list[StuckPod] = []
        async for pod in self.cluster.list(POD, self.options.selector):
            found = kept_stuck(pod)
            if found is None:
                continue
            if len(stuck) >= self.options.max_stuck:
                log.warning("more than %d stuck pods: the rest wait for the next pass", len(stuck))
                break
            stuck.append(found)
        return stuck

    async def act(self, pods: Sequence[StuckPod]) -> list[Outcome]:
        """An outcome per pod, in three steps: what is known without the registry (grace,
        owner, the Job's state) settles most; the registry is asked about the rest's distinct
        images together; then each of those is acted on (or, with ``dry_run``, only said)."""
        judged = [await self._judge(pod) for pod in pods]
        verdicts = await self._verdicts([j.pod for j in judged if isinstance(j, _Said)])
        return [j if isinstance(j, Outcome) else await self._finish(j, verdicts) for j in judged]

    async def _judge(self, pod: StuckPod) -> Outcome | _Said:
        """The outcome when it is known before the registry is asked; else what is known."""
        owner = pod.owner
        # The Job's name is the pod's ownerReference: known before, and without, reading it.
        is_job = owner is not None and owner.kind == "Job"
        said = _Said(pod, f"{pod.namespace}/{owner.name}" if is_job and owner else None)
        waited = self.clock() - pod.since
        if waited < self.options.grace:
            why = f"stuck for {waited:.0f}s, within --grace {self.options.grace:g}s"
            return said(Action.SKIPPED, why)
        if owner is None:
            if not self.options.include_pods:
                return said(Action.SKIPPED, "a bare pod: only with --include-pods")
            return said
        if not is_job:
            why = f"owned by {owner.kind} {owner.name}: reap acts on Jobs only"
            return said(Action.SKIPPED, why)
        return await self._judge_job(said, owner)

    async def _judge_job(self, said: _Said, owner: Owner) -> Outcome | _Said:
        """The pod's Job, read: left alone (why), or to be acted on if the registry agrees."""
        pod = said.pod
        said.job_obj = job = await self.cluster.get(JOB, pod.namespace, owner.name)
        if job is None:
            return said(Action.SKIPPED, "its Job is gone")
        try:
            cron = controller(job.get("metadata") or {})
            if cron is not None and cron.kind == "CronJob":
                said.cronjob = f"{pod.namespace}/{cron.name}"
            skip = job_skip_reason(job, owner, self.clock())
        except Malformed as exc:
            log.warning("skipping Job %s: %s", said.job, exc)
            return said(Action.SKIPPED, f"its Job is malformed: {exc}")
        return said(Action.SKIPPED, skip) if skip else said

    async def _verdicts(self, pods: Sequence[StuckPod]) -> Verdicts:
        """The registry's answers for ``pods``, each distinct image (and pull secrets) once."""
        verdicts: Verdicts = {}

        async def check(pod: StuckPod) -> None:
            await self._verdict(pod, verdicts)

        await check_each(self.checker, {_key(p): p for p in pods}.values(), check)
        return verdicts

    async def _finish(self, said: _Said, verdicts: Verdicts) -> Outcome:
        pod = said.pod
        result = await self._verdict(pod, verdicts)
        said.verdict = result.status
        reason = reason_text(result.status, pod.image, result.message)
        if result.status not in self.options.act_on:
            return said(Action.SKIPPED, f"{reason}: not acted on")
        if said.job is None:
            return await self._delete_bare_pod(said, reason)
        if self.options.dry_run:
            return said(Action.WOULD_ACT, f"fail the Job: {reason}")
        assert said.job_obj is not None
        failed = await self._fail_job(said.job_obj, pod, reason)
        if isinstance(failed, str):
            return said(Action.SKIPPED, failed)
        recorded = await self.events.job_failed(failed, pod, reason)
        return said(Action.ACTED, f"failed the Job: {reason}" + ("" if recorded else NO_EVENT_JOB))

    async def _delete_bare_pod(self, said: _Said, reason: str) -> Outcome:
        pod = said.pod
        if self.options.dry_run:
            return said(Action.WOULD_ACT, f"delete the pod: {reason}")
        recorded = await self.events.event(POD, pod_ref(pod), reason)
        await self.cluster.delete(POD, pod.namespace, pod.name)
        log.info("deleted pod %s: %s", pod.path, reason)
        return said(Action.ACTED, f"deleted the pod: {reason}" + ("" if recorded else NO_EVENT_POD))

    async def _fail_job(self, job: JSON, pod: StuckPod, reason: str) -> JSON | str:
        assert pod.owner is not None
        return await fail_job(self.cluster, job, pod.namespace, pod.owner, reason, self.clock)

    async def _verdict(self, pod: StuckPod, verdicts: Verdicts) -> CheckResult:
        """The registry's answer for the pod's image, once per image (and pull secrets) a
        pass. InvalidImageName is the kubelet's own verdict: its parser refused the name,
        no registry was asked, and no wait mends it."""
        if pod.reason == "InvalidImageName":
            message = "the kubelet cannot parse it (InvalidImageName)"
            return CheckResult(pod.image, None, Status.INVALID, message)
        key = _key(pod)
        if key not in verdicts:
            keychain = await self.keychains(pod)
            verdicts[key] = await self.check(pod.image, keychain)
        return verdicts[key]


def kept_stuck(pod: JSON) -> StuckPod | None:
    """The pod as reap keeps it when it is stuck and not being deleted; None otherwise, and
    for a malformed one (with a log line)."""
    try:
        found = stuck_pod(pod)
    except Malformed as exc:
        log.warning("skipping pod %s: %s", object_name(pod), exc)
        return None
    if found is None or pod["metadata"].get("deletionTimestamp"):
        return None
    return found


@dataclass
class _Said:
    """The parts of a pod's outcome known so far (``job`` None: a bare pod)."""

    pod: StuckPod
    job: str | None
    cronjob: str | None = None
    verdict: Status | None = None
    job_obj: JSON | None = field(default=None, repr=False)

    def __call__(self, action: Action, why: str) -> Outcome:
        return Outcome(self.pod, action, why, self.verdict, self.job, self.cronjob)


def _key(pod: StuckPod) -> VerdictKey:
    return verdict_key(pod.image, pod.namespace, pod.pull_secrets)
