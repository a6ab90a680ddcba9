"""An HTTP answer that is not the one asked for, as a typed error: the one place where a status
code becomes an exception (go-containerregistry's ``transport.CheckError``, regclient's
``ErrHTTPStatus`` sentinels)::

    408, 429, 5xx (retry.TRANSIENT_STATUS_CODES)  TransientError, with the Retry-After it asks
    401, 403                                      AuthenticationError
    any other status                              ProtocolError

Not every status is an error: a 401 on the ping carries the challenge, and a 404 or a 401 on
a manifest is an answer (missing, denied). Callers read those first and hand the rest here.
"""

from __future__ import annotations

import httpx

from imagecheck._capped import parse_json
from imagecheck._text import authorization_secrets, printable, redact
from imagecheck.errors import AuthenticationError, ProtocolError, RegistryError, TransientError
from imagecheck.registry._retry import TRANSIENT_STATUS_CODES, parse_retry_after


def status_error(
    response: httpx.Response,
    subject: str,
    *,
    asked: str = "",
    body: bytes | None = None,
    offered: str | None = None,
) -> RegistryError:
    """The error for ``response``: ``<subject> answered HTTP <status><asked> (<reason>)``.

    The reason is read from ``body`` when the caller read one (a manifest's error body); a
    token service's body is never echoed, as it may quote the refresh token it was sent. For a
    refusal (401, 403), ``offered`` says what was refused (``credentials from ...``)."""
    status = response.status_code
    said = f"{subject} answered HTTP {status}{asked}"
    if body is not None:
        said += f" ({reason(response, body)})"
    if status in TRANSIENT_STATUS_CODES:
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return TransientError(said, status_code=status, retry_after=retry_after)
    if status in (401, 403):
        if offered:
            said = f"{subject} refused {offered} (HTTP {status})"
        return AuthenticationError(said, status_code=status)
    return ProtocolError(said, status_code=status)


def reason(response: httpx.Response, body: bytes) -> str:
    """A short reason from an OCI error body (``{"errors": [{"code", "message"}]}``), else
    the HTTP reason phrase. HTML pages and other bodies are not echoed; what is shown is
    one printable line."""
    try:
        data = parse_json(body, "error body") if body else None
    except ProtocolError:
        data = None  # not JSON, or hostile JSON: no reason in it
    errors = data.get("errors") if isinstance(data, dict) else None
    # A registry may echo what it was sent; never print the credentials back.
    sent = authorization_secrets(response.request.headers.get("Authorization"))
    first = errors[0] if isinstance(errors, list) and errors else None
    if isinstance(first, dict):
        words = [w for w in (first.get("code"), first.get("message")) if isinstance(w, str) and w]
        if words:
            return printable(redact(": ".join(words), sent))
    return printable(redact(response.reason_phrase, sent)) or "no reason given"
