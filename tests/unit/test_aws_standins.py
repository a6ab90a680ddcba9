"""The AWS stand-ins are held to AWS too: the ECR stand-in's SigV4 verifier, written apart from
imagecheck's signer, finds AWS's own signatures valid (``tests/data/sigv4``, the signed
requests of aws-c-auth's suite), and a request changed after signing invalid; so when the
flows' tests pass, two separate readings of AWS's algorithm agree."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from tests.support.awscloud import signature_of
from tests.support.cloudstandin import Received

SUITE = Path(__file__).resolve().parents[1] / "data" / "sigv4"
# The verifier reads a request's path as it is, for the ECR APIs are only ever POSTed at "/":
# it does not remove dot segments or collapse slashes. And the stand-in's server joins a
# folded header line before the verifier sees it, which this file reader does not.
LEFT_OUT = {"relative", "slash", "multiline"}
CASES = sorted(
    path.name
    for path in SUITE.iterdir()
    if path.is_dir() and not any(word in path.name for word in LEFT_OUT)
)


def received(case: str) -> tuple[Received, str, str]:
    """The suite's signed request as the stand-in would receive it, its secret, and the
    ``Authorization`` header AWS's signer gave it."""
    raw = (SUITE / case / "header-signed-request.txt").read_bytes()
    head, _, body = raw.partition(b"\n\n")
    first, *lines = head.decode("utf-8").split("\n")
    method, _, target = first.removesuffix(" HTTP/1.1").partition(" ")
    headers: dict[str, str] = {}
    for line in filter(None, lines):
        name, _, value = line.partition(":")
        name = name.lower()
        headers[name] = f"{headers[name]},{value}" if name in headers else value  # as http.client
    split = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
    context = json.loads((SUITE / case / "context.json").read_text(encoding="utf-8"))
    secret = context["credentials"]["secret_access_key"]
    return Received(method, split.path, query, headers, body), secret, headers["authorization"]


def verify(request: Received, secret: str, authorization: str) -> bool:
    credential, signed, signature = (part.split("=", 1)[1] for part in authorization.split(", "))
    _, date, region, service, _ = credential.split("/")
    expected = signature_of(request, secret, tuple(signed.split(";")), date, region, service)
    return expected == signature


def test_the_suite_is_there() -> None:
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES)
def test_the_verifier_takes_awss_own_signatures(case: str) -> None:
    assert verify(*received(case))


@pytest.mark.parametrize(
    "case", ["post-vanilla", "get-vanilla-query", "post-x-www-form-urlencoded"]
)
def test_the_verifier_refuses_a_request_changed_after_signing(case: str) -> None:
    request, secret, authorization = received(case)
    changed = [
        Received(request.method, request.path, request.query, request.headers, request.body + b"x"),
        Received("PUT", request.path, request.query, request.headers, request.body),
        Received(request.method, request.path, request.query,
                 {**request.headers, "host": "other.amazonaws.com"}, request.body),
        Received(request.method, request.path, {**request.query, "extra": ["1"]},
                 request.headers, request.body),
    ]  # fmt: skip
    for request in changed:
        assert not verify(request, secret, authorization)
    assert not verify(received(case)[0], secret + "x", authorization)
