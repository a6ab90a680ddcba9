"""Workload identity federation: a Google access token for an identity another provider gave
the pod (a Kubernetes ServiceAccount token, any OIDC token) that a file holds, as the
credential configuration ``GOOGLE_APPLICATION_CREDENTIALS`` names describes it: type
``external_account``, https://google.aip.dev/auth/4117.

The configuration is read (through the capped regular-file reader) each time the flow runs,
as is the subject token file it names: a projected ServiceAccount token rotates under a
long-lived process. What is taken, as google-auth's ``identity_pool`` takes it:

* ``audience`` and ``subject_token_type``, sent to STS as they are;
* ``token_url``, default ``https://sts.googleapis.com/v1/token``;
* ``credential_source.file``, with ``format`` ``{"type": "text"}`` (the default: the whole file,
  without surrounding whitespace) or ``{"type": "json", "subject_token_field_name": ...}``;
* ``service_account_impersonation_url``, and ``service_account_impersonation``'s
  ``token_lifetime_seconds`` (600 to 43200, default 3600).

Refused with one line naming the file and what is supported: another ``type`` (a service
account key, ``authorized_user``), another credential source (``url``, ``executable``,
``environment_id`` for AWS, ``certificate``), a workforce pool's settings (``client_id``,
``client_secret``, ``workforce_pool_user_project``: those federate people, not workloads),
and an endpoint that is not ``https``.

The flow, each call bounded by the cloud HTTP client and inside the deadline:

1. Google STS's token exchange (RFC 8693): ``POST token_url`` with the form
   ``grant_type=urn:ietf:params:oauth:grant-type:token-exchange``, ``audience``, ``scope``,
   ``requested_token_type=urn:ietf:params:oauth:token-type:access_token``, ``subject_token``,
   ``subject_token_type``; it answers ``access_token`` and ``expires_in``, or an OAuth error
   (``invalid_grant``), https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token
2. with an impersonation URL, IAM Credentials' ``generateAccessToken``: ``POST`` the URL with
   ``{"scope": [...], "lifetime": "3600s"}`` and the STS token as a bearer token; it answers
   ``accessToken`` and ``expireTime`` (RFC 3339),
   https://cloud.google.com/iam/docs/reference/credentials/rest/v1/projects.serviceAccounts/generateAccessToken
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from imagecheck._capped import parse_json_object
from imagecheck._deadline import Deadline
from imagecheck._files import read_regular_file
from imagecheck._text import printable
from imagecheck.authn._credentials import bearer_problem
from imagecheck.authn.cloud._googleapi import (
    CLOUD_PLATFORM,
    GoogleToken,
    access_token,
    answer_object,
    google_reason,
    seconds,
)
from imagecheck.authn.cloud._http import CloudHTTP, temporary_status
from imagecheck.errors import CloudAuthError, CredentialsError

CONFIG_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
# Names from the specifications, not secrets.
DEFAULT_TOKEN_URL = "https://sts.googleapis.com/v1/token"  # noqa: S105
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105
# A credential configuration is a few hundred bytes; a subject token (a JWT) a few KiB.
MAX_CONFIG = 64 * 1024
MAX_SUBJECT_TOKEN = 64 * 1024
# generateAccessToken's default lifetime and the bounds google-auth holds the setting to.
DEFAULT_LIFETIME = 3600
MIN_LIFETIME, MAX_LIFETIME = 600, 43200
SUPPORTED = "supported: type external_account with a credential_source file"
_OTHER_SOURCES = ("url", "executable", "environment_id", "certificate")
_WORKFORCE = ("client_id", "client_secret", "workforce_pool_user_project")
_JSON = "application/json"
_GENERATE = ":generateAccessToken"

WallClock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class ExternalAccount:
    """A credential configuration of type ``external_account``, as the module takes it."""

    config: Path
    audience: str
    subject_token_type: str
    token_url: str
    subject_file: Path
    subject_field: str | None  # None: the file is the token (format text)
    impersonation_url: str | None
    lifetime: int

    @property
    def service_account(self) -> str:
        """The impersonated service account's email, from its URL (as google-auth reads it)."""
        path = urllib.parse.urlsplit(self.impersonation_url or "").path
        name = urllib.parse.unquote(path.rsplit("/", 1)[-1])
        return printable(name.removesuffix(_GENERATE), 100) if name.endswith(_GENERATE) else ""

    @property
    def identity(self) -> str:
        """Who a token of this configuration stands for, as messages show it."""
        where = f"workload identity federation, {CONFIG_ENV} {printable(self.config)}"
        if self.impersonation_url is not None:
            who = self.service_account or "the service account in its impersonation URL"
            return f"the pod's Google identity {who} (impersonated through {where})"
        return f"the pod's Google identity federated from {printable(self.subject_file)} ({where})"


