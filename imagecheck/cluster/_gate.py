"""``imagecheck gate``, the pure part: which pods wait on the scheduling gate
``imagecheck.io/images``, what the registry's verdicts on their images decide, and the JSON
patch that lifts the gate. Objects in, values out; no I/O (``gate_pass.py`` does it).

A gated pod is ``SchedulingGated``: the scheduler leaves it alone, so no node reserves its
requests and no cluster autoscaler adds a node for it
(https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/). The API
lets ``spec.schedulingGates`` only shrink after creation, so lifting the gate is final:
every verdict but *found* is judged before the patch is sent.

What a pod's verdicts decide, in this order (:func:`decide`):

1. gated for longer than ``max_gate_age``: released, whatever the registry says. A gated pod
   waits for this controller; a valve keeps a bug, an outage or a registry that never
   answers from holding a workload forever;
2. an image *missing* (or *invalid*): kept while the pod is younger than ``wait`` (a tag
   being pushed right now); after it, a Job's pod fails its Job (reap's patch: the Job fails,
   the pod never ran, nothing was reserved); any other pod stays gated, with a Warning
   Event, and is released when the image appears. An invalid name is not waited for;
3. *denied* or *error* (imagecheck's credentials, an outage): ``on_error`` "pass" releases
   the gate and lets the kubelet try with its own; "fail" keeps it;
4. every image found: released.

Its age is measured from the pod's ``creationTimestamp``: a gated pod has no
``status.startTime`` (no kubelet took it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from imagecheck.cluster._fields import Malformed, Owner, controller, mapping, parse_time, text
from imagecheck.cluster._images import reason_text
from imagecheck.cluster._model import GATE, JSON, Selector
from imagecheck.kube import JSON as JSON_TREE
from imagecheck.kube._workload import containers
from imagecheck.result import CheckResult, Status

COMPONENT = "imagecheck-gate"
# The kubelet pulls the images of these lists before the pod runs; ephemeral containers are
# added to a running pod, never to a gated one.
_PULLED = frozenset({"containers", "initContainers"})
_MISSING = frozenset({Status.MISSING, Status.INVALID})
OnError = Literal["pass", "fail"]


class Action(enum.StrEnum):
    RELEASED = "released"
    FAILED_JOB = "failed-job"
    KEPT = "kept"
    RELEASED_ON_ERROR = "released-on-error"
    RELEASED_MAX_AGE = "released-max-age"

    @property
    def releases(self) -> bool:
        """The action lifts the gate."""
        return self in (Action.RELEASED, Action.RELEASED_ON_ERROR, Action.RELEASED_MAX_AGE)


@dataclass(frozen=True)
class GateOptions:
    """What the controller may do (the command's options), in seconds."""

    wait: float = 120.0
    on_error: OnError = "pass"
    max_gate_age: float = 900.0
    dry_run: bool = False
    selector: Selector = field(default_factory=Selector)
    namespaces: frozenset[str] | None = None  # several -n: listed cluster-wide, kept here
    deadline: float = 60.0  # one image's check, retries included
    max_tracked: int = 10_000


@dataclass(frozen=True, slots=True)
class GatedPod:
    """What gate keeps of a gated pod: a few strings, whatever the pod's size."""

    namespace: str
    name: str
    uid: str
    images: tuple[str, ...]  # distinct, in the spec's order (init containers first)
    since: float  # creationTimestamp, seconds since the epoch
    owner: Owner | None
    pull_secrets: tuple[str, ...]

    @property
    def path(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def job(self) -> str | None:
        """The owning Job's name, if a Job owns it."""
        return self.owner.name if self.owner is not None and self.owner.kind == "Job" else None


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    why: str
    verdict: Status | None = None  # the verdict that decided (None: not asked)
    image: str | None = None


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """What gate did about one pod, and why: one line of output."""

    pod: GatedPod
    action: Action
    why: str
    verdict: Status | None = None
    image: str | None = None
    dry_run: bool = False
    done: bool = True  # False: the write was refused or lost a race; tried again later

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.pod.namespace,
            "pod": self.pod.name,
            "job": self.pod.job,
            "image": self.image,
            "verdict": self.verdict.value if self.verdict else None,
            "action": self.action.value,
            "dry_run": self.dry_run,
            "why": self.why,
        }

    def text(self) -> str:
        owner = f" (Job {self.pod.job})" if self.pod.job else ""
        said = f"would be {self.action.value}" if self.dry_run else self.action.value
        return f"{said}: pod {self.pod.path}{owner}: {self.why}"


def gated_pod(pod: JSON) -> GatedPod | None:
    """The pod as a :class:`GatedPod` when it carries the gate and is not being deleted;
    :class:`Malformed` when a field it needs has another shape than the API's."""
    if not isinstance(pod, Mapping):
        raise Malformed("not an object")
    meta = mapping(pod, "metadata")
    if GATE not in gate_names(pod) or meta.get("deletionTimestamp"):
        return None
    spec = mapping(pod, "spec")
    images = [
        slot.image
        for slot in containers(JSON_TREE, {"spec": spec})
        if slot.field in _PULLED and isinstance(slot.image, str)
    ]
    secrets = spec.get("imagePullSecrets") or []
    if not isinstance(secrets, list):
        raise Malformed("spec.imagePullSecrets is not a list")
    return GatedPod(
        namespace=text(meta, "namespace"),
        name=text(meta, "name"),
        uid=str(meta.get("uid") or ""),
        images=tuple(dict.fromkeys(images)),
        since=parse_time(meta.get("creationTimestamp")),
        owner=controller(meta),
        pull_secrets=tuple(
            str(s["name"]) for s in secrets if isinstance(s, Mapping) and "name" in s
        ),
    )


def gate_names(pod: Mapping[str, Any]) -> list[str]:
    """The names in ``spec.schedulingGates``, in order."""
    gates = mapping(pod, "spec").get("schedulingGates") or []
    if not isinstance(gates, list):
        raise Malformed("spec.schedulingGates is not a list")
    return [str(g.get("name")) for g in gates if isinstance(g, Mapping)]


def release_ops(pod: Mapping[str, Any]) -> list[JSON] | None:
    """The JSON patch that removes the gate and only it (None: it is gone already). Its
    ``test`` ops make it apply only to this pod (its uid) with the gate where it was read: a
    gate removed or added before it meanwhile fails the test (422), never removes another
    controller's gate, and the others stay in their order."""
    names = gate_names(pod)
    if GATE not in names:
        return None
    index = names.index(GATE)
    uid = mapping(pod, "metadata").get("uid")
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]


