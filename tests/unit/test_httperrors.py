"""Tests for imagecheck.registry._status: every status maps to one typed error, worded one way."""

from __future__ import annotations

import httpx
import pytest

from imagecheck.errors import AuthenticationError, ProtocolError, RegistryError, TransientError
from imagecheck.registry._status import reason, status_error

REQUEST = httpx.Request("GET", "https://registry.test/v2/app/manifests/1")
OCI_BODY = b'{"errors": [{"code": "DENIED", "message": "no"}]}'


def answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, request=REQUEST)


# (id, status, headers, body, offered, error type, message, retry_after)
CASES = [
    ("429-retry-after", 429, {"Retry-After": "7"}, None, None, TransientError,
     "registry.test answered HTTP 429 for it", 7.0),
    ("503-reason", 503, {}, b"", None, TransientError,
     "registry.test answered HTTP 503 for it (Service Unavailable)", None),
    ("408", 408, {}, None, None, TransientError, "registry.test answered HTTP 408 for it", None),
    ("401-offered", 401, {}, None, "anonymous access", AuthenticationError,
     "registry.test refused anonymous access (HTTP 401)", None),
    ("403-oci-body", 403, {}, OCI_BODY, None, AuthenticationError,
     "registry.test answered HTTP 403 for it (DENIED: no)", None),
    ("409-protocol", 409, {}, None, "ignored", ProtocolError,
     "registry.test answered HTTP 409 for it", None),
    ("404-oci-body", 404, {}, OCI_BODY, None, ProtocolError,
     "registry.test answered HTTP 404 for it (DENIED: no)", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "headers", "body", "offered", "kind", "message", "retry_after"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_status_error(
    status: int,
    headers: dict[str, str],
    body: bytes | None,
    offered: str | None,
    kind: type[RegistryError],
    message: str,
    retry_after: float | None,
) -> None:
    error = status_error(
        answer(status, **headers), "registry.test", asked=" for it", body=body, offered=offered
    )
    assert type(error) is kind
    assert str(error) == message
    assert error.status_code == status
    assert getattr(error, "retry_after", None) == retry_after


def test_reason_never_echoes_the_credentials_sent() -> None:
    request = httpx.Request(
        "GET", "https://registry.test/v2/", headers={"Authorization": "Bearer s3cr3t-token"}
    )
    body = b'{"errors": [{"code": "DENIED", "message": "token s3cr3t-token refused"}]}'
    said = reason(httpx.Response(403, request=request), body)
    assert "s3cr3t-token" not in said
    assert said.startswith("DENIED: token ")


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>busy</html>", "Conflict"),
        (b'{"errors": []}', "Conflict"),
        (b'{"errors": [{"code": 7}]}', "Conflict"),
        (b'{"errors": [{"message": "busy\\nnow"}]}', "busy?now"),
    ],
    ids=["html", "no-errors", "code-not-a-string", "control-characters"],
)
def test_reason_is_one_printable_line(body: bytes, said: str) -> None:
    assert reason(answer(409), body) == said
