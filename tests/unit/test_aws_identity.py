"""Which AWS identity the environment names (the SDKs' chain order, decided with no request and no
file read), and the local inputs each link refuses before any request: token files, the
credentials agent's URL, the role and session names, the keys themselves."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._aws import AwsSource, find_identity
from imagecheck.authn.cloud._hosts import CloudRegistry, cloud_registry
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP
from imagecheck.errors import CredentialsError
from tests.support.cloudstandin import RecordingHTTP

REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
ROLE = "arn:aws:iam::123456789012:role/image-puller"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.the-web-identity-token.c2ln"
KEYS = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7"}
IRSA = {"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
        "AWS_ROLE_ARN": ROLE}  # fmt: skip
POD_IDENTITY = {
    "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE":
        "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token",
}  # fmt: skip
ECS = {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/0c8d-task"}


def registry(host: str = REGISTRY) -> CloudRegistry:
    found = cloud_registry(host)
    assert found is not None
    return found


PLAUSIBLE = [
    ("nothing", {}, None),
    ("empty values", dict.fromkeys((*KEYS, *IRSA, *POD_IDENTITY), ""), None),
    ("blank values", dict.fromkeys((*KEYS, *IRSA), "  "), None),
    ("a key id alone", {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE"}, None),
    ("a secret alone", {"AWS_SECRET_ACCESS_KEY": "x"}, None),
    ("a role alone", {"AWS_ROLE_ARN": ROLE}, None),
    ("a session token alone", {"AWS_SESSION_TOKEN": "x"}, None),
    ("an agent token alone", {"AWS_CONTAINER_AUTHORIZATION_TOKEN": "x"}, None),
    ("a region and endpoints", {"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "https://x"}, None),
    ("static keys", KEYS, "access key ...MPLE from AWS_ACCESS_KEY_ID"),
    ("static keys first", {**IRSA, **POD_IDENTITY, **KEYS},
     "access key ...MPLE from AWS_ACCESS_KEY_ID"),
    ("IRSA", IRSA, f"role {ROLE} (IRSA, token file {IRSA['AWS_WEB_IDENTITY_TOKEN_FILE']})"),
    ("IRSA before Pod Identity", {**POD_IDENTITY, **IRSA}, f"role {ROLE} (IRSA"),
    ("IRSA without its role", {"AWS_WEB_IDENTITY_TOKEN_FILE": "/t"},
     "role (no AWS_ROLE_ARN) (IRSA, token file /t)"),
    ("EKS Pod Identity", POD_IDENTITY,
     "the EKS Pod Identity agent at http://169.254.170.23/v1/credentials "
     "(AWS_CONTAINER_CREDENTIALS_FULL_URI)"),
    ("EKS Pod Identity, IPv6", {"AWS_CONTAINER_CREDENTIALS_FULL_URI":
                                "http://[fd00:ec2::23]/v1/credentials"},
     "the EKS Pod Identity agent at http://[fd00:ec2::23]/v1/credentials"),
    ("ECS", ECS, "the ECS task role agent at http://169.254.170.2/v2/credentials/0c8d-task "
     "(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)"),
    ("ECS's relative URI wins", {**POD_IDENTITY, **ECS}, "the ECS task role agent"),
    ("another agent", {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9911/creds"},
     "the container credentials agent at http://127.0.0.1:9911/creds"),
]  # fmt: skip


@pytest.mark.parametrize(("env", "expected"), [p[1:] for p in PLAUSIBLE],
                         ids=[p[0] for p in PLAUSIBLE])  # fmt: skip
def test_the_first_link_of_the_sdks_chain_the_environment_names(
    env: dict[str, str], expected: str | None
) -> None:
    found = AwsSource(env).identity(registry())
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.startswith(expected)
        assert "wJalr" not in found  # never the secret


def test_deciding_reads_no_file(tmp_path: Path) -> None:
    """A token file that does not exist is the flow's problem, named then: deciding whether an
    identity is plausible reads the environment only."""
    env = {"AWS_WEB_IDENTITY_TOKEN_FILE": str(tmp_path / "absent"), "AWS_ROLE_ARN": ROLE}
    assert AwsSource(env).identity(registry()) is not None
    assert find_identity(env) is not None


AGENT_ANSWER = CloudAnswer(
    200,
    httpx.Headers({"Content-Type": "application/json"}),
    b'{"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "s3cr3t", "Token": "session-token", '
    b'"AccountId": "123456789012", "Expiration": "2030-01-01T00:00:00Z"}',
)


def recording() -> RecordingHTTP:
    """A transport that answers every request as the agent does and records what was sent."""
    return RecordingHTTP(answer=AGENT_ANSWER)


def session_of(env: dict[str, str], http: CloudHTTP) -> object:
    found = find_identity(env)
    assert found is not None
    return asyncio.run(found.session(registry(), http, Deadline.after(10)))


AGENT_URLS = [
    "https://agent.example/creds", "https://10.0.0.1/creds", "http://127.0.0.1:80/x",
    "http://127.5.6.7/", "http://[::1]:8080/creds", "http://localhost:8080/creds",
    "http://169.254.170.2/v2/credentials", "http://169.254.170.23/v1/credentials",
    "http://[fd00:ec2::23]/v1/credentials", "http://[fd00:ec2:0:0:0:0:0:23]/v1/credentials",
]  # fmt: skip


@pytest.mark.parametrize("url", AGENT_URLS)
def test_an_agent_is_https_or_loopback_or_the_ecs_or_eks_agent(url: str) -> None:
    http = recording()
    session_of({"AWS_CONTAINER_CREDENTIALS_FULL_URI": url}, http)
    [(method, sent_to, headers)] = http.sent
    assert (method, sent_to) == ("GET", url)
    assert "Authorization" not in headers  # no token named: none sent


REFUSED_URLS = [
    "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/creds", "http://example.com/x",
    "http://localhost.attacker.example/x", "http://127.0.0.1.nip.io/x", "ftp://127.0.0.1/x",
    "/v1/credentials", "http://[fd00:ec2::24]/x", "https:///x",
]  # fmt: skip


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_plain_http_elsewhere_is_refused_before_any_request(url: str) -> None:
    http = recording()
    with pytest.raises(CredentialsError) as caught:
        session_of({"AWS_CONTAINER_CREDENTIALS_FULL_URI": url}, http)
    assert str(caught.value).startswith("AWS_CONTAINER_CREDENTIALS_FULL_URI ")
    assert "\n" not in str(caught.value)
    assert http.sent == []


def test_a_relative_uri_must_be_a_path() -> None:
    http = recording()
    with pytest.raises(CredentialsError, match=r"RELATIVE_URI .* must start with '/'"):
        session_of({"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "@evil.example/x"}, http)
    assert http.sent == []


def test_the_agent_token_from_the_variable_when_no_file_names_one() -> None:
    http = recording()
    env = {**POD_IDENTITY, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "Basic abcd"}
    del env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"]
    session_of(env, http)
    [(_, _, headers)] = http.sent
    assert headers["Authorization"] == "Basic abcd"
    env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "Basic abcd\r\nX-Injected: 1"
    with pytest.raises(CredentialsError) as caught:
        session_of(env, http)
    assert str(caught.value) == (
        "AWS_CONTAINER_AUTHORIZATION_TOKEN contains a character an HTTP header cannot carry "
        "(non-ASCII, or control)"
    )


def _fifo(path: Path) -> None:
    os.mkfifo(path)


BAD_FILES = [
    ("missing", None, "does not exist"),
    ("fifo", _fifo, "a FIFO, not a regular file"),
    ("directory", lambda p: p.mkdir(), "a directory, not a regular file"),
    ("huge", lambda p: p.write_bytes(b"x" * (64 * 1024 + 1)), "larger than 64 KiB"),
    ("empty", lambda p: p.write_text("\n"), "is empty"),
    ("not utf-8", lambda p: p.write_bytes(b"\xff" + TOKEN.encode()), "is not UTF-8 text"),
    ("two tokens", lambda p: p.write_text(f"{TOKEN} {TOKEN}"),
     "the token contains whitespace or a control character (a trailing newline?)"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "problem"), [b[1:] for b in BAD_FILES],
                         ids=[b[0] for b in BAD_FILES])  # fmt: skip
def test_a_bad_web_identity_token_file_is_one_line_naming_it_never_its_content(
    tmp_path: Path, make: object, problem: str
) -> None:
    path = tmp_path / "token"
    if callable(make):
        make(path)
    http = recording()
    with pytest.raises(CredentialsError) as caught:
        session_of({"AWS_WEB_IDENTITY_TOKEN_FILE": str(path), "AWS_ROLE_ARN": ROLE}, http)
    message = str(caught.value)
    assert "AWS_WEB_IDENTITY_TOKEN_FILE" in message and str(path) in message
    assert problem in message
    assert "\n" not in message and TOKEN not in message and "xxxx" not in message
    assert http.sent == []


@pytest.mark.parametrize("token", ["token\x00tail", "caf\u00e9"], ids=["nul", "non-ascii"])
def test_a_bad_agent_token_file_is_named_too(tmp_path: Path, token: str) -> None:
    path = tmp_path / "eks-pod-identity-token"
    path.write_text(token, encoding="utf-8")
    env = {**POD_IDENTITY, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(path)}
    with pytest.raises(CredentialsError) as caught:
        session_of(env, recording())
    assert str(caught.value) == (
        f"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {path}: the token contains a character an "
        "HTTP header cannot carry (non-ASCII, or control)"
    )


NAMES = [
    ({"AWS_WEB_IDENTITY_TOKEN_FILE": "/t"},
     "AWS_WEB_IDENTITY_TOKEN_FILE is set, but not AWS_ROLE_ARN, the role to assume"),
    ({**IRSA, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:user/bob"},
     "AWS_ROLE_ARN 'arn:aws:iam::123456789012:user/bob' is not the ARN of an IAM role"),
    ({**IRSA, "AWS_ROLE_ARN": "role/x"}, "AWS_ROLE_ARN 'role/x' is not the ARN of an IAM role"),
    ({**IRSA, "AWS_ROLE_SESSION_NAME": "has space"},
     "AWS_ROLE_SESSION_NAME 'has space' is not a session name STS takes (2 to 64 of letters, "
     "digits and +=,.@_-)"),
    ({**IRSA, "AWS_REGION": "mars"}, "AWS_REGION 'mars' is not an AWS region"),
    ({**IRSA, "AWS_ENDPOINT_URL_STS": "http://sts.example"},
     "AWS_ENDPOINT_URL_STS 'http://sts.example' must be an https:// URL with a host"),
    ({**KEYS, "AWS_SESSION_TOKEN": "tok\nen"},
     "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN: the session token "
     "contains whitespace or a control character"),
]  # fmt: skip


@pytest.mark.parametrize(("env", "message"), NAMES)
def test_a_bad_variable_is_one_line_before_any_request(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    if env.get("AWS_WEB_IDENTITY_TOKEN_FILE", "/t") != "/t":
        env = {**env, "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file)}
    http = recording()
    with pytest.raises(CredentialsError) as caught:
        asyncio.run(AwsSource(env).token(registry(), http, Deadline.after(10)))
    assert str(caught.value) == message
    assert http.sent == []
