"""The stand-in's mutating admission: before an object of a registered resource is created,
each registered webhook is sent an AdmissionReview of it and its JSON Patch is applied to
the object that is then stored, as kube-apiserver does
(https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#response:
``patchType: JSONPatch``, a base64 RFC 6902 patch; mutating webhooks run before the object's
validation and before validating webhooks). Webhooks are called in the order registered, each
seeing the object as the ones before left it; reinvocation is not modelled.

What fails, and how ``failurePolicy`` weighs it, follows the API server's mutating dispatcher
(``k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go``):

- the call fails (no connection, a timeout, not a 200, not an AdmissionReview) or its answer
  is invalid (another ``uid``, a ``patch`` without ``patchType``, a ``patchType`` other than
  ``JSONPatch``): ``Ignore`` creates the object unchanged, ``Fail`` answers 500
  ``InternalError``, "failed calling webhook";
- the webhook denies: the create fails with the webhook's status (its code, else 400);
- the patch is no JSON Patch, or does not apply: the create fails with a 500 whatever the
  policy (the dispatcher returns these as internal errors, not as a failed call).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp

from tests.support.admission import admission_review
from tests.support.jsonpatch import PatchError, apply_patch
from tests.support.kubeapi.store import ApiError, Resource

JSON = dict[str, Any]


@dataclass(frozen=True)
class MutatingWebhook:
    """One webhook of a MutatingWebhookConfiguration: its ``clientConfig.url`` (and the trust
    its ``caBundle`` gives; None: the system's), ``failurePolicy`` (``Fail`` or ``Ignore``),
    ``timeoutSeconds``, and the resources (plurals) whose CREATE it is sent."""

    name: str
    url: str
    trust: ssl.SSLContext | None = None
    failure_policy: str = "Fail"
    timeout: float = 10.0
    resources: frozenset[str] = frozenset({"pods"})


class CallFailed(Exception):
    """The API server's ``ErrCallingWebhook``: the one failure ``Ignore`` lets through."""


async def mutate(hooks: list[MutatingWebhook], res: Resource, namespace: str, obj: Any) -> Any:
    """``obj`` (a create's body) as the registered webhooks for ``res`` leave it."""
    for hook in hooks:
        if res.plural not in hook.resources or not isinstance(obj, dict):
            continue
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["namespace"] = namespace
        obj.update(apiVersion=res.api_version, kind=res.kind)
        try:
            response = await _call(hook, admission_review(obj, namespace=namespace))
        except CallFailed as exc:
            if hook.failure_policy == "Ignore":
                continue
            raise _internal(f'failed calling webhook "{hook.name}": {exc}') from None
        obj = _admitted(hook, obj, response)
    return obj


async def _call(hook: MutatingWebhook, review: JSON) -> JSON:
    """The ``response`` of the review's answer, checked as the API server checks it."""
    timeout = aiohttp.ClientTimeout(total=hook.timeout)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(hook.url, json=review, ssl=hook.trust or True) as answer,
        ):
            if answer.status != 200:
                raise CallFailed(f"the server answered HTTP {answer.status}")
            body = await answer.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise CallFailed(f"failed to call webhook: {exc!r}") from None
    response = body.get("response") if isinstance(body, dict) else None
    if not isinstance(response, dict):
        raise CallFailed("received invalid webhook response: no response")
    if response.get("uid") != review["request"]["uid"]:
        raise CallFailed("received invalid webhook response: expected response.uid to match")
    if response.get("patch") and response.get("patchType") is None:
        raise CallFailed("webhook returned response.patch but not response.patchType")
    if response.get("patchType") not in (None, "JSONPatch"):
        raise CallFailed(f"webhook returned invalid response.patchType {response['patchType']!r}")
    try:  # the patch is []byte in Go: bad base64 fails the answer's decoding, i.e. the call
        base64.b64decode(response.get("patch") or "", validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise CallFailed("received invalid webhook response: patch is not base64") from None
    return response


def _admitted(hook: MutatingWebhook, obj: JSON, response: JSON) -> Any:
    if not response.get("allowed"):
        status = response.get("status") or {}
        message = f'admission webhook "{hook.name}" denied the request: {status.get("message")}'
        raise ApiError(
            int(status.get("code") or 400), status.get("reason") or "BadRequest", message
        )
    if not response.get("patch"):
        return obj
    try:
        return apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    except (PatchError, ValueError) as exc:  # not JSON, not a JSON Patch, does not apply
        raise _internal(f'admission webhook "{hook.name}": the patch failed: {exc}') from None


def _internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")
