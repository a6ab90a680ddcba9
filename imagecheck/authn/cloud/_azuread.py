"""An Azure AD access token for Azure Container Registry, from the identity a pod has: the two
ways ``_azure.py`` asks, each one bounded request through
:class:`~imagecheck.authn.cloud._http.CloudHTTP`.

**AKS workload identity** (the client credentials grant with a federated credential): a POST
of a form to ``<authority>/<tenant>/oauth2/v2.0/token`` with ``grant_type=client_credentials``,
``client_id``, ``scope=<audience>/.default``, ``client_assertion_type=urn:ietf:params:oauth:
client-assertion-type:jwt-bearer`` and ``client_assertion``, the projected ServiceAccount token
read from ``AZURE_FEDERATED_TOKEN_FILE`` at every run (the kubelet rotates it). The answer is
JSON, ``access_token`` with ``expires_in``; a refusal is ``{"error", "error_description",
"error_codes"}``, ``AADSTS700024`` when the federated token is outside its validity.

- https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow#third-case-access-token-request-with-a-federated-credential
- https://azure.github.io/azure-workload-identity/docs/topics/service-account-labels-and-annotations.html

**A managed identity through the instance metadata service (IMDS)**: a GET of
``<IMDS>/metadata/identity/oauth2/token?api-version=2018-02-01&resource=<audience>`` (and
``client_id`` for a user-assigned identity) with the header ``Metadata: true``, over plain
HTTP; the answer is JSON with ``access_token`` (and ``expires_in``, a string). IMDS asks for a
retry on 404, 410, 429 and 5xx answers (it is updating, or throttling).

- https://learn.microsoft.com/en-us/entra/identity/managed-identities-azure-resources/how-to-use-vm-token#get-a-token-using-http
- retry guidance, same page, "Error handling" and "Retry guidance"

Only the access token is used, at once, for ACR's exchange; its lifetime does not matter
(the exchange's refresh token is what is cached). A refusal's message quotes the endpoint's
``error`` and the first line of its ``error_description`` (AADSTS codes say what is wrong),
printable and cut short, with any token this flow holds redacted.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagecheck._capped import parse_json_object
from imagecheck._deadline import Deadline
from imagecheck._files import read_regular_file
from imagecheck._text import redact
from imagecheck.authn._credentials import bearer_problem
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP, answer_reason, temporary_status
from imagecheck.errors import CloudAuthError, CredentialsError

FEDERATED_TOKEN_FILE = "AZURE_FEDERATED_TOKEN_FILE"  # noqa: S105 (a variable name, not a secret)
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
IMDS_PATH = "/metadata/identity/oauth2/token"
IMDS_API_VERSION = "2018-02-01"
# A projected ServiceAccount token is about 1 KiB; a file far larger is not one.
MAX_FEDERATED_TOKEN = 64 * 1024
# IMDS answers these while it updates or throttles, and asks callers to try again.
_IMDS_RETRY = frozenset({404, 410})
# An AADSTS code that means the federated token itself is stale, not the identity wrong.
_ASSERTION_TIME = 700024
_JWT_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_FORM = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """AKS workload identity: the values its webhook puts in the pod's environment."""

    client_id: str
    tenant: str
    token_file: Path
    authority: str  # https://login.microsoftonline.com, no trailing slash


@dataclass(frozen=True, slots=True)
class ManagedIdentity:
    """A managed identity reached through IMDS: user-assigned when ``client_id`` is set."""

    client_id: str | None
    imds: str  # http://169.254.169.254, no trailing slash


async def workload_token(
    who: WorkloadIdentity, audience: str, label: str, http: CloudHTTP, deadline: Deadline
) -> str:
    """Azure AD's access token for ``audience``, given for the federated token of ``who``;
    ``label`` names the identity in messages."""
    assertion = federated_token(who.token_file)
    url = f"{who.authority}/{urllib.parse.quote(who.tenant, safe='')}/oauth2/v2.0/token"
    what = f"Azure AD at {url}"
    form = {
        "grant_type": "client_credentials",
        "client_id": who.client_id,
        "scope": f"{audience}/.default",
        "client_assertion_type": JWT_BEARER,
        "client_assertion": assertion,
    }
    answer = await post_form(http, url, form, what, deadline)
    if answer.status != 200:
        doc = error_document(answer)
        reason = answer_reason(answer, redact(oauth_detail(doc), [assertion]))
        hint = ""
        if _stale_assertion(doc):
            hint = (
                f"; the federated token in {who.token_file} ({FEDERATED_TOKEN_FILE}) has expired"
                " or is not valid yet: is the kubelet still rotating it?"
            )
        raise CloudAuthError(
            f"{what} refused {label}: {reason}{hint}", temporary=temporary_status(answer.status)
        )
    return access_token(answer, what, [assertion])


