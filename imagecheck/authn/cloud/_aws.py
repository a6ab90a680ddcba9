"""The AWS cloud source: a registry credential for Amazon ECR and ECR Public, from the identity
the pod's own AWS SDK would use.

**The identity** (:func:`find_identity`) is the first link of the AWS SDKs' default credential
chain that the environment names, in the SDKs' order (aws-sdk-go-v2's
``resolveCredentialChain``, botocore's ``create_credential_resolver``), so that imagecheck
asks ECR as the pod's own SDK would, whatever else is set:

1. static keys: ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` (``AWS_SESSION_TOKEN``);
2. IRSA: ``AWS_WEB_IDENTITY_TOKEN_FILE`` (with ``AWS_ROLE_ARN``), exchanged at STS
   (``_awssts.py``);
3. container credentials, EKS Pod Identity's or ECS's agent:
   ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` or ``AWS_CONTAINER_CREDENTIALS_FULL_URI``
   (``_awsidentity.py``).

Deciding reads the environment only: no file, no request, no DNS. None of these set, and the
source has no identity, so the keychain sends nothing. Left out, and said here so that nobody
looks for them: the shared config and credentials files (``~/.aws``: a pod has none), SSO and
``credential_process`` (a person's, or a program to run), and the instance metadata service
(IMDS): it is the node's identity, not the pod's, and EKS's hop limit keeps pods off it.

**The flow**, for one registry: the identity's AWS credentials, then ``GetAuthorizationToken``,
a SigV4-signed JSON POST (``Content-Type: application/x-amz-json-1.1``, ``X-Amz-Target``) to
the endpoint ``_awsendpoints.py`` names:

* private ECR: ``AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken``, signed for
  service ``ecr`` in the *registry's* region, with ``{"registryIds": ["<account>"]}``; the
  answer's ``authorizationData[0]`` holds ``authorizationToken``, base64 of
  ``AWS:<password>``, and ``expiresAt``, Unix seconds
  (https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_GetAuthorizationToken.html);
* ECR Public: ``SpencerFrontendService.GetAuthorizationToken``, service ``ecr-public`` in
  us-east-1, with ``{}``; ``authorizationData`` is one object
  (https://docs.aws.amazon.com/AmazonECRPublic/latest/APIReference/API_GetAuthorizationToken.html).

The registry credential is ``AWS`` and that password, kept per registry host (its account and
region; ECR Public's one host) until ``expiresAt`` (ECR gives twelve hours) or, if sooner, the
AWS credentials' own expiry: a token drawn on a session is not counted on past it.

A refusal is JSON, ``{"__type": "...#AccessDeniedException", "message": ...}``
(https://docs.aws.amazon.com/AmazonECR/latest/APIReference/CommonErrors.html): throttling and
5xx are temporary; a denial says which identity lacks which permission.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from imagecheck._capped import parse_json_object
from imagecheck._deadline import Deadline
from imagecheck._text import redact
from imagecheck.authn._credentials import Credentials
from imagecheck.authn.cloud._awsendpoints import Endpoint, registry_api_endpoint
from imagecheck.authn.cloud._awsidentity import (
    ECS_AGENT,
    AwsIdentity,
    AwsSession,
    ContainerCredentials,
    Now,
    StaticKeys,
    env_value,
    error_object,
    text_field,
    utc_now,
)
from imagecheck.authn.cloud._awssts import WebIdentity
from imagecheck.authn.cloud._hosts import CloudRegistry, Service
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP, answer_reason, temporary_status
from imagecheck.authn.cloud._keychain import CloudToken
from imagecheck.authn.cloud._sigv4 import sign
from imagecheck.errors import CloudAuthError, CredentialsError

JSON_11 = "application/x-amz-json-1.1"
# Codes a retry can help, beyond 429 and 5xx (ECR throttles with a 400).
_THROTTLING = frozenset({"ThrottlingException", "Throttling", "ThrottledException",
                         "TooManyRequestsException", "RequestLimitExceeded"})  # fmt: skip


@dataclass(frozen=True)
class _Api:
    target: str  # X-Amz-Target
    needs: str  # what the identity needs for it


_PRIVATE = _Api(
    "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken", "ecr:GetAuthorizationToken"
)
_PUBLIC = _Api(
    "SpencerFrontendService.GetAuthorizationToken",
    "ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken",
)
# What AWS says about the request's credentials rather than the identity's rights.
_CREDENTIAL_PROBLEMS = {
    "ExpiredTokenException": "its session token has expired",
    "UnrecognizedClientException": "AWS does not know its access key or session token",
    "InvalidClientTokenId": "AWS does not know its access key",
}


def source(env: Mapping[str, str], dmi_dir: Path) -> AwsSource:
    """The AWS source of the cloud keychain (``dmi_dir`` is not read: no IMDS)."""
    return AwsSource(env)


def find_identity(env: Mapping[str, str], now: Now = utc_now) -> AwsIdentity | None:
    """The first link of the chain ``env`` names (see the module docstring), or None."""
    key_id = env_value(env, "AWS_ACCESS_KEY_ID")
    secret = env_value(env, "AWS_SECRET_ACCESS_KEY")
    if key_id and secret:
        return StaticKeys(key_id, secret, env_value(env, "AWS_SESSION_TOKEN"))
    token_file = env_value(env, "AWS_WEB_IDENTITY_TOKEN_FILE")
    if token_file:
        return WebIdentity(env, Path(token_file), env_value(env, "AWS_ROLE_ARN"), now)
    relative = env_value(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    full = env_value(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI")
    if not (relative or full):
        return None
    token_path = env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
    return ContainerCredentials(
        url=ECS_AGENT + relative if relative else full,
        variable=f"AWS_CONTAINER_CREDENTIALS_{'RELATIVE' if relative else 'FULL'}_URI",
        token_file=Path(token_path) if token_path else None,
        token=env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN"),
    )


class AwsSource:
    """The cloud keychain's source for ECR and ECR Public hosts."""

    def __init__(self, env: Mapping[str, str], *, now: Now = utc_now) -> None:
        self._env = dict(env)
        self._now = now

    def identity(self, registry: CloudRegistry) -> str | None:
        found = find_identity(self._env, self._now)
        return None if found is None else found.describe()

    def cache_key(self, registry: CloudRegistry) -> str:
        return registry.address

    async def token(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> CloudToken:
        found = find_identity(self._env, self._now)
        if found is None:
            raise CredentialsError("no AWS identity: none of the AWS SDKs' variables is set")
        endpoint = registry_api_endpoint(self._env, registry)  # a bad override: before any call
        session = await found.session(registry, http, deadline)
        api = _PUBLIC if registry.service is Service.ECR_PUBLIC else _PRIVATE
        body = b"{}" if api is _PUBLIC else _registry_ids(registry)
        answer = await http.send(
            "POST",
            endpoint.url + "/",
            what=endpoint.what,
            deadline=deadline,
            headers=self._signed(session, endpoint, api, body),
            content=body,
        )
        if answer.status != 200:
            raise _refusal(answer, endpoint, api, session)
        username, password, expires_at = _authorization(answer, endpoint, api)
        try:
            credentials = Credentials(
                username, password, source=_shown_source(session, registry, api)
            )
        except CredentialsError:
            raise CloudAuthError(f"{endpoint.what} answered an unusable password") from None
        if session.expires_at is not None:
            expires_at = min(expires_at, session.expires_at)
        return CloudToken(credentials, max(0.0, expires_at - self._now().timestamp()))

    def _signed(
        self, session: AwsSession, endpoint: Endpoint, api: _Api, body: bytes
    ) -> dict[str, str]:
        headers = [("Content-Type", JSON_11), ("X-Amz-Target", api.target)]
        signed = sign(
            session.credentials,
            method="POST",
            url=endpoint.url + "/",
            region=endpoint.region,
            service=endpoint.service,
            when=self._now(),
            headers=headers,
            body=body,
        )
        return dict([*headers, *signed.headers])


def _registry_ids(registry: CloudRegistry) -> bytes:
    return json.dumps({"registryIds": [registry.account]}, separators=(",", ":")).encode()


def _authorization(answer: CloudAnswer, endpoint: Endpoint, api: _Api) -> tuple[str, str, float]:
    """(username, password, expiresAt) from a ``GetAuthorizationToken`` answer."""
    what = f"the answer of {endpoint.what}"
    found = parse_json_object(answer.body, what, error=CloudAuthError)
    data = found.get("authorizationData")
    if api is _PRIVATE:
        data = data[0] if isinstance(data, list) and data else None
    if not isinstance(data, dict):
        raise CloudAuthError(f"{what} holds no authorizationData")
    token, expires_at = data.get("authorizationToken"), _seconds(data.get("expiresAt"))
    if not isinstance(token, str) or expires_at is None:
        raise CloudAuthError(f"{what} holds no authorizationToken and expiresAt")
    try:
        decoded = base64.b64decode(token, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        decoded = ""
    username, _, password = decoded.partition(":")
    if not (username and password):
        raise CloudAuthError(f"{what} holds an authorizationToken that is not user:password")
    return username, password, expires_at


def _seconds(value: object) -> float | None:
    """A JSON number as a float; None for anything else (``true`` is not a time)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _shown_source(session: AwsSession, registry: CloudRegistry, api: _Api) -> str:
    """What a registry's denial names: the identity, and what pulling needs."""
    if api is _PUBLIC:
        return f"the pod's AWS identity {session.shown}, through ECR Public"
    text = (
        f"the pod's AWS identity {session.shown}, which needs ecr:BatchGetImage on the "
        f"repositories of {registry.account} in {registry.region}"
    )
    if session.account and session.account != registry.account:
        text += f" (from account {session.account}: their repository policy must allow it too)"
    return text


def _refusal(
    answer: CloudAnswer, endpoint: Endpoint, api: _Api, session: AwsSession
) -> CloudAuthError:
    code, message = _error(answer)
    detail = redact(": ".join(p for p in (code, message) if p), session.secrets)
    text = (
        f"{endpoint.what} refused GetAuthorizationToken to the AWS identity {session.shown}: "
        + answer_reason(answer, detail)
    )
    if code == "AccessDeniedException":
        text += f"; it needs {api.needs}"
    elif code in _CREDENTIAL_PROBLEMS:
        text += f"; {_CREDENTIAL_PROBLEMS[code]}"
    elif code in ("InvalidSignatureException", "SignatureDoesNotMatch"):
        text += f"; it was signed for service {endpoint.service} in {endpoint.region}"
        if endpoint.overridden_by:
            text += f" and sent where {endpoint.overridden_by} says"
    temporary = code in _THROTTLING or temporary_status(answer.status)
    return CloudAuthError(text, temporary=temporary)


def _error(answer: CloudAnswer) -> tuple[str, str]:
    """The error code and message of a JSON protocol refusal: ``__type`` (its part after any
    ``#``) or the ``x-amzn-ErrorType`` header, and ``message``; empty when there is none."""
    found = error_object(answer)
    raw = text_field(found, "__type", "code") or answer.headers.get("x-amzn-ErrorType", "")
    code = raw.rpartition("#")[2].partition(":")[0].strip()
    return code, text_field(found, "message", "Message")