def decide(
    pod: GatedPod, results: Sequence[CheckResult], now: float, options: GateOptions
) -> Decision:
    """What the verdicts on the pod's images decide (the module docstring's order)."""
    age = now - pod.since
    if age >= options.max_gate_age:
        why = f"gated for {age:.0f}s, past the maximum gate age of {options.max_gate_age:g}s"
        return Decision(Action.RELEASED_MAX_AGE, why)
    missing = next((r for r in results if r.status in _MISSING), None)
    if missing is not None:
        return _missing(pod, missing, age, options)
    failed = next((r for r in results if r.status is not Status.FOUND), None)
    if failed is not None:
        reason = reason_text(failed.status, failed.image, failed.message)
        if options.on_error == "pass":
            why = f"{reason}: released for the kubelet to try with its own credentials"
            return Decision(Action.RELEASED_ON_ERROR, why, failed.status, failed.image)
        return Decision(Action.KEPT, f"{reason}: kept gated", failed.status, failed.image)
    return Decision(Action.RELEASED, f"all {len(pod.images)} image(s) found", Status.FOUND)


def _missing(pod: GatedPod, result: CheckResult, age: float, options: GateOptions) -> Decision:
    reason = reason_text(result.status, result.image, result.message)

    def said(action: Action, why: str) -> Decision:
        return Decision(action, why, result.status, result.image)

    if result.status is Status.MISSING and age < options.wait:
        return said(Action.KEPT, f"{reason}: waiting ({options.wait - age:.0f}s left)")
    if pod.job is not None:
        return said(Action.FAILED_JOB, reason)
    return said(Action.KEPT, f"{reason}: kept gated until it appears")


def results_for(pod: GatedPod, verdicts: Mapping[str, CheckResult]) -> list[CheckResult]:
    return [verdicts[image] for image in pod.images if image in verdicts]
