"""AdmissionReview (``admission.k8s.io/v1``) in, the images it would run out, and the answer
back. Pure: no I/O.

The body is untrusted JSON: it is parsed with a depth bound (parts nested
deeper than ``MAX_DEPTH`` are read as empty, nothing we look at is that deep) and numbers of
any length, so that every review the API server can send gets an answer, never a 500.

Kubernetes sends the object being created or updated in ``request.object``. Its containers
and pull secrets are found as ``scan`` finds them (:mod:`imagecheck.kube._workload`): by shape,
in any kind, so a webhook registered for Tekton Tasks or Argo Workflows checks their steps
and templates too. A template placeholder (``{{inputs.parameters.image}}``, ``$(params.x)``)
in a kind that Kubernetes does not run itself is filled in by its controller later: it is
not checked, and the answer warns about it. In a Pod, a Job, a Deployment... nothing fills
it in, so it is checked as written (and refused as an invalid reference).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from imagecheck.kube import CORE_GROUPS, JSON, api_group, pull_secrets, service_accounts
from imagecheck.kube._workload_json import containers
from imagecheck.render import option_text, shown
from imagecheck.result import CheckResult, Status

API_VERSION = "admission.k8s.io/v1"
# Nothing the webhook reads is deeper than a CronJob's containers (about 12 levels); Python's
# JSON parser gives up near 1,000 (the recursion limit), the API server's allows 10,000.
MAX_DEPTH = 100
# Python refuses to turn more than 4,300 digits into an int (CVE-2020-10735); no number in a
# review matters to us, so a longer one is read as a float (which saturates to inf).
MAX_INT_DIGITS = 4000
# Names, kinds and uids longer than this are not Kubernetes names; they are cut for messages.
MAX_NAME = 512


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
    # Images with a placeholder that the object's controller fills in: not checked.
    templated: list[ContainerImage] = field(default_factory=list)
    # The ServiceAccounts of its pod templates that name no pull secret: their pods get the
    # ServiceAccount's (imagecheck.kube._serviceaccount).
    service_accounts: list[str] = field(default_factory=list)


def load_json(body: bytes) -> Any:
    """The JSON value of ``body``. ``ValueError`` (``JSONDecodeError``, ``UnicodeDecodeError``)
    when it is not JSON; ``RecursionError`` when it nests too deeply for Python's parser:
    then :func:`load_json_pruned` reads it (slower, so the server runs it in a thread)."""
    # json.loads(body, parse_int=...) without its new JSONDecoder per call: the same bytes
    # to text (UTF-8/16/32 detected, as json.loads does) and the same decoder.
    return _DECODER.decode(body.decode(json.detect_encoding(body), "surrogatepass"))


def load_json_pruned(body: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`load_json` of ``body`` with every array or object nested deeper than
    ``max_depth`` read as empty. Linear in the size of ``body``."""
    return load_json(_pruned(body, max_depth))


def _number(digits: str) -> int | float:
    return int(digits) if len(digits) <= MAX_INT_DIGITS else float(digits)


_DECODER = json.JSONDecoder(parse_int=_number)


# A JSON string (escapes included), or a run of opening or of closing brackets.
_STRUCTURE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]+|[\]}]+', re.DOTALL)
_OPENING = frozenset(b"[{")


def _pruned(body: bytes, max_depth: int) -> bytes:
    """``body`` with the inside of every container that opens at depth ``max_depth + 1``
    cut out (with ``max_depth`` 1, ``[[[1]], 2]`` becomes ``[[], 2]``). Brackets inside
    strings do not count."""
    kept: list[bytes] = []
    start = depth = 0  # start: where the text still to be kept begins
    for match in _STRUCTURE.finditer(body):
        token = match.group()
        if token[0] == 0x22:  # a string
            continue
        run = len(token)
        if token[0] in _OPENING:
            if depth <= max_depth < depth + run:  # this run enters the pruned depth
                cut = match.start() + (max_depth - depth) + 1
                kept.append(body[start:cut])
                start = len(body)  # nothing more is kept until the pruned depth is left
            depth += run
        else:
            if depth > max_depth >= depth - run:  # this run leaves it
                start = match.start() + (depth - max_depth) - 1
            depth -= run
    kept.append(body[start:])
    return b"".join(kept)


