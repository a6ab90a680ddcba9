"""``POST /mutate``: the mutating admission webhook of ``imagecheck gate``, which adds its
scheduling gate to new pods so that none is scheduled before its images are checked.

A pod's ``spec.schedulingGates`` can only be set when the pod is created and only shrink after
(https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/), so a
mutating webhook on pod CREATE is the one place to add it. The answer is an AdmissionReview
whose ``patch`` is an RFC 6902 JSON Patch, base64 in the JSON
(https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#response):
it adds the list when the pod has none, else appends our gate with ``-``, so the gates other
controllers set stay as they were, in their order.

It never denies, and it fails open: a gate is only a promise that the controller will lift it,
so none is added while ``ready()`` says no controller runs, nor to a pod whose
``spec.nodeName`` is set (the API refuses a gated pod bound to a node: it bypasses the
scheduler the gate holds back). A review that is not one is a 400, as ``serve`` answers it.

Pure but for the optional thread that prunes a review nested too deeply; the aiohttp route and
its fast path are :class:`MutateEndpoint`.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from imagecheck.webhook._body import Unreadable, parsed_review
from imagecheck.webhook._limits import MAX_REVIEW_BYTES
from imagecheck.webhook._review import (
    API_VERSION,
    admission_request,
    load_json,
    load_json_pruned,
    mapping,
    path_of,
    short_text,
)

# The pod kind, as ``request.kind`` names it (group, version, kind): core/v1 Pod.
POD_KIND = ("", "v1", "Pod")


@dataclass(frozen=True, slots=True)
class Mutation:
    """What was answered for one review: its uid and namespace, the outcome (for metrics and
    logs: ``gated``, ``already_gated``, ``not_selected``, ``not_ready``, ``bound``,
    ``not_a_pod_create``), the answer's JSON Patch (None: none) and warning."""

    uid: str
    namespace: str
    outcome: str
    patch: list[dict[str, Any]] | None = None
    warning: str = ""


async def mutate_review(
    body: bytes, *, gate: str, namespaces: frozenset[str] | None, ready: Callable[[], bool]
) -> bytes:
    """The AdmissionReview answer (JSON) to the review in ``body``: pods created in
    ``namespaces`` (None: any) get the scheduling gate ``gate`` while ``ready()``.
    ``Unreadable`` (400, 413) when ``body`` is no review."""
    try:
        mutation = mutation_of(body, gate=gate, namespaces=namespaces, ready=ready)
    except RecursionError:  # deeper than Python's parser goes: prune, in a thread
        mutation = await asyncio.to_thread(
            mutation_of, body, gate=gate, namespaces=namespaces, ready=ready, load=load_json_pruned
        )
    return answer(mutation)


def mutation_of(
    body: bytes,
    *,
    gate: str,
    namespaces: frozenset[str] | None,
    ready: Callable[[], bool],
    load: Callable[[bytes], Any] = load_json,
) -> Mutation:
    """What to answer the review in ``body``. ``Unreadable`` when it is none;
    ``RecursionError`` when it nests too deeply for ``load``."""
    if len(body) > MAX_REVIEW_BYTES:
        raise Unreadable(413, f"body is larger than {MAX_REVIEW_BYTES} bytes")
    request = parsed_review(body, admission_request, load)
    obj = mapping(request.get("object"))
    namespace = short_text(request.get("namespace")) or short_text(
        path_of(obj, "metadata", "namespace")
    )
    outcome, patch = _decide(request, obj, namespace, gate, namespaces, ready)
    warning = NOT_GATED.get(outcome, "").format(gate=gate)
    return Mutation(request["uid"], namespace, outcome, patch, warning)


# Why a pod was not gated, as the answer's warning, where the user may want to know.
NOT_GATED = {
    "not_ready": "pod not gated ({gate}): no imagecheck gate controller is ready to check "
    "its images, so it is scheduled without that check",
    "bound": "pod not gated ({gate}): spec.nodeName is set, so no scheduler holds it back",
}


def _decide(
    request: dict[str, Any],
    obj: dict[str, Any],
    namespace: str,
    gate: str,
    namespaces: frozenset[str] | None,
    ready: Callable[[], bool],
) -> tuple[str, list[dict[str, Any]] | None]:
    kind = mapping(request.get("kind"))
    created_pod = (
        request.get("operation") == "CREATE"
        and (kind.get("group"), kind.get("version"), kind.get("kind")) == POD_KIND
        and not request.get("subResource")
        and isinstance(obj.get("spec"), dict)
    )
    if not created_pod:
        return "not_a_pod_create", None
    if namespaces is not None and namespace not in namespaces:
        return "not_selected", None
    spec = obj["spec"]
    gates = spec.get("schedulingGates")
    if gates is not None and not isinstance(gates, list):
        return "not_a_pod_create", None  # not a pod the API will take: its validation says so
    if any(isinstance(g, dict) and g.get("name") == gate for g in gates or ()):
        return "already_gated", None
    if spec.get("nodeName"):
        return "bound", None
    if not ready():
        return "not_ready", None
    return "gated", gate_patch(gates, gate)


def gate_patch(gates: list[Any] | None, gate: str) -> list[dict[str, Any]]:
    """The JSON Patch that adds ``gate`` after ``gates`` (the pod's, None when it has none)."""
    if not gates:  # absent, null or empty: the list is made (or replaced by an equal one)
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": gate}]}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}}]


def answer(mutation: Mutation) -> bytes:
    """The AdmissionReview (JSON) that answers with ``mutation``: always allowed."""
    response: dict[str, Any] = {"uid": mutation.uid, "allowed": True}
    if mutation.patch is not None:
        patch = json.dumps(mutation.patch, separators=(",", ":")).encode()
        response.update(patchType="JSONPatch", patch=base64.b64encode(patch).decode("ascii"))
    if mutation.warning:
        response["warnings"] = [mutation.warning]
    return json.dumps(
        {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
    ).encode()
