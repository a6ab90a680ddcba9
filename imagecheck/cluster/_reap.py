"""``imagecheck reap``, the pure part: which pods are stuck on an image pull, and what failing
their Job looks like. Objects in, values out; no I/O (``reap_pass.py`` does it).

A pod is *stuck* when a container or initContainer waits with a reason of
:data:`STUCK_REASONS`. The kubelet sets them (pkg/kubelet/images: ``ErrImagePull`` on a failed
pull, ``ImagePullBackOff`` while it waits to try again, ``InvalidImageName`` when the reference
does not parse); each carries no time of its own, so how long a pod has been stuck is measured
from its ``status.startTime``: the moment the kubelet took the pod, before its first pull.
``creationTimestamp`` would also count the time the pod waited for a node (a cluster autoscaler
adds minutes), and eat the grace a tag being pushed right now is given.

A Job is failed by setting ``spec.activeDeadlineSeconds`` (mutable) to its age: the Job
controller measures the deadline from the Job's ``status.startTime`` (``pastActiveDeadline``
in pkg/controller/job/job_controller.go; never while suspended), so a deadline at or below
that age fails the Job with ``DeadlineExceeded`` at its next sync and deletes its pods. The
same merge patch carries the reason (:data:`REAPED`) and the ``resourceVersion`` read, so a
Job that changed meanwhile is refused (409) rather than overwritten.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from imagecheck._text import printable
from imagecheck.cluster._model import JSON, Kind
from imagecheck.kube import JSON as JSON_TREE
from imagecheck.kube._workload import containers
from imagecheck.result import Status

STUCK_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})
REAPED = "imagecheck.io/reaped"
EVENT_REASON = "ImageMissing"
COMPONENT = "imagecheck-reap"
# Verdicts acted on unless --act-on says otherwise: the registry says the image does not exist,
# or the kubelet cannot even parse its name. Neither heals by waiting.
DEFAULT_ACT_ON = frozenset({Status.MISSING, Status.INVALID})
# What one annotation or event message may hold of a registry's words: a registry's error
# body is remote text (annotations may hold 256 KiB in all; the reason needs a line).
MAX_REASON = 300
_STATUS_LISTS = ("initContainerStatuses", "containerStatuses")
_FINISHED = frozenset({"Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"})


class Malformed(ValueError):
    """An object from the API that is not the shape the API documents: skipped, logged."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The controller of an object (its ``ownerReferences`` entry with ``controller: true``)."""

    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class StuckPod:
    """What reap keeps of a stuck pod: a few strings, whatever the pod's size."""

    namespace: str
    name: str
    uid: str
    container: str
    image: str  # the spec's image for that container: what the kubelet pulls
    reason: str  # ErrImagePull, ImagePullBackOff, InvalidImageName
    since: float  # status.startTime (else creationTimestamp), seconds since the epoch
    owner: Owner | None
    pull_secrets: tuple[str, ...]

    @property
    def path(self) -> str:
        return f"{self.namespace}/{self.name}"


class Action(enum.StrEnum):
    ACTED = "acted"
    WOULD_ACT = "would act"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What reap did about one stuck pod, and why: one line of output."""

    pod: StuckPod
    action: Action
    why: str
    verdict: Status | None = None
    job: str | None = None
    cronjob: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.pod.namespace,
            "pod": self.pod.name,
            "container": self.pod.container,
            "image": self.pod.image,
            "reason": self.pod.reason,
            "job": self.job,
            "cronjob": self.cronjob,
            "verdict": self.verdict.value if self.verdict else None,
            "action": self.action.value,
            "why": self.why,
        }

    def text(self) -> str:
        owner = f" (Job {self.job}" + (f" of CronJob {self.cronjob})" if self.cronjob else ")")
        return f"{self.action.value}: pod {self.pod.path}{owner if self.job else ''}: {self.why}"


def stuck_pod(pod: JSON) -> StuckPod | None:
    """The pod as a :class:`StuckPod` when a container of it waits on an image pull, else None;
    :class:`Malformed` when a field it needs has another shape than the API's."""
    if not isinstance(pod, Mapping):
        raise Malformed("not an object")
    meta = _mapping(pod, "metadata")
    status = _mapping(pod, "status")
    waiting = _waiting(status)
    if waiting is None:
        return None
    container, reason = waiting
    image = _spec_image(pod, container)
    started = status.get("startTime") or meta.get("creationTimestamp")
    return StuckPod(
        namespace=_text(meta, "namespace"),
        name=_text(meta, "name"),
        uid=str(meta.get("uid") or ""),
        container=container,
        image=image,
        reason=reason,
        since=parse_time(started),
        owner=controller(meta),
        pull_secrets=tuple(_pull_secrets(pod)),
    )


