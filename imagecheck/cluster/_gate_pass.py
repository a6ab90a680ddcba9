"""One pass of ``imagecheck gate`` over gated pods: ask the registry about their distinct
images together (each once a pass, at most the checker's concurrency at a time), decide
(``gate.py``) and act: lift the gate, fail the Job, or keep the pod gated.

Writes, and how each stays safe when something else changes the pod or its Job meanwhile:

* lifting the gate is a JSON patch whose ``test`` ops pin the pod's uid and the gate's place
  (``gate.release_ops``); one that fails its test reads the pod again and decides again;
* failing a Job is reap's patch (``reap_pass.fail_job``): ``activeDeadlineSeconds`` set to
  the Job's age, guarded by its resourceVersion, with the reason in ``imagecheck.io/reaped``.
  The Job controller deletes the gated pod: it never ran, and no node reserved anything;
* Events (``reap_events.Recorder``, component ``imagecheck-gate``) record each; one that
  cannot be written is a warning, never the end of the pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from imagecheck._expiring import MISS, Expiring
from imagecheck.cluster._fields import Malformed, now, object_name
from imagecheck.cluster._gate import (
    COMPONENT,
    Action,
    Decision,
    GatedPod,
    GateOptions,
    GateOutcome,
    decide,
    gated_pod,
    release_ops,
    results_for,
)
from imagecheck.cluster._images import ImagePass, VerdictKey, Verdicts, check_each, verdict_key
from imagecheck.cluster._jobs import MAX_CONFLICT_RETRIES, fail_job, job_skip_reason
from imagecheck.cluster._model import JOB, POD, Cluster, ClusterError, Conflict
from imagecheck.cluster._reap_events import Recorder
from imagecheck.cluster._secrets import KeychainFor
from imagecheck.registry import ImageChecker
from imagecheck.result import CheckResult, Status

log = logging.getLogger("imagecheck")

# A found image is taken as found for this long: the pods of one rollout, or a burst, are
# released on one registry request. (A missing image is asked again each time: it may land.)
FOUND_TTL = 30.0
MAX_FOUND = 4096
# Pods acted on at once: each is a few API calls (a read, the patch, an Event).
API_CONCURRENCY = 16
RELEASE_REASONS = {
    Action.RELEASED: "ImagesFound",
    Action.RELEASED_ON_ERROR: "ImageCheckFailed",
    Action.RELEASED_MAX_AGE: "GateExpired",
}


class Gatekeeper(ImagePass[GateOptions]):
    """Runs passes; one instance per process (it remembers what RBAC refused, and which
    pods were told they are kept, so a re-check does not write the same Event again)."""

    def __init__(
        self,
        cluster: Cluster,
        checker: ImageChecker,
        options: GateOptions,
        *,
        keychain_for: KeychainFor | None = None,
        clock: Callable[[], float] = now,
    ) -> None:
        super().__init__(cluster, checker, options, keychain_for=keychain_for, clock=clock)
        self.events = Recorder(cluster, clock, component=COMPONENT)
        self.told: dict[str, str] = {}  # uid -> the kept reason last written as an Event
        # Images found lately, by (image, pull secrets): the pods of one rollout or burst cost
        # one registry request, not one each.
        self.found: Expiring[VerdictKey, CheckResult] = Expiring(MAX_FOUND)
        # Told when (monotonic) the patch that lifted a pod's gate was sent (the loop logs it).
        self.lifted: Callable[[GatedPod, float], None] = lambda pod, sent: None

    async def run_once(self) -> list[GateOutcome]:
        """One pass over the gated pods the selector picks."""
        return await self.act(await self.gated_pods())

    async def gated_pods(self) -> list[GatedPod]:
        found: list[GatedPod] = []
        async for pod in self.cluster.list(POD, self.options.selector):
            gated = self.kept(pod)
            if gated is None:
                continue
            if len(found) >= self.options.max_tracked:
                log.warning("more than %d gated pods: the rest wait for the next pass", len(found))
                break
            found.append(gated)
        return found

    def kept(self, pod: object) -> GatedPod | None:
        """The pod as gate keeps it, when it is gated in a namespace of the options'."""
        gated = kept_gated(pod)
        wanted = self.options.namespaces
        return None if gated is None or (wanted and gated.namespace not in wanted) else gated

    async def act(self, pods: Sequence[GatedPod]) -> list[GateOutcome]:
        """An outcome per pod: the registry asked about the distinct images of the pods that
        need it, then each pod decided and acted on (with ``dry_run``, only said)."""
        now_ = self.clock()
        asking = [p for p in pods if now_ - p.since < self.options.max_gate_age]
        verdicts = await self._verdicts(asking)
        acting = asyncio.Semaphore(API_CONCURRENCY)

        async def outcome(pod: GatedPod) -> GateOutcome:
            results = results_for(pod, {i: verdicts[_key(pod, i)] for i in pod.images
                                        if _key(pod, i) in verdicts})  # fmt: skip
            decision = decide(pod, results, self.clock(), self.options)
            async with acting:
                return await self._apply(pod, decision)

        # Pods are acted on side by side (their own API calls, a few at a time): a burst of
        # pods released together waits for a few round trips to the API, not for all of them.
        return list(await asyncio.gather(*(outcome(pod) for pod in pods)))

    async def _apply(self, pod: GatedPod, decision: Decision) -> GateOutcome:
        def said(why: str = decision.why, *, done: bool = True) -> GateOutcome:
            return GateOutcome(pod, decision.action, why, decision.verdict, decision.image,
                               self.options.dry_run, done)  # fmt: skip

        if self.options.dry_run:
            return said()
        try:
            if decision.action.releases:
                return said(await self._release(pod, decision))
            if decision.action is Action.FAILED_JOB:
                failed = await self._fail_job(pod, decision)
                if failed is not None:  # left alone: kept gated, said why
                    return GateOutcome(pod, Action.KEPT, failed, decision.verdict, decision.image)
                return said()
            await self._tell_kept(pod, decision)
            return said()
        except _NotDone as exc:
            return said(f"{decision.why}; not done: {exc}", done=False)
        except ClusterError as exc:
            log.warning("gate: pod %s: %s", pod.path, exc)
            return said(f"{decision.why}; not done: {exc}", done=False)

    async def _release(self, pod: GatedPod, decision: Decision) -> str:
        """Lift the gate (read again and tried again when the pod changed meanwhile); an
        Event says why. What was done, for the outcome."""
        for _ in range(MAX_CONFLICT_RETRIES + 1):
            current = await self.cluster.get(POD, pod.namespace, pod.name)
            meta = (current or {}).get("metadata") or {}
            if current is None or (pod.uid and meta.get("uid") != pod.uid):
                raise _NotDone("the pod is gone")
            ops = release_ops(current)
            if ops is None:
                raise _NotDone("the gate was lifted by someone else")
            sent = time.monotonic()
            try:
                await self.cluster.json_patch(POD, pod.namespace, pod.name, ops)
                break
            except Conflict:
                continue
        else:
            raise _NotDone(f"the pod changed {MAX_CONFLICT_RETRIES + 1} times while patched")
        self.lifted(pod, sent)
        self.told.pop(pod.uid, None)
        log.info("gate: released pod %s: %s", pod.path, decision.why)
        reason = RELEASE_REASONS[decision.action]
        warning = decision.action is not Action.RELEASED
        await self.events.event(POD, _ref(pod), f"scheduling gate lifted: {decision.why}",
                                reason=reason, warning=warning)  # fmt: skip
        return decision.why

    async def _fail_job(self, pod: GatedPod, decision: Decision) -> str | None:
        """Fail the pod's Job with the reason; None when done, else why it was left alone."""
        assert pod.owner is not None
        job = await self.cluster.get(JOB, pod.namespace, pod.owner.name)
        if job is None:
            return "its Job is gone"
        try:
            skip = job_skip_reason(job, pod.owner, self.clock())
        except Malformed as exc:
            return f"its Job is malformed: {exc}"
        if skip:
            return skip
        failed = await fail_job(self.cluster, job, pod.namespace, pod.owner, decision.why,
                                self.clock)  # fmt: skip
        if isinstance(failed, str):
            return failed
        message = f"failed by imagecheck gate before any pod was scheduled: {decision.why}"
        await self.events.event(JOB, failed, message)
        await self.events.event(POD, _ref(pod), f"its Job {pod.owner.name} {message}")
        return None

    async def _tell_kept(self, pod: GatedPod, decision: Decision) -> None:
        """A Warning Event when a pod is kept gated for a reason it was not told yet."""
        if decision.verdict is None or self.told.get(pod.uid) == decision.why.split(":")[0]:
            return
        if len(self.told) >= self.options.max_tracked:
            self.told.clear()  # bounded: the worst case is one Event written again
        self.told[pod.uid] = decision.why.split(":")[0]
        await self.events.event(POD, _ref(pod), f"kept gated by imagecheck: {decision.why}")

    async def _verdicts(self, pods: Sequence[GatedPod]) -> Verdicts:
        """The registry's answers, each distinct image (and pull secrets) once."""
        verdicts: Verdicts = {}
        todo: dict[VerdictKey, tuple[GatedPod, str]] = {}
        for pod in pods:
            for image in pod.images:
                key = _key(pod, image)
                found = self.found.get(key)
                if found is not MISS:
                    verdicts[key] = found
                else:
                    todo[key] = (pod, image)

        async def check(item: tuple[VerdictKey, tuple[GatedPod, str]]) -> None:
            key, (pod, image) = item
            keychain = await self.keychains(pod)
            verdicts[key] = result = await self.check(image, keychain)
            if result.status is Status.FOUND:
                self.found.put(key, result, FOUND_TTL)

        await check_each(self.checker, todo.items(), check)
        return verdicts


class _NotDone(Exception):
    """A release that did not happen; tried again on the next pass, if still gated."""


def kept_gated(pod: object) -> GatedPod | None:
    """The pod as gate keeps it; None when it is not gated, and for a malformed one (with a
    log line)."""
    try:
        return gated_pod(pod)  # type: ignore[arg-type]
    except Malformed as exc:
        log.warning("skipping pod %s: %s", object_name(pod), exc)
        return None


def _key(pod: GatedPod, image: str) -> VerdictKey:
    return verdict_key(image, pod.namespace, pod.pull_secrets)


def _ref(pod: GatedPod) -> dict[str, object]:
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}}
