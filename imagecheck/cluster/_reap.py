"""``imagecheck reap``, the pure part: which pods are stuck on an image pull, and the Events said
about them. Objects in, values out; no I/O (``reap_pass.py`` does it).

A pod is *stuck* when a container or initContainer waits with a reason of
:data:`STUCK_REASONS`. The kubelet sets them (pkg/kubelet/images: ``ErrImagePull`` on a failed
pull, ``ImagePullBackOff`` while it waits to try again, ``InvalidImageName`` when the reference
does not parse); each carries no time of its own, so how long a pod has been stuck is measured
from its ``status.startTime``: the moment the kubelet took the pod, before its first pull.
``creationTimestamp`` would also count the time the pod waited for a node (a cluster autoscaler
adds minutes), and eat the grace a tag being pushed right now is given.

A stuck Job is failed as ``jobs.py`` does it (its deadline set to its age, guarded by the
resourceVersion read).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from imagecheck.cluster._fields import (
    Malformed,
    Owner,
    controller,
    is_map,
    mapping,
    parse_time,
    text,
)
from imagecheck.cluster._model import JSON, Kind
from imagecheck.kube import JSON as JSON_TREE
from imagecheck.kube._workload import containers
from imagecheck.result import Status

STUCK_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})
EVENT_REASON = "ImageMissing"
COMPONENT = "imagecheck-reap"
# Verdicts acted on unless --act-on says otherwise: the registry says the image does not exist,
# or the kubelet cannot even parse its name. Neither heals by waiting.
DEFAULT_ACT_ON = frozenset({Status.MISSING, Status.INVALID})
_STATUS_LISTS = ("initContainerStatuses", "containerStatuses")


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
    meta = mapping(pod, "metadata")
    status = mapping(pod, "status")
    waiting = _waiting(status)
    if waiting is None:
        return None
    container, reason = waiting
    image = _spec_image(pod, container)
    started = status.get("startTime") or meta.get("creationTimestamp")
    return StuckPod(
        namespace=text(meta, "namespace"),
        name=text(meta, "name"),
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
            waiting = ((item.get("state") or {}).get("waiting") or {}) if is_map(item) else {}
            if is_map(waiting) and waiting.get("reason") in STUCK_REASONS:
                return text(item, "name"), str(waiting["reason"])
    return None


def _spec_image(pod: JSON, container: str) -> str:
    spec = mapping(pod, "spec")
    for slot in containers(JSON_TREE, {"spec": spec}):
        listed = slot.field in ("containers", "initContainers")
        if slot.container == container and listed and isinstance(slot.image, str):
            return slot.image
    raise Malformed(f"no image in the spec for container {container!r}")


def _pull_secrets(pod: JSON) -> list[str]:
    items = mapping(pod, "spec").get("imagePullSecrets") or []
    if not isinstance(items, list):
        raise Malformed("spec.imagePullSecrets is not a list")
    return [str(i["name"]) for i in items if is_map(i) and isinstance(i.get("name"), str)]


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