def _waiting(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """(container name, reason) of the first container waiting on a pull; init containers
    first, as the kubelet starts them first."""
    for field in _STATUS_LISTS:
        items = status.get(field) or []
        if not isinstance(items, list):
            raise Malformed(f"status.{field} is not a list")
        for item in items:
            waiting = ((item.get("state") or {}).get("waiting") or {}) if _is_map(item) else {}
            if _is_map(waiting) and waiting.get("reason") in STUCK_REASONS:
                return _text(item, "name"), str(waiting["reason"])
    return None


def _spec_image(pod: JSON, container: str) -> str:
    spec = _mapping(pod, "spec")
    for slot in containers(JSON_TREE, {"spec": spec}):
        listed = slot.field in ("containers", "initContainers")
        if slot.container == container and listed and isinstance(slot.image, str):
            return slot.image
    raise Malformed(f"no image in the spec for container {container!r}")


def _pull_secrets(pod: JSON) -> list[str]:
    items = _mapping(pod, "spec").get("imagePullSecrets") or []
    if not isinstance(items, list):
        raise Malformed("spec.imagePullSecrets is not a list")
    return [str(i["name"]) for i in items if _is_map(i) and isinstance(i.get("name"), str)]


def controller(meta: Mapping[str, Any]) -> Owner | None:
    """The ``ownerReferences`` entry with ``controller: true``, if any (at most one is)."""
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        raise Malformed("metadata.ownerReferences is not a list")
    for ref in refs:
        if _is_map(ref) and ref.get("controller") is True:
            return Owner(_text(ref, "kind"), _text(ref, "name"), str(ref.get("uid") or ""))
    return None


def job_skip_reason(job: JSON, owner: Owner, now: float) -> str | None:
    """Why this Job is to be left alone (None: fail it). Each makes the action idempotent."""
    meta = _mapping(job, "metadata")
    if owner.uid and meta.get("uid") != owner.uid:
        return "its Job was replaced by another of the same name"
    _text(meta, "resourceVersion")  # the patch's precondition: without it, no safe write
    annotations = _mapping(meta, "annotations")
    if REAPED in annotations:
        return f"Job reaped already ({printable(annotations[REAPED], MAX_REASON)})"
    status = _mapping(job, "status")
    for condition in status.get("conditions") or []:
        finished = _is_map(condition) and condition.get("type") in _FINISHED
        if finished and condition.get("status") == "True":
            return f"Job finished already ({condition['type']})"
    if _mapping(job, "spec").get("suspend") is True:
        return "Job is suspended (the controller deletes its pods itself)"
    if not status.get("startTime"):
        return "Job has no status.startTime yet"
    age = job_age(job, now)  # parsed here, where a bad time is a skip, not in the patch
    deadline = _mapping(job, "spec").get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= age:
        return "Job's activeDeadlineSeconds is already past (the controller is failing it)"
    return None


def job_age(job: JSON, now: float) -> int:
    """Whole seconds since the Job's ``status.startTime``: at least 1, the smallest deadline
    the API accepts."""
    started = parse_time(_mapping(job, "status").get("startTime"))
    return max(1, int(now - started))


def fail_patch(job: JSON, now: float, reason: str) -> dict[str, Any]:
    """The merge patch that fails ``job`` now, recording ``reason``; refused by the API if the
    Job changed since it was read."""
    meta = _mapping(job, "metadata")
    return {
        "metadata": {
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": {REAPED: reason},
        },
        "spec": {"activeDeadlineSeconds": job_age(job, now)},
    }


def reason_text(verdict: Status, image: str, message: str) -> str:
    """``missing registry.example.com/team/train:1.0.1 (manifest unknown)``, bounded."""
    said = printable(message, MAX_REASON)
    return f"{verdict.value} {image}" + (f" ({said})" if said else "")


def event(
    kind: Kind,
    obj: Mapping[str, Any],
    message: str,
    now: float,
    *,
    reason: str = EVENT_REASON,
    warning: bool = True,
    component: str = COMPONENT,
) -> JSON:
    """A core/v1 Event (Warning unless ``warning`` is False) about ``obj``, named as
    client-go's recorder names them (``<object>.<nanoseconds in hex>``): unique without a
    round trip for ``generateName``."""
    meta = obj["metadata"]
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{int(now * 1e9):x}", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": kind.api_version,
            "kind": kind.kind,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def parse_time(value: object) -> float:
    """An RFC 3339 time from the API (``2026-12-03T07:00:00Z``) as seconds since the epoch."""
    if not isinstance(value, str):
        raise Malformed(f"not a time: {printable(repr(value), 60)}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Malformed(f"not a time: {printable(value, 60)}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def now() -> float:
    return time.time()


def _mapping(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Malformed(f"{key} is not an object")
    return value


def _text(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise Malformed(f"{key} is missing or not a string")
    return value


def _is_map(value: object) -> bool:
    return isinstance(value, Mapping)
