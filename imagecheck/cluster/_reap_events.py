"""The record of what ``imagecheck reap`` did: Kubernetes Events (reason ``ImageMissing``) on a
failed Job and its pod, or on a deleted bare pod.

The action is done by the time its Events are written (the Job patched, the pod about to be
deleted) and stands whatever becomes of its record. So an Event that cannot be written is a
warning, never the end of the pass: a pass that stopped there would leave the Job failed and
unrecorded for good, since the Job's ``imagecheck.io/reaped`` annotation (written by the same
patch that fails it) makes every later pass skip it. That annotation is the durable record;
Events are for ``kubectl get events`` and expire (an hour, by default).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from imagecheck.cluster._jobs import REAPED
from imagecheck.cluster._model import (
    EVENT,
    JOB,
    JSON,
    POD,
    AlreadyExists,
    Cluster,
    ClusterError,
    Forbidden,
    Kind,
)
from imagecheck.cluster._reap import COMPONENT, EVENT_REASON, StuckPod, event

log = logging.getLogger("imagecheck")

# Said after an action whose Events were not written (RBAC, an outage): the action stands.
NO_EVENT_JOB = f" (no Event written: the Job's {REAPED} annotation is the record)"
NO_EVENT_POD = " (no Event written)"


class Recorder:
    """Writes reap's Events. One per process: a namespace where RBAC refused ``create`` on
    events is not asked again (one warning naming the rule, not one per Job).
    ``on_api_error`` hears each error shrugged off (the loop counts them)."""

    def __init__(
        self, cluster: Cluster, clock: Callable[[], float], component: str = COMPONENT
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.component = component
        self.refused: set[str] = set()
        self.on_api_error: Callable[[ClusterError], None] = _ignore

    async def job_failed(self, job: JSON, pod: StuckPod, reason: str) -> bool:
        """Events on the failed Job and on its pod; False when either was not written."""
        assert pod.owner is not None
        on_job = await self.event(JOB, job, f"failed by imagecheck reap: {reason}")
        message = f"its Job {pod.owner.name} failed by imagecheck reap: {reason}"
        on_pod = await self.event(POD, pod_ref(pod), message)
        return on_job and on_pod

    async def event(
        self,
        kind: Kind,
        obj: JSON,
        message: str,
        *,
        reason: str = EVENT_REASON,
        warning: bool = True,
    ) -> bool:
        """An Event (Warning unless ``warning`` is False) about ``obj``; False when it was not
        written (and said why)."""
        namespace = obj["metadata"]["namespace"]
        if namespace in self.refused:
            return False
        said = event(kind, obj, message, self.clock(), reason=reason, warning=warning,
                     component=self.component)  # fmt: skip
        try:
            await self.cluster.create(EVENT, namespace, said)
        except AlreadyExists:
            pass  # the same nanosecond twice, and one event says it already
        except Forbidden as exc:
            self.refused.add(namespace)
            self.on_api_error(exc)
            log.warning(
                "%s; no Events written there (the Job's %s annotation records it)", exc, REAPED
            )
            return False
        except ClusterError as exc:
            self.on_api_error(exc)
            name = obj["metadata"]["name"]
            log.warning("Event on %s %s/%s not written: %s", kind.kind, namespace, name, exc)
            return False
        return True


def pod_ref(pod: StuckPod) -> JSON:
    """What an Event names of a pod: enough without reading the pod again."""
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}}


def _ignore(error: ClusterError) -> None:
    """A pass alone (``--once``) counts nothing: the log line says it."""