async def federated_token(
    config: Path, http: CloudHTTP, deadline: Deadline, *, now: WallClock = time.time
) -> GoogleToken:
    """The configuration and its subject token read now, exchanged at STS, then for the
    impersonated service account's token when the configuration names one."""
    account = read_external_account(config)
    subject = read_subject_token(account)
    federated = await _exchange(account, subject, http, deadline)
    if account.impersonation_url is None:
        return federated
    return await _impersonate(account, account.impersonation_url, federated, http, deadline, now)


# -- the configuration and the subject token --------------------------------------------


def read_external_account(config: Path) -> ExternalAccount:
    raw = read_regular_file(config, limit=MAX_CONFIG, what=CONFIG_ENV, error=CredentialsError)
    data = parse_json_object(raw, f"{CONFIG_ENV} {config}", error=CredentialsError)
    _check_kind(config, data)
    source = data["credential_source"]
    return ExternalAccount(
        config=config,
        audience=_text(config, data, "audience"),
        subject_token_type=_text(config, data, "subject_token_type"),
        token_url=_https(config, data, "token_url") or DEFAULT_TOKEN_URL,
        subject_file=Path(_text(config, source, "file", "credential_source.file")),
        subject_field=_json_field(config, source.get("format")),
        impersonation_url=_https(config, data, "service_account_impersonation_url"),
        lifetime=_lifetime(config, data.get("service_account_impersonation")),
    )


def read_subject_token(account: ExternalAccount) -> str:
    """The subject token, read from its file now; a one-line :class:`CredentialsError` naming
    the file, never the token, when it cannot be used."""
    raw = read_regular_file(
        account.subject_file,
        limit=MAX_SUBJECT_TOKEN,
        what="the subject token file",
        error=CredentialsError,
    )
    where = f"the subject token file {account.subject_file}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CredentialsError(f"{where} is not UTF-8 text") from None
    if account.subject_field is not None:
        value = parse_json_object(text, where, error=CredentialsError).get(account.subject_field)
        if not isinstance(value, str):
            raise CredentialsError(f"{where} has no string {account.subject_field!r}")
        text = value
    token = text.strip()
    if not token:
        raise CredentialsError(f"{where} holds no token")
    problem = bearer_problem(token)
    if problem is not None:
        raise CredentialsError(f"{where}: the token {problem}")
    return token


def _bad(config: Path, problem: str) -> CredentialsError:
    return CredentialsError(f"{CONFIG_ENV} {config}: {problem}")


def _check_kind(config: Path, data: Mapping[str, Any]) -> None:
    kind = data.get("type")
    if kind != "external_account":
        shown = printable(kind, 40) if isinstance(kind, str) else "missing"
        raise _bad(config, f"type {shown!r} is not supported ({SUPPORTED})")
    workforce = [name for name in _WORKFORCE if data.get(name)]
    if workforce:
        raise _bad(config, f"{', '.join(workforce)} (a workforce pool's) is not supported "
                           f"({SUPPORTED})")  # fmt: skip
    source = data.get("credential_source")
    if not isinstance(source, dict):
        raise _bad(config, f"credential_source is not an object ({SUPPORTED})")
    other = [name for name in _OTHER_SOURCES if name in source]
    if other or "file" not in source:
        kind_shown = (
            f"credential_source {other[0]}" if other else "a credential_source without file"
        )
        raise _bad(config, f"{kind_shown} is not supported ({SUPPORTED})")


def _text(config: Path, data: Mapping[str, Any], name: str, shown: str = "") -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _bad(config, f"{shown or name} is missing or not a string")
    return value.strip()