def parse_review(body: Any, *, secrets: bool = True) -> Review:
    """The review in ``body`` (parsed JSON). ``secrets``: look for the object's pull secrets
    and ServiceAccounts too (more walks of the object: only a webhook that reads them needs
    them)."""
    request = admission_request(body)
    obj = mapping(request.get("object"))
    kind = path_of(request, "kind", "kind")
    metadata = mapping(obj.get("metadata"))
    name = short_text(metadata.get("name")) or short_text(metadata.get("generateName"))
    found = [
        ContainerImage(short_text(slot.container), image)
        for slot in containers(obj)
        if isinstance(image := slot.image, str)
    ]
    # Only a kind Kubernetes does not run itself has a controller to fill placeholders in.
    templating = api_group(short_text(obj.get("apiVersion"))) not in CORE_GROUPS
    templated = [item for item in found if templating and _placeholder(item.image)]
    secret_names, accounts = _pull_secret_sources(obj) if secrets else ([], [])
    return Review(
        uid=request["uid"],
        kind=short_text(kind) or short_text(obj.get("kind")),
        namespace=short_text(request.get("namespace")) or short_text(metadata.get("namespace")),
        name=name or short_text(request.get("name")),
        images=[item for item in found if item not in templated],
        pull_secrets=secret_names,
        templated=templated,
        service_accounts=accounts,
    )


def admission_request(body: Any) -> dict[str, Any]:
    """The ``request`` of the AdmissionReview in ``body`` (parsed JSON), which has a string
    ``uid``; ``BadReview`` when ``body`` is not a v1 AdmissionReview."""
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
        raise BadReview("body is not an AdmissionReview")
    if body.get("apiVersion") != API_VERSION:
        raise BadReview(f"only {API_VERSION} AdmissionReview is served")
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise BadReview("AdmissionReview has no request.uid")
    return request


def mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a field of the wrong type is read
    as absent)."""
    return value if isinstance(value, dict) else {}


def _pull_secret_sources(obj: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The pull secrets the object names, and the ServiceAccounts whose secrets the pods of
    its templates that name none will get."""
    return pull_secrets(JSON, obj), service_accounts(obj)


# Argo's {{...}}, Tekton's and Kubernetes' $(...), shell's ${...}: none is in a reference.
_PLACEHOLDER = re.compile(r"\{\{|\$[({]")


def _placeholder(image: str) -> bool:
    return _PLACEHOLDER.search(image) is not None


def short_text(value: Any) -> str:
    """A name from the review: strings only (a list there is not a name), cut to MAX_NAME."""
    return value[:MAX_NAME] if isinstance(value, str) else ""


def path_of(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    message: str
    warnings: list[str]
    outcome: str  # for metrics: allowed / denied / warned / error


def decide(
    review: Review,
    results: Mapping[str, CheckResult],
    *,
    warn_only: bool,
    errors_pass: bool,
    unchecked: Mapping[str, str] | None = None,
) -> Verdict:
    """Refuse when an image is missing (or denied, or failing, unless ``errors_pass``).

    ``unchecked`` maps the images that no registry was asked about to the reason (the review
    names too many, or they were still queued behind its others at the deadline). That is
    not a registry failing, and ``errors_pass`` must not let it through: they are refused
    like missing images, summed up in one line per reason, first (the message is capped).
    """
    problems: list[str] = []
    passed_errors: list[str] = []
    skipped: dict[str, list[ContainerImage]] = {}
    for item in review.images:
        reason = unchecked.get(item.image) if unchecked else None
        if reason is not None:
            skipped.setdefault(reason, []).append(item)
            continue
        result = results[item.image]
        if result.status is Status.FOUND:
            continue
        status = result.status.value
        line = f"container {item.container!r}: image {shown(result)} is {status}: {result.message}"
        blocking = result.status in (Status.MISSING, Status.INVALID) or not errors_pass
        (problems if blocking else passed_errors).append(line)
    problems[:0] = [_not_checked(reason, items) for reason, items in skipped.items()]
    warnings = [
        f"container {item.container!r}: image {item.image[:MAX_NAME]!r} not checked: "
        "a template placeholder its controller fills in"
        for item in review.templated
    ]
    allowed = f"not checked, allowed by {option_text('errors_pass')}"
    warnings += [f"{allowed}: {p}" for p in passed_errors]
    if not problems:
        return Verdict(True, "", warnings, "error" if passed_errors else "allowed")
    summary = f"imagecheck refused {review.kind or 'object'} {review.name}: " + "; ".join(problems)
    if warn_only:
        return Verdict(True, "", [*problems, *warnings], "warned")
    return Verdict(False, summary, warnings, "denied")


def _not_checked(reason: str, items: Sequence[ContainerImage]) -> str:
    images = len({item.image for item in items})
    shown_ = ", ".join(repr(item.container) for item in items[:3])
    more = f" and {len(items) - 3} more" if len(items) > 3 else ""
    return f"{images} image(s) not checked (container {shown_}{more}): {reason}"


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