async def imds_token(
    who: ManagedIdentity, audience: str, label: str, http: CloudHTTP, deadline: Deadline
) -> str:
    """IMDS's access token for ``audience``, for the managed identity ``who``."""
    query = {"api-version": IMDS_API_VERSION, "resource": audience}
    if who.client_id:
        query["client_id"] = who.client_id
    what = f"the Azure instance metadata service at {who.imds}"
    answer = await http.send(
        "GET",
        f"{who.imds}{IMDS_PATH}?{urllib.parse.urlencode(query)}",
        what=what,
        deadline=deadline,
        headers={"Metadata": "true", "Accept": "application/json"},
    )
    if answer.status != 200:
        reason = answer_reason(answer, oauth_detail(error_document(answer)))
        temporary = temporary_status(answer.status) or answer.status in _IMDS_RETRY
        raise CloudAuthError(f"{what} refused {label}: {reason}", temporary=temporary)
    return access_token(answer, what, [])


async def post_form(
    http: CloudHTTP, url: str, form: dict[str, str], what: str, deadline: Deadline
) -> CloudAnswer:
    """``form`` POSTed to ``url`` as ``application/x-www-form-urlencoded``, as Azure AD and
    ACR's exchange take it."""
    content = urllib.parse.urlencode(form).encode()
    return await http.send(
        "POST", url, what=what, deadline=deadline, headers=_FORM, content=content
    )


def federated_token(path: Path) -> str:
    """The federated token in ``path``, read now (the kubelet rotates it): a one-line
    :class:`CredentialsError` naming the file when it is missing, not a regular file, huge,
    empty or not a JWT; never its content."""
    what = f"the federated token file ({FEDERATED_TOKEN_FILE})"
    data = read_regular_file(path, limit=MAX_FEDERATED_TOKEN, what=what, error=CredentialsError)
    text = data.decode("latin-1").strip()  # any byte decodes; a JWT is ASCII, checked below
    if not text:
        raise CredentialsError(f"{what} {path} is empty")
    parts = text.split(".")
    if len(parts) != 3 or not all(part and set(part) <= _JWT_ALPHABET for part in parts):
        raise CredentialsError(f"{what} {path} does not hold a JWT (three base64url parts)")
    return text


def access_token(answer: CloudAnswer, what: str, secrets: list[str]) -> str:
    """The ``access_token`` of a token endpoint's JSON answer, usable as a bearer token."""
    doc = parse_json_object(answer.body, f"the answer of {what}", error=CloudAuthError)
    token = doc.get("access_token")
    if not isinstance(token, str) or not token or bearer_problem(token):
        raise CloudAuthError(f"{what} answered no usable access_token")
    return token


def oauth_detail(doc: dict[str, Any]) -> str:
    """``error: first line of error_description`` of an OAuth2 error answer (RFC 6749 5.2,
    as Azure AD and IMDS send it), or ``code: message`` of the first of a registry's
    ``errors`` (as ACR's exchange sends it); "" when it has neither."""
    error, description = doc.get("error"), doc.get("error_description")
    errors = doc.get("errors")
    if not isinstance(error, str) and isinstance(errors, list) and errors:
        first = errors[0] if isinstance(errors[0], dict) else {}
        error, description = first.get("code"), first.get("message")
    parts = [text for text in (error, description) if isinstance(text, str) and text]
    # Azure AD adds "Trace ID: ...", "Correlation ID: ..." and a timestamp on later lines.
    return ": ".join(part.splitlines()[0] for part in parts if part.strip())


def error_document(answer: CloudAnswer) -> dict[str, Any]:
    """The JSON object an error answer carries, or an empty one when it is anything else."""
    try:
        return parse_json_object(answer.body, "error", error=CloudAuthError)
    except CloudAuthError:
        return {}


def _stale_assertion(doc: dict[str, Any]) -> bool:
    """Whether Azure AD refused the federated token for its time range (AADSTS700024)."""
    codes = doc.get("error_codes")
    description = doc.get("error_description")
    return (isinstance(codes, list) and _ASSERTION_TIME in codes) or (
        isinstance(description, str) and f"AADSTS{_ASSERTION_TIME}:" in description
    )
