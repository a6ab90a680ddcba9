"""AWS Signature Version 4, proven on AWS's own test suite (``tests/data/sigv4``, copied from
awslabs/aws-c-auth: see its README) and on the example in AWS's guide: for each case the
canonical request, the string to sign, the signature and the headers added equal upstream's,
byte for byte."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from imagecheck.authn.cloud._sigv4 import (
    AwsCredentials,
    canonical_query,
    canonical_uri,
    canonicalize_headers,
    remove_dot_segments,
    sign,
)

SUITE = Path(__file__).resolve().parents[1] / "data" / "sigv4"

# Upstream cases this signer does not run, each with why. Nothing else is left out: a case
# upstream adds is run, or fails the count below until it is listed here.
LEFT_OUT = {
    # The session token is sent but left out of the signature, as a few services want.
    # STS and ECR sign it, and so does this signer; it has no switch to leave it out.
    "post-sts-header-after": "omit_session_token",
}
ALL_CASES = sorted(path.name for path in SUITE.iterdir() if path.is_dir())
CASES = [name for name in ALL_CASES if name not in LEFT_OUT]

WHEN = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
CREDENTIALS = AwsCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def url(self) -> str:
        host = next(value for name, value in self.headers if name.lower() == "host")
        return f"https://{host}{self.target}"


def parse_request(raw: bytes) -> Request:
    """A request as the suite writes it: ``METHOD target HTTP/1.1``, ``Name:value`` lines,
    a blank line, the body. A line that starts with whitespace continues the header before
    it (obs-fold), which a recipient reads as one space (RFC 9112 section 5.2)."""
    head, _, body = raw.partition(b"\n\n")
    first, *lines = head.decode("utf-8").split("\n")
    method, _, target = first.removesuffix(" HTTP/1.1").partition(" ")
    headers: list[tuple[str, str]] = []
    for line in filter(None, lines):
        if line[0].isspace():
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {line}")
        else:
            name, _, value = line.partition(":")
            headers.append((name, value))
    return Request(method, target, headers, body)


def _read(case: str, name: str) -> str:
    return (SUITE / case / name).read_bytes().decode("utf-8")


def _context(case: str) -> dict[str, Any]:
    context: dict[str, Any] = json.loads(_read(case, "context.json"))
    return context


def _sign_case(case: str) -> tuple[Request, Any]:
    context = _context(case)
    assert not context.get("omit_session_token", False), "a case this signer cannot run"
    keys = context["credentials"]
    credentials = AwsCredentials(
        keys["access_key_id"], keys["secret_access_key"], keys.get("token", ""), source=case
    )
    request = parse_request((SUITE / case / "request.txt").read_bytes())
    signed = sign(
        credentials,
        method=request.method,
        url=request.url,
        headers=request.headers,
        body=request.body,
        region=context["region"],
        service=context["service"],
        when=datetime.fromisoformat(context["timestamp"]),
        content_sha256_header=context["sign_body"],
        normalize_path=context["normalize"],
    )
    return request, signed


def test_the_suite_is_all_here_and_all_run_but_the_listed() -> None:
    assert len(ALL_CASES) == 38
    assert set(LEFT_OUT) <= set(ALL_CASES)
    assert len(CASES) == 37
    for case in CASES:
        assert _context(case)["service"] == "service"  # none is S3's


@pytest.mark.parametrize("case", CASES)
def test_the_suite_case(case: str) -> None:
    request, signed = _sign_case(case)
    assert signed.canonical_request == _read(case, "header-canonical-request.txt")
    assert signed.string_to_sign == _read(case, "header-string-to-sign.txt")
    assert signed.signature == _read(case, "header-signature.txt")
    expected = parse_request((SUITE / case / "header-signed-request.txt").read_bytes())
    assert expected.headers[: len(request.headers)] == request.headers
    assert sorted(signed.headers) == sorted(expected.headers[len(request.headers) :])
    assert expected.body == request.body


def test_the_example_in_aws_s_guide() -> None:
    """The IAM ``ListUsers`` request that AWS's guide signed step by step, with the canonical
    request hash and signature it published
    (https://docs.aws.amazon.com/general/latest/gr/sigv4-create-canonical-request.html and the
    pages after it, since folded into
    https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html): a named
    service, a query and a ``Content-Type`` header, which the suite's cases do not combine."""
    signed = sign(
        CREDENTIALS,
        method="GET",
        url="https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
        headers=[("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
        region="us-east-1",
        service="iam",
        when=WHEN,
    )
    assert signed.canonical_request == (
        "GET\n/\nAction=ListUsers&Version=2010-05-08\n"
        "content-type:application/x-www-form-urlencoded; charset=utf-8\n"
        "host:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
        "content-type;host;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert signed.string_to_sign.endswith(
        "\nf536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
    )
    assert dict(signed.headers)["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    )


def _sts_sign(credentials: AwsCredentials, **changes: Any) -> Any:
    """An STS-shaped request: a form POST with the ``Host`` taken from the URL."""
    request: dict[str, Any] = {
        "method": "POST",
        "url": "https://sts.us-east-1.amazonaws.com/",
        "headers": [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
        "body": b"Action=GetCallerIdentity&Version=2011-06-15",
        "region": "us-east-1",
        "service": "sts",
        "when": WHEN,
    }
    return sign(credentials, **(request | changes))


def test_a_session_token_is_sent_and_signed() -> None:
    with_token = AwsCredentials("AKIDEXAMPLE", "secret", "the-token")
    signed = _sts_sign(with_token)
    headers = dict(signed.headers)
    assert headers["X-Amz-Security-Token"] == "the-token"
    assert "x-amz-security-token:the-token\n" in signed.canonical_request
    signed_headers = headers["Authorization"].split(", ")[1]
    assert signed_headers == "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token"
    other = _sts_sign(AwsCredentials("AKIDEXAMPLE", "secret", "another-token"))
    assert other.signature != signed.signature


def test_without_a_token_there_is_no_token_header() -> None:
    signed = _sts_sign(CREDENTIALS)
    assert [name for name, _ in signed.headers] == ["X-Amz-Date", "Authorization"]


def test_the_body_is_hashed_and_the_host_comes_from_the_url() -> None:
    signed = _sts_sign(CREDENTIALS, url="https://STS.us-east-1.amazonaws.com:443/")
    lines = signed.canonical_request.split("\n")
    assert "host:sts.us-east-1.amazonaws.com" in lines
    assert lines[-1] == hashlib.sha256(b"Action=GetCallerIdentity&Version=2011-06-15").hexdigest()
    on_another_port = _sts_sign(CREDENTIALS, url="https://sts.us-east-1.amazonaws.com:8443/")
    assert "host:sts.us-east-1.amazonaws.com:8443" in on_another_port.canonical_request


def test_x_amz_content_sha256_only_when_asked() -> None:
    asked = _sts_sign(CREDENTIALS, content_sha256_header=True)
    assert dict(asked.headers)["x-amz-content-sha256"] == asked.canonical_request[-64:]
    assert "x-amz-content-sha256" not in dict(_sts_sign(CREDENTIALS).headers)


def test_no_secret_shows_in_repr() -> None:
    credentials = AwsCredentials("AKIDEXAMPLE", "the-secret-key", "the-session-token", "irsa")
    signed = _sts_sign(credentials)
    for text in (repr(credentials), str(credentials), repr(signed)):
        assert "the-secret-key" not in text
        assert "the-session-token" not in text
        assert signed.signature not in text
    assert "AKIDEXAMPLE" in repr(credentials)
    assert "irsa" in repr(credentials)


@pytest.mark.parametrize(
    ("key_id", "secret", "token", "message"),
    [
        pytest.param("", "secret", "", "the access key id is empty", id="no-key-id"),
        pytest.param("AKID", "", "", "the secret access key is empty", id="no-secret"),
        pytest.param("AKID", "secret\n", "", "secret access key contains", id="newline"),
        pytest.param("AKID", "secret", "tok en", "session token contains", id="space"),
    ],
)
def test_bad_credentials_are_named_by_source_never_by_value(
    key_id: str, secret: str, token: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        AwsCredentials(key_id, secret, token, source="web identity")
    assert str(raised.value).startswith("web identity: ")
    assert "secret\n" not in str(raised.value)


def test_repeated_headers_and_odd_spacing() -> None:
    lines, signed = canonicalize_headers(
        [
            ("X-Custom", "  first   value \t"),
            ("Host", "example.amazonaws.com"),
            ("x-custom", "second\t\tvalue"),
            ("X-CUSTOM", ""),
            ("A-Header", '"quoted   words" kept'),
        ]
    )
    assert lines == (
        'a-header:"quoted words" kept\n'
        "host:example.amazonaws.com\n"
        "x-custom:first value,second value,\n"
    )
    assert signed == "a-header;host;x-custom"


def test_unicode_in_path_and_query() -> None:
    signed = sign(
        CREDENTIALS,
        method="get",
        url="https://example.amazonaws.com/d\u00e9j\u00e0 vu/\u1234?z=\u00fc&a=b%20c&a=%7e",
        region="us-east-1",
        service="service",
        when=WHEN,
    )
    method, uri, query = signed.canonical_request.split("\n")[:3]
    assert method == "GET"
    assert uri == "/d%C3%A9j%C3%A0%20vu/%E1%88%B4"
    assert query == "a=b%20c&a=~&z=%C3%BC"  # "~" is unreserved; by name, then by value


@pytest.mark.parametrize(
    ("path", "normalize", "encode", "expected"),
    [
        pytest.param("", True, True, "/", id="empty"),
        pytest.param("/a%20b/c", True, True, "/a%2520b/c", id="wire-form-encoded-again"),
        pytest.param("/a%20b//c", False, False, "/a%20b//c", id="s3-as-sent"),
        pytest.param("/a/b/../c/./d/", True, True, "/a/c/d/", id="dots"),
        pytest.param("/a/b/..", True, True, "/a/", id="trailing-dot-dot-keeps-slash"),
        pytest.param("/../../a", True, True, "/a", id="above-the-root"),
        pytest.param(
            "/a:b@c!$&'()*+,;=",
            True,
            True,
            "/a%3Ab%40c%21%24%26%27%28%29%2A%2B%2C%3B%3D",
            id="sub-delims-encoded",
        ),
    ],
)
def test_canonical_uri(path: str, normalize: bool, encode: bool, expected: str) -> None:
    assert canonical_uri(path, normalize=normalize, encode=encode) == expected


def test_dot_segments_follow_rfc_3986() -> None:
    # RFC 3986 section 5.4.2's abnormal examples, on paths, with "//" collapsed as AWS does.
    assert remove_dot_segments("/a/b/c/./../../g") == "/a/g"
    assert remove_dot_segments("/mid/content=5/../6") == "/mid/6"
    assert remove_dot_segments("//a//b/") == "/a/b/"


def test_the_query_plus_is_a_plus_and_bare_names_have_empty_values() -> None:
    assert canonical_query("b=x+y&a&c=&&d=%2f") == "a=&b=x%2By&c=&d=%2F"
    assert canonical_query("") == ""
    assert canonical_query("k=%FF") == "k=%FF"  # not UTF-8: signed as sent


def test_the_time_may_be_in_any_zone_but_must_be_aware() -> None:
    elsewhere = WHEN.astimezone(timezone(timedelta(hours=-7)))
    assert _sts_sign(CREDENTIALS, when=elsewhere) == _sts_sign(CREDENTIALS)
    with pytest.raises(ValueError, match="aware"):
        _sts_sign(CREDENTIALS, when=datetime(2015, 8, 30, 12, 36))


@pytest.mark.parametrize("name", ["Authorization", "x-amz-date", "X-Amz-Security-Token"])
def test_a_header_the_signer_sets_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=f"sets the {name} header"):
        _sts_sign(AwsCredentials("AKID", "secret", "token"), headers=[(name, "x")])


def test_neither_face_loads_the_signer() -> None:
    """Nothing exports it yet: ``import imagecheck.authn`` must not pay for it."""
    code = (
        "import sys, imagecheck, imagecheck.authn\n"
        "print('imagecheck.authn.cloud._sigv4' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
