"""AdmissionReview (``admission.k8s.io/v1``) in, the images it would run out, and the answer
back. Pure: no I/O.

Kubernetes sends the object being created or updated in ``request.object``. Its pod spec is
at ``spec`` (Pod), ``spec.jobTemplate.spec.template.spec`` (CronJob), or
``spec.template.spec`` (Job, Deployment, StatefulSet, DaemonSet, ReplicaSet, and any other
kind with a pod template). Every container, init container and ephemeral container counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imagecheck.render import shown
from imagecheck.result import CheckResult, Status

API_VERSION = "admission.k8s.io/v1"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


class BadReview(ValueError):
    """The request body is not an AdmissionReview we can answer (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class ContainerImage:
    container: str
    image: str


@dataclass(frozen=True, slots=True)
class Review:
    uid: str
    kind: str
    namespace: str
    name: str
    images: list[ContainerImage]
    pull_secrets: list[str]


def parse_review(body: Any) -> Review:
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
        raise BadReview("body is not an AdmissionReview")
    if body.get("apiVersion") != API_VERSION:
        raise BadReview(f"only {API_VERSION} AdmissionReview is served")
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise BadReview("AdmissionReview has no request.uid")
    obj = request.get("object")
    kind = request.get("kind", {}).get("kind", "") if isinstance(request.get("kind"), dict) else ""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    name = str(metadata.get("name") or metadata.get("generateName") or request.get("name") or "")
    spec = pod_spec(obj) if isinstance(obj, dict) else None
    return Review(
        uid=request["uid"],
        kind=str(kind or (obj.get("kind", "") if isinstance(obj, dict) else "")),
        namespace=str(request.get("namespace") or metadata.get("namespace") or ""),
        name=name,
        images=containers_of(spec) if spec else [],
        pull_secrets=_pull_secrets(spec) if spec else [],
    )


def pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec inside a workload object, wherever its kind keeps it."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = _path(spec, "jobTemplate", "spec")
    template = _path(spec, "template", "spec") if spec else None
    return template if isinstance(template, dict) else None


def _path(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def containers_of(spec: Mapping[str, Any]) -> list[ContainerImage]:
    found = []
    for field in CONTAINER_LISTS:
        listed = spec.get(field)
        for container in listed if isinstance(listed, list) else []:
            if isinstance(container, dict) and isinstance(container.get("image"), str):
                found.append(ContainerImage(str(container.get("name", "")), container["image"]))
    return found


def _pull_secrets(spec: Mapping[str, Any]) -> list[str]:
    listed = spec.get("imagePullSecrets")
    return [
        s["name"]
        for s in (listed if isinstance(listed, list) else [])
        if isinstance(s, dict) and isinstance(s.get("name"), str)
    ]


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    message: str
    warnings: list[str]
    outcome: str  # for metrics: allowed / denied / warned / error


def decide(
    review: Review, results: Mapping[str, CheckResult], *, warn_only: bool, errors_pass: bool
) -> Verdict:
    """Refuse when an image is missing (or denied, or failing, unless ``errors_pass``)."""
    problems: list[str] = []
    passed_errors: list[str] = []
    for item in review.images:
        result = results[item.image]
        if result.status is Status.FOUND:
            continue
        status = result.status.value
        line = f"container {item.container!r}: image {shown(result)} is {status}: {result.message}"
        blocking = result.status in (Status.MISSING, Status.INVALID) or not errors_pass
        (problems if blocking else passed_errors).append(line)
    warnings = [f"not checked, allowed by --on-error pass: {p}" for p in passed_errors]
    if not problems:
        return Verdict(True, "", warnings, "allowed" if not warnings else "error")
    summary = f"imagecheck refused {review.kind or 'object'} {review.name}: " + "; ".join(problems)
    if warn_only:
        return Verdict(True, "", [*problems, *warnings], "warned")
    return Verdict(False, summary, warnings, "denied")


def response(uid: str, verdict: Verdict) -> dict[str, Any]:
    answer: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        answer["status"] = {"code": 403, "reason": "Forbidden", "message": verdict.message[:4096]}
    if verdict.warnings:
        # The API server truncates warnings; keep each short and their number small.
        answer["warnings"] = [w[:256] for w in verdict.warnings[:20]]
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": answer}


def distinct_images(review: Review) -> Sequence[str]:
    return list(dict.fromkeys(item.image for item in review.images))
