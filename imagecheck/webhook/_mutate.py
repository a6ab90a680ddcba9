"""PLACEHOLDER for ``POST /mutate`` (the gate's mutating webhook), written by the gate
controller's side only to run against: the webhook's own implementation replaces this
file, with this interface. Adds the gate to a pod being created when its namespace is
selected and ``ready()`` says a controller will lift it; anything else is allowed
unchanged."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any


async def mutate_review(
    body: bytes, *, gate: str, namespaces: frozenset[str] | None, ready: Callable[[], bool]
) -> bytes:
    """The AdmissionReview response for ``body``."""
    review = json.loads(body)
    request = review.get("request") or {}
    pod = request.get("object") or {}
    namespace = request.get("namespace") or (pod.get("metadata") or {}).get("namespace")
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    selected = namespaces is None or namespace in namespaces
    if request.get("operation") == "CREATE" and pod.get("kind") == "Pod" and selected and ready():
        gates = (pod.get("spec") or {}).get("schedulingGates")
        if not any(g.get("name") == gate for g in gates or []):
            op: dict[str, Any] = (
                {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}}
                if gates
                else {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": gate}]}
            )
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps([op]).encode()).decode()
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    return json.dumps(answer).encode()
