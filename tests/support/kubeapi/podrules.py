"""What kube-apiserver's validation refuses in a pod update, for the fields cluster mode
writes: ``spec.schedulingGates`` may only shrink after creation.

Pod scheduling readiness (https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/):
"the gates can only be removed after creation, never added" — pkg/apis/core/validation's
``validateOnlyDeletedSchedulingGates`` refuses a name the old pod did not have, with 422
Invalid and the message below. (A gate may be set only at creation; that is what a mutating
webhook does.)
"""

from __future__ import annotations

from typing import Any

from tests.support.kubeapi.store import ApiError, Resource


def validate_update(res: Resource, old: Any, new: Any) -> None:
    """422 Invalid when ``new`` may not replace ``old``; nothing for other resources."""
    if res.plural != "pods":
        return
    before = {g.get("name") for g in _gates(old)}
    for index, gate in enumerate(_gates(new)):
        if gate.get("name") not in before:
            name = new["metadata"]["name"]
            raise ApiError(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: spec.schedulingGates[{index}].name: Forbidden: only '
                f"deletion is allowed, but found new scheduling gate '{gate.get('name')}'",
                "Pod",
            )


def _gates(pod: Any) -> list[Any]:
    gates = ((pod or {}).get("spec") or {}).get("schedulingGates") or []
    return [g for g in gates if isinstance(g, dict)]
