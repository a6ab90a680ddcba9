"""What Google's token endpoints answer, read one way: the metadata server's token, Google
STS's token exchange and IAM Credentials' ``generateAccessToken`` each give an access token
and its lifetime, or an error in one of two documented shapes. Used by ``_google.py`` (the
metadata server) and ``_googlefed.py`` (workload identity federation).

* An OAuth 2.0 error (RFC 6749 section 5.2, which Google STS follows):
  ``{"error": "invalid_grant", "error_description": "..."}``,
  https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token
* A Google API error (AIP-193): ``{"error": {"code": 403, "status": "PERMISSION_DENIED",
  "message": "..."}}``, as IAM Credentials answers, https://google.aip.dev/193
* Anything else (the metadata server answers its errors as text): the first line of a
  ``text/plain`` body, else nothing beyond the status.

A reason is shown printable and short, with every secret the request carried (a subject
token, an STS token) taken out first, in case an endpoint quotes what it was sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from imagecheck._capped import parse_json_object
from imagecheck._text import redact
from imagecheck.authn._credentials import bearer_problem
from imagecheck.authn.cloud._http import CloudAnswer, answer_reason
from imagecheck.errors import CloudAuthError

# The scope of every token asked for: Artifact Registry and Container Registry take it.
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


@dataclass(frozen=True, slots=True)
class GoogleToken:
    """An access token, how many seconds it holds from now, and who it stands for (shown)."""

    access_token: str = field(repr=False)
    lifetime: float
    identity: str


def answer_object(answer: CloudAnswer, what: str) -> dict[str, Any]:
    """The answer's body as a JSON object, or a :class:`CloudAuthError` naming ``what``."""
    return parse_json_object(answer.body, f"the answer of {what}", error=CloudAuthError)


def access_token(data: Mapping[str, Any], name: str, what: str) -> str:
    """The access token in ``data[name]``: a non-empty string that can go into a header as it
    is (the registry's token service gets it as a Basic password)."""
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise CloudAuthError(f"{what} answered no {name}")
    problem = bearer_problem(value)
    if problem is not None:
        raise CloudAuthError(f"{what} answered a {name} that cannot be sent: it {problem}")
    return value


def seconds(data: Mapping[str, Any], name: str, what: str) -> float:
    """A positive number of seconds in ``data[name]`` (``expires_in``). Some servers send it as
    a string of digits, which google-auth takes too."""
    value = data.get(name)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise CloudAuthError(f"{what} answered no usable {name}")
    return float(value)


def google_reason(answer: CloudAnswer, secrets: Iterable[str] = ()) -> str:
    """``HTTP <status>`` and what the endpoint said, in either error shape of the module
    docstring, without ``secrets``."""
    return answer_reason(answer, redact(_detail(answer), secrets))


def _detail(answer: CloudAnswer) -> str:
    try:
        data = parse_json_object(answer.body, "error", error=CloudAuthError)
    except CloudAuthError:
        return _text_line(answer)
    error = data.get("error")
    if isinstance(error, dict):  # AIP-193
        words = [error.get("status"), error.get("message")]
    else:  # RFC 6749
        words = [error, data.get("error_description")]
    return ": ".join(w for w in words if isinstance(w, str) and w)


def _text_line(answer: CloudAnswer) -> str:
    if answer.headers.get("Content-Type", "").split(";")[0].strip() != "text/plain":
        return ""
    text = answer.body.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else ""
