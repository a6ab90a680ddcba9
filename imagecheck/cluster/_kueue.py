"""``imagecheck kueue-check``, the pure part: which Workloads wait on one of our admission
checks, what their pod sets pull, which state the check gets, and the status patches that
say so. Objects in, values out; no I/O (``kueue_pass.py`` does it).

Kueue's API (``kueue.x-k8s.io/v1beta1``, ``apis/kueue/v1beta1``):

* an ``AdmissionCheck`` (cluster-scoped) names its controller in ``spec.controllerName``; the
  controller keeps its ``Active`` condition (a ClusterQueue whose check is not Active admits
  nothing), as Kueue's own provisioning controller does: True, reason ``Active``, with the
  ``observedGeneration``;
* a ``Workload`` carries one ``status.admissionChecks[]`` entry per check of its ClusterQueue,
  ``Pending`` until the check's controller sets ``Ready`` (admitted once quota is reserved
  too), ``Retry`` (not now: Kueue releases any quota and resets it to Pending later) or
  ``Rejected`` (Kueue deactivates the Workload: no pod is ever created).

A state is written as Kueue's ``SetAdmissionCheckState`` does: the entry is updated in place,
its ``lastTransitionTime`` moves only when the state changes, its message always; the other
checks' entries are kept. The patch is a merge patch of the status subresource, and a merge
patch replaces a list whole, so it carries the whole list and the ``resourceVersion`` it was
read at: a Workload that changed meanwhile is refused (409) and read again, never
overwritten.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from imagecheck._text import printable
from imagecheck.cluster._model import JSON
from imagecheck.kube import JSON as JSON_TREE
from imagecheck.kube import pull_secrets, service_accounts
from imagecheck.kube._workload import containers
from imagecheck.result import CheckResult, Status

CONTROLLER_NAME = "imagecheck.io/images"
ACTIVE = "Active"
ACTIVE_MESSAGE = "imagecheck checks the images of the Workloads that name this check"
# Kueue allows 32 KiB in a check's message; it is shown by kubectl, so a few lines at most.
MAX_MESSAGE = 1024
MAX_NAMED = 5  # images named in one message; the rest are counted


class State(enum.StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


OPEN = frozenset({State.PENDING, State.RETRY})  # the states this controller acts on


class OnError(enum.StrEnum):
    """What a registry that cannot answer (denied, unreachable) means for the check."""

    PASS = "pass"  # noqa: S105  (not a password) Ready: the kubelet may have credentials we lack; it tries
    FAIL = "fail"  # as missing: Retry, then Rejected


@dataclass(frozen=True, slots=True)
class PodSet:
    """What one pod set will pull, and with what: its template's pull secrets, else its
    ServiceAccount's (the admission plugin gives the pods those), in the kubelet's order."""

    name: str
    images: tuple[str, ...]
    pull_secrets: tuple[str, ...]
    service_account: str | None  # read for its secrets only when the template names none


@dataclass(frozen=True, slots=True)
class Decision:
    state: State
    message: str
    verdict: Status  # the worst verdict among the images (found when all are)


def ours(check: Mapping[str, Any], controller_name: str) -> bool:
    spec = check.get("spec")
    return isinstance(spec, Mapping) and spec.get("controllerName") == controller_name


def active_patch(check: Mapping[str, Any], now: float) -> JSON | None:
    """The status patch that makes the AdmissionCheck Active; None when it is already."""
    meta = check.get("metadata") or {}
    generation = meta.get("generation")
    status = check.get("status")
    status = status if isinstance(status, Mapping) else {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    old = next((c for c in conditions if c.get("type") == ACTIVE), None)
    wanted = {
        "type": ACTIVE,
        "status": "True",
        "reason": ACTIVE,
        "message": ACTIVE_MESSAGE,
        "observedGeneration": generation if isinstance(generation, int) else 0,
    }
    if old is not None and all(old.get(k) == v for k, v in wanted.items()):
        return None
    moved = old is None or old.get("status") != "True"
    wanted["lastTransitionTime"] = (
        stamp(now) if moved or old is None else old.get("lastTransitionTime")
    )
    kept = [dict(c) for c in conditions if c.get("type") != ACTIVE]
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"conditions": [*kept, wanted]},
    }


def entries(workload: Mapping[str, Any]) -> list[JSON]:
    status = workload.get("status")
    checks = status.get("admissionChecks") if isinstance(status, Mapping) else None
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def open_checks(workload: Mapping[str, Any], names: Iterable[str]) -> dict[str, JSON]:
    """Our checks on the Workload that wait for a state (Pending, Retry), by name."""
    wanted = set(names)
    spec = workload.get("spec")
    if isinstance(spec, Mapping) and spec.get("active") is False:
        return {}  # deactivated: Kueue will not admit it whatever the check says
    return {
        e["name"]: e
        for e in entries(workload)
        if e.get("name") in wanted and e.get("state") in OPEN
    }


def pod_sets(workload: Mapping[str, Any]) -> list[PodSet]:
    """Each ``spec.podSets[]`` and what its template pulls (the one walk of pod specs)."""
    spec = workload.get("spec")
    sets = spec.get("podSets") if isinstance(spec, Mapping) else None
    found: list[PodSet] = []
    for item in sets if isinstance(sets, list) else []:
        template = item.get("template") if isinstance(item, Mapping) else None
        if not isinstance(template, Mapping):
            continue
        images = [JSON_TREE.text(slot.image) for slot in containers(JSON_TREE, template)]
        accounts = service_accounts(template)
        found.append(
            PodSet(
                name=str(item.get("name") or ""),
                images=tuple(dict.fromkeys(i for i in images if i)),
                pull_secrets=tuple(pull_secrets(JSON_TREE, template)),
                service_account=accounts[0] if accounts else None,
            )
        )
    return found


def decide(
    results: Sequence[CheckResult], waited: float, wait: float, on_error: OnError
) -> Decision:
    """The check's state from the registry's answers for every image, ``waited`` seconds
    after its first look. Missing waits (Retry) for a tag being pushed; an invalid name does
    not (no push mends it); denied or unreachable follows ``on_error``."""
    invalid = [r for r in results if r.status is Status.INVALID]
    missing = [r for r in results if r.status is Status.MISSING]
    failed = [r for r in results if r.status in (Status.DENIED, Status.ERROR)]
    if invalid:
        return Decision(State.REJECTED, _said("image name not valid", invalid), Status.INVALID)
    if failed and on_error is OnError.FAIL:
        missing += failed
    if missing:
        verdict = missing[0].status
        if waited < wait:
            left = f"; checked again until {_span(wait)} after the first look"
            return Decision(State.RETRY, _said("not found yet", missing) + left, verdict)
        return Decision(
            State.REJECTED, _said(f"not found after waiting {_span(wait)}", missing), verdict
        )
    if failed:
        said = _said("registry could not answer, passed to the kubelet", failed)
        return Decision(State.READY, said, failed[0].status)
    return Decision(State.READY, f"all {len(results)} images found", Status.FOUND)


def state_patch(
    workload: Mapping[str, Any], name: str, state: State, message: str, now: float
) -> JSON | None:
    """The status patch that gives check ``name`` ``state``; None when it has it already
    with that message (nothing to write)."""
    checks = copy.deepcopy(entries(workload))
    entry = next((e for e in checks if e.get("name") == name), None)
    if entry is None:
        return None  # Kueue removed the check meanwhile: not ours to add
    if entry.get("state") == state and entry.get("message") == message:
        return None
    if entry.get("state") != state:
        entry["lastTransitionTime"] = stamp(now)
    entry.update(state=state.value, message=message)
    meta = workload.get("metadata") or {}
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"admissionChecks": checks},
    }


def stamp(seconds: float) -> str:
    """A metav1.Time: RFC 3339 to the second, UTC."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _said(what: str, results: Sequence[CheckResult]) -> str:
    named = [
        f"{r.image} ({printable(r.message, 120)})" if r.message else r.image
        for r in results[:MAX_NAMED]
    ]
    more = f" and {len(results) - MAX_NAMED} more" if len(results) > MAX_NAMED else ""
    return printable(f"{what}: {', '.join(named)}{more}", MAX_MESSAGE)


def _span(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"