def _https(config: Path, data: Mapping[str, Any], name: str) -> str | None:
    """An endpoint URL: https, a host, no credentials in it; None when absent."""
    if data.get(name) is None:
        return None
    url = _text(config, data, name)
    try:
        split = urllib.parse.urlsplit(url)
        usable = split.scheme == "https" and bool(split.hostname) and split.username is None
    except ValueError:
        usable = False
    if not usable or url != printable(url, len(url)) or " " in url:
        raise _bad(config, f"{name} must be an https URL with a host")
    return url


def _json_field(config: Path, form: object) -> str | None:
    """None for a text subject token file, else the JSON field that holds the token."""
    if form is None:
        return None
    if not isinstance(form, dict):
        raise _bad(config, "credential_source.format is not an object")
    kind = form.get("type") or "text"
    if kind == "text":
        return None
    if kind != "json":
        raise _bad(config, 'credential_source.format.type must be "text" or "json"')
    field = form.get("subject_token_field_name")
    if not isinstance(field, str) or not field:
        raise _bad(config, "credential_source.format needs subject_token_field_name for json")
    return field


def _lifetime(config: Path, options: object) -> int:
    value = options.get("token_lifetime_seconds") if isinstance(options, dict) else None
    if value is None:
        return DEFAULT_LIFETIME
    if isinstance(value, bool) or not isinstance(value, int):
        value = -1
    if not MIN_LIFETIME <= value <= MAX_LIFETIME:
        raise _bad(
            config,
            f"service_account_impersonation.token_lifetime_seconds must be an integer from "
            f"{MIN_LIFETIME} to {MAX_LIFETIME}",
        )
    return value


# -- the two calls ----------------------------------------------------------------------


async def _exchange(
    account: ExternalAccount, subject: str, http: CloudHTTP, deadline: Deadline
) -> GoogleToken:
    what = f"Google STS at {account.token_url}"
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "audience": account.audience,
        "scope": CLOUD_PLATFORM,
        "requested_token_type": ACCESS_TOKEN_TYPE,
        "subject_token": subject,
        "subject_token_type": account.subject_token_type,
    }
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": _JSON}
    body = urllib.parse.urlencode(form).encode()
    answer = await http.send(
        "POST", account.token_url, what=what, deadline=deadline, headers=headers, content=body
    )
    if answer.status != 200:
        raise CloudAuthError(
            f"{what} gave no token for the subject token in {account.subject_file} (audience "
            f"{account.audience}): {google_reason(answer, [subject])}",
            temporary=temporary_status(answer.status),
        )
    data = answer_object(answer, what)
    token = access_token(data, "access_token", what)
    return GoogleToken(token, seconds(data, "expires_in", what), account.identity)


async def _impersonate(
    account: ExternalAccount,
    url: str,
    federated: GoogleToken,
    http: CloudHTTP,
    deadline: Deadline,
    now: WallClock,
) -> GoogleToken:
    what = f"IAM Credentials at {url}"
    body = json.dumps({"scope": [CLOUD_PLATFORM], "lifetime": f"{account.lifetime}s"}).encode()
    headers = {
        "Authorization": f"Bearer {federated.access_token}",
        "Content-Type": _JSON,
        "Accept": _JSON,
    }
    answer = await http.send(
        "POST", url, what=what, deadline=deadline, headers=headers, content=body
    )
    if answer.status != 200:
        account_shown = account.service_account or "the service account"
        needs = (
            ": the federated identity needs roles/iam.workloadIdentityUser on it"
            if answer.status == 403
            else ""
        )
        raise CloudAuthError(
            f"{what} did not let the identity federated from {account.subject_file} "
            f"impersonate {account_shown} ({google_reason(answer, [federated.access_token])})"
            f"{needs}",
            temporary=temporary_status(answer.status),
        )
    data = answer_object(answer, what)
    token = access_token(data, "accessToken", what)
    return GoogleToken(token, _until(data.get("expireTime"), what, now), account.identity)


def _until(expire_time: object, what: str, now: WallClock) -> float:
    """Seconds from now to ``expireTime`` (RFC 3339, as ``2014-10-02T15:01:23.045Z``)."""
    try:
        expires = datetime.fromisoformat(expire_time) if isinstance(expire_time, str) else None
    except ValueError:
        expires = None
    if expires is None or expires.tzinfo is None:
        raise CloudAuthError(f"{what} answered no usable expireTime")
    left = expires.timestamp() - now()
    if left <= 0:
        raise CloudAuthError(f"{what} answered a token that has already expired")
    return left
