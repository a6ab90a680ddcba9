"""IRSA (IAM roles for service accounts): the pod's projected ServiceAccount token exchanged for
a role's AWS credentials by STS ``AssumeRoleWithWebIdentity``.

The request, as the SDKs send it: an unsigned ``POST`` of a form to STS (``_awsendpoints.py``
says which), ``Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=...&
RoleSessionName=...&WebIdentityToken=...``, each value percent-encoded with ``%20`` for a space
(an HTML form's ``+`` is not AWS's). The token is read from ``AWS_WEB_IDENTITY_TOKEN_FILE``
at every flow: the kubelet rotates it. The session name is ``AWS_ROLE_SESSION_NAME``, else
``imagecheck-<unix time>`` (the SDKs make one from the time too); it shows in CloudTrail.

The answer is XML
(https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html):
``AssumeRoleWithWebIdentityResult/Credentials/{AccessKeyId, SecretAccessKey, SessionToken,
Expiration}`` and ``AssumedRoleUser/Arn``, the identity later messages name; a refusal is
``ErrorResponse/Error/{Code, Message}``
(https://docs.aws.amazon.com/STS/latest/APIReference/CommonErrors.html). The body is read
through the capped reader first (64 KiB), and one with a ``DOCTYPE`` is refused before it is
parsed: STS never sends one, and without it the stdlib parser has no entity to expand.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from imagecheck._deadline import Deadline
from imagecheck._text import printable, redact
from imagecheck.authn.cloud._awsendpoints import Endpoint, sts_endpoint
from imagecheck.authn.cloud._awsidentity import (
    AwsSession,
    Now,
    answered_session,
    env_value,
    read_token_file,
)
from imagecheck.authn.cloud._hosts import CloudRegistry
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP, answer_reason, temporary_status
from imagecheck.errors import CloudAuthError, CredentialsError

FORM = "application/x-www-form-urlencoded; charset=utf-8"
TOKEN_FILE = "AWS_WEB_IDENTITY_TOKEN_FILE"  # noqa: S105 (a variable's name)
# STS's own rules for the two names it is given (its API reference, "Request Parameters").
_ROLE_ARN = re.compile(r"arn:[a-z0-9-]+:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]{1,512}")
_SESSION_NAME = re.compile(r"[A-Za-z0-9_+=,.@-]{2,64}")
# Codes a retry can help: throttling, and the token issuer STS could not reach.
_TEMPORARY = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "IDPCommunicationError"}
)
_TOKEN_REFUSED = frozenset({"ExpiredTokenException", "InvalidIdentityToken", "IDPRejectedClaim"})


@dataclass(frozen=True)
class WebIdentity:
    """The IRSA link of the chain: ``AWS_WEB_IDENTITY_TOKEN_FILE`` and ``AWS_ROLE_ARN``."""

    env: Mapping[str, str] = field(repr=False)
    token_file: Path
    role_arn: str
    now: Now = field(repr=False, compare=False)

    def describe(self) -> str:
        role = printable(self.role_arn, 200) if self.role_arn else "(no AWS_ROLE_ARN)"
        return f"role {role} (IRSA, token file {self.token_file})"

    async def session(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> AwsSession:
        role = self._role()
        name = self._session_name()
        endpoint = sts_endpoint(self.env, registry)
        token = read_token_file(self.token_file, TOKEN_FILE)
        fields = (
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", role),
            ("RoleSessionName", name),
            ("WebIdentityToken", token),
        )
        answer = await http.send(
            "POST",
            endpoint.url + "/",
            what=endpoint.what,
            deadline=deadline,
            headers={"Content-Type": FORM},
            content=form(fields),
        )
        if answer.status != 200:
            raise self._refusal(answer, endpoint, role, token)
        return _session(answer, endpoint, token)

    def _role(self) -> str:
        if not self.role_arn:
            raise CredentialsError(f"{TOKEN_FILE} is set, but not AWS_ROLE_ARN, the role to assume")
        if not _ROLE_ARN.fullmatch(self.role_arn):
            shown = printable(self.role_arn, 120)
            raise CredentialsError(f"AWS_ROLE_ARN {shown!r} is not the ARN of an IAM role")
        return self.role_arn

    def _session_name(self) -> str:
        name = env_value(self.env, "AWS_ROLE_SESSION_NAME")
        if not name:
            return f"imagecheck-{int(self.now().timestamp())}"
        if not _SESSION_NAME.fullmatch(name):
            raise CredentialsError(
                f"AWS_ROLE_SESSION_NAME {printable(name, 80)!r} is not a session name STS "
                "takes (2 to 64 of letters, digits and +=,.@_-)"
            )
        return name

    def _refusal(
        self, answer: CloudAnswer, endpoint: Endpoint, role: str, token: str
    ) -> CloudAuthError:
        code, message = _error(answer, endpoint.what)
        detail = redact(": ".join(p for p in (code, message) if p), [token])
        text = (
            f"{endpoint.what} refused AssumeRoleWithWebIdentity for role {role} (IRSA): "
            + answer_reason(answer, detail)
        )
        if code in _TOKEN_REFUSED:
            text += f"; the token in {self.token_file} ({TOKEN_FILE}) was not taken"
        elif code == "AccessDenied":
            text += (
                "; the role's trust policy must allow sts:AssumeRoleWithWebIdentity to this "
                "ServiceAccount (the token's issuer and subject)"
            )
        temporary = code in _TEMPORARY or temporary_status(answer.status)
        return CloudAuthError(text, temporary=temporary)


def form(fields: tuple[tuple[str, str], ...]) -> bytes:
    """``fields`` as ``application/x-www-form-urlencoded``, a space as ``%20``: AWS's own
    encoding, where httpx's ``data=`` would write ``+``."""
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in fields).encode()


def _session(answer: CloudAnswer, endpoint: Endpoint, token: str) -> AwsSession:
    root = _xml(answer, endpoint.what)
    result = root.find("{*}AssumeRoleWithWebIdentityResult")
    if result is None:
        raise CloudAuthError(f"{endpoint.what} answered no AssumeRoleWithWebIdentityResult")
    return answered_session(
        endpoint.what,
        (_field(result, n) for n in ("AccessKeyId", "SecretAccessKey", "SessionToken")),
        principal=(result.findtext("{*}AssumedRoleUser/{*}Arn") or "").strip(),
        kind="IRSA",
        account="",
        expiration=_field(result, "Expiration"),
        asked_with=token,
    )


def _field(result: ET.Element, name: str) -> str:
    return (result.findtext(f"{{*}}Credentials/{{*}}{name}") or "").strip()


def _error(answer: CloudAnswer, what: str) -> tuple[str, str]:
    """``(Code, Message)`` of an ``ErrorResponse``; empty for a body that is not one (a
    proxy's error page)."""
    try:
        root = _xml(answer, what)
    except CloudAuthError:
        return "", ""
    code = root.findtext("{*}Error/{*}Code") or ""
    return code.strip(), (root.findtext("{*}Error/{*}Message") or "").strip()


def _xml(answer: CloudAnswer, what: str) -> ET.Element:
    """The answer's XML root; a ``CloudAuthError`` for anything else, or for a DOCTYPE."""
    if b"<!doctype" in answer.body.lower():
        raise CloudAuthError(f"{what} answered {answer_reason(answer)} with a DOCTYPE, not STS XML")
    try:
        # Safe with the stdlib parser: capped, and no DOCTYPE, so no entity to expand.
        return ET.fromstring(answer.body)  # noqa: S314
    except ET.ParseError:
        raise CloudAuthError(f"{what} answered {answer_reason(answer)}, not XML") from None
