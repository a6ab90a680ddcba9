"""Workload identity federation (``GOOGLE_APPLICATION_CREDENTIALS`` naming an
``external_account``) against the Google STS and IAM Credentials stand-ins over real HTTPS:
what each endpoint receives, the subject token read anew for each flow, every local input that
cannot be used a one-line ``CredentialsError`` naming its file (never its secret), every
endpoint failure a ``CloudAuthError`` of the right kind."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._google import source
from imagecheck.authn.cloud._http import CloudHTTP
from imagecheck.authn.cloud._keychain import CloudToken
from imagecheck.errors import CloudAuthError, CredentialsError
from tests.support.aio import sync
from tests.support.cloudnet import make_cloud_tls
from tests.support.cloudstandin import Fault, RecordingHTTP, Reply
from tests.support.googlecloud import (
    ACCESS_TOKEN_TYPE,
    AUDIENCE,
    CLOUD_PLATFORM,
    JWT_TYPE,
    SERVICE_ACCOUNT,
    TOKEN_EXCHANGE,
    GoogleSTS,
    IAMCredentials,
    cloud_http,
    google_error,
    google_host,
    json_reply,
    oauth_error,
    subject_jwt,
    write_external_account,
)

REGISTRY = google_host("europe-west1-docker.pkg.dev")


@pytest.fixture(scope="module")
def endpoints(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GoogleSTS, IAMCredentials, Path]]:
    tls = make_cloud_tls(tmp_path_factory.mktemp("pki"), ["sts.googleapis.com"])
    with GoogleSTS(tls.server_context()) as sts, IAMCredentials(tls.server_context(), sts) as iam:
        yield sts, iam, tls.ca_file


@pytest.fixture
def sts(endpoints: tuple[GoogleSTS, IAMCredentials, Path]) -> GoogleSTS:
    endpoints[0].reset()
    return endpoints[0]


@pytest.fixture
def iam(endpoints: tuple[GoogleSTS, IAMCredentials, Path]) -> IAMCredentials:
    endpoints[1].reset()
    return endpoints[1]


@pytest.fixture
def http(endpoints: tuple[GoogleSTS, IAMCredentials, Path]) -> CloudHTTP:
    return cloud_http(endpoints[2], timeout=2)


class Pod:
    """A pod's files: the projected ServiceAccount token and the credential configuration."""

    def __init__(self, tmp_path: Path, sts: GoogleSTS, **config: Any) -> None:
        self.token_file = tmp_path / "token"
        self.subject = subject_jwt()
        self.token_file.write_text(self.subject)
        self.config = write_external_account(
            tmp_path / "gcp" / "config.json",
            token_url=sts.token_url,
            token_file=self.token_file,
            **config,
        )

    async def token(self, http: CloudHTTP, seconds: float = 10) -> CloudToken:
        src = source({"GOOGLE_APPLICATION_CREDENTIALS": str(self.config)}, Path("/nonexistent"))
        return await src.token(REGISTRY, http, Deadline.after(seconds))


@sync
async def test_sts_alone(tmp_path: Path, sts: GoogleSTS, http: CloudHTTP) -> None:
    pod = Pod(tmp_path, sts)
    found = await pod.token(http)
    creds = found.credentials
    assert (creds.username, creds.password) == ("oauth2accesstoken", sts.access_token)
    assert found.lifetime == 3599
    assert creds.source.startswith(
        f"the pod's Google identity federated from {pod.token_file} (workload identity "
        f"federation, GOOGLE_APPLICATION_CREDENTIALS {pod.config}), which needs "
        "roles/artifactregistry.reader"
    )
    (request,) = sts.requests
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert "authorization" not in request.headers
    assert request.form == {
        "grant_type": TOKEN_EXCHANGE,
        "audience": AUDIENCE,
        "scope": CLOUD_PLATFORM,
        "requested_token_type": ACCESS_TOKEN_TYPE,
        "subject_token": pod.subject,
        "subject_token_type": JWT_TYPE,
    }


@sync
async def test_impersonation(
    tmp_path: Path, sts: GoogleSTS, iam: IAMCredentials, http: CloudHTTP
) -> None:
    pod = Pod(tmp_path, sts, service_account_impersonation_url=iam.impersonation_url())
    started = time.time()
    found = await pod.token(http)
    assert found.credentials.password == iam.access_token
    assert 3590 <= found.lifetime <= 3600 + time.time() - started
    assert found.credentials.source.startswith(
        f"the pod's Google identity {SERVICE_ACCOUNT} (impersonated through workload identity "
        f"federation, GOOGLE_APPLICATION_CREDENTIALS {pod.config})"
    )
    (request,) = iam.requests
    assert request.headers["authorization"] == f"Bearer {sts.access_token}"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.body) == {"scope": [CLOUD_PLATFORM], "lifetime": "3600s"}


@sync
async def test_impersonation_lifetime_from_the_configuration(
    tmp_path: Path, sts: GoogleSTS, iam: IAMCredentials, http: CloudHTTP
) -> None:
    pod = Pod(
        tmp_path,
        sts,
        service_account_impersonation_url=iam.impersonation_url(),
        service_account_impersonation={"token_lifetime_seconds": 1200},
    )
    found = await pod.token(http)
    assert 1190 <= found.lifetime <= 1200
    assert json.loads(iam.requests[0].body)["lifetime"] == "1200s"


@sync
async def test_the_token_file_is_read_for_each_flow(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP
) -> None:
    pod = Pod(tmp_path, sts)
    await pod.token(http)
    rotated = subject_jwt(subject="system:serviceaccount:ci:puller", lifetime=7200)
    pod.token_file.write_text(rotated)  # the kubelet rotates the projected token
    await pod.token(http)
    assert sts.subjects() == [pod.subject, rotated]


@pytest.mark.parametrize(
    ("content", "form"),
    [("{subject}\n", None), ("  {subject}\r\n", {"type": "text"}),
     ('{{"id_token": "{subject}"}}', {"type": "json", "subject_token_field_name": "id_token"})],
    ids=["trailing-newline", "text", "json"],
)  # fmt: skip
@sync
async def test_subject_token_formats(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP, content: str, form: dict[str, str] | None
) -> None:
    pod = Pod(tmp_path, sts)
    config = json.loads(pod.config.read_text())
    config["credential_source"]["format"] = form
    pod.config.write_text(json.dumps(config))
    pod.token_file.write_text(content.format(subject=pod.subject))
    await pod.token(http)
    assert sts.subjects() == [pod.subject]


SECRET = "eyJhbGciOiJub25lIn0.c2VjcmV0LXN1YmplY3Q.c2lnbmF0dXJl"


def _bad_token_file(kind: str, path: Path) -> dict[str, str] | None:
    """Make the token file at ``path`` bad in the way ``kind`` says; the format to use."""
    if kind == "missing":
        path.unlink()
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "directory":
        path.unlink()
        path.mkdir()
    elif kind == "huge":
        path.write_text(SECRET + "A" * 70_000)
    elif kind == "empty":
        path.write_text(" \n")
    elif kind == "not-utf8":
        path.write_bytes(SECRET.encode() + b"\xff\xfe")
    elif kind == "inner-newline":
        path.write_text(SECRET + "\n" + SECRET)
    elif kind.startswith("json"):
        body = {"json-not-json": SECRET, "json-no-field": json.dumps({"other": SECRET}),
                "json-not-string": json.dumps({"id_token": [SECRET]})}[kind]  # fmt: skip
        path.write_text(body)
        return {"type": "json", "subject_token_field_name": "id_token"}
    return None


@pytest.mark.parametrize(
    ("kind", "said"),
    [("missing", "does not exist"),
     ("fifo", "cannot use the subject token file"),
     ("directory", "cannot use the subject token file"),
     ("huge", "larger than 64 KiB"),
     ("empty", "holds no token"),
     ("not-utf8", "is not UTF-8 text"),
     ("inner-newline", "the token contains whitespace or a control character"),
     ("json-not-json", "is not valid JSON"),
     ("json-no-field", "has no string 'id_token'"),
     ("json-not-string", "has no string 'id_token'")],
)  # fmt: skip
@sync
async def test_a_subject_token_file_that_cannot_be_used(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP, kind: str, said: str
) -> None:
    pod = Pod(tmp_path, sts)
    form = _bad_token_file(kind, pod.token_file)
    if form is not None:
        config = json.loads(pod.config.read_text())
        config["credential_source"]["format"] = form
        pod.config.write_text(json.dumps(config))
    with pytest.raises(CredentialsError) as caught:
        await pod.token(http, seconds=5)
    message = str(caught.value)
    assert said in message
    assert str(pod.token_file) in message
    assert "\n" not in message
    assert SECRET not in message and pod.subject not in message
    assert sts.requests == []


PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END"


def _config_cases() -> list[Any]:
    https = "https://sts.example.test/v1/token"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("service-account-key", {"type": "service_account", "private_key": PRIVATE_KEY},
         "type 'service_account' is not supported"),
        ("authorized-user", {"type": "authorized_user", "refresh_token": PRIVATE_KEY},
         "type 'authorized_user' is not supported"),
        ("no-type", {"type": None}, "type 'missing' is not supported"),
        ("url-source", {"credential_source": {"url": "http://169.254.169.254/token"}},
         "credential_source url is not supported"),
        ("executable-source", {"credential_source": {"executable": {"command": "x"}}},
         "credential_source executable is not supported"),
        ("aws-source", {"credential_source": {"environment_id": "aws1", "file": "/x"}},
         "credential_source environment_id is not supported"),
        ("certificate-source", {"credential_source": {"certificate": {}}},
         "credential_source certificate is not supported"),
        ("no-file", {"credential_source": {}}, "a credential_source without file"),
        ("source-not-object", {"credential_source": "/token"}, "credential_source is not an"),
        ("workforce-client", {"client_id": "id", "client_secret": PRIVATE_KEY},
         "client_id, client_secret (a workforce pool's) is not supported"),
        ("workforce-project", {"workforce_pool_user_project": "p"}, "workforce_pool_user_project"),
        ("no-audience", {"audience": None}, "audience is missing or not a string"),
        ("no-subject-type", {"subject_token_type": 7}, "subject_token_type is missing"),
        ("http-token-url", {"token_url": "http://sts.example.test/v1/token"},
         "token_url must be an https URL with a host"),
        ("userinfo-token-url", {"token_url": f"https://me:{PRIVATE_KEY[:20]}@sts.example.test/"},
         "token_url must be an https URL with a host"),
        ("no-host-token-url", {"token_url": "https:///v1/token"}, "token_url must be an https"),
        ("http-impersonation", {"service_account_impersonation_url": https.replace("s:", ":")},
         "service_account_impersonation_url must be an https URL"),
        ("short-lifetime", {"service_account_impersonation": {"token_lifetime_seconds": 100}},
         "token_lifetime_seconds must be an integer from 600 to 43200"),
        ("long-lifetime", {"service_account_impersonation": {"token_lifetime_seconds": 50000}},
         "token_lifetime_seconds must be an integer"),
        ("text-lifetime", {"service_account_impersonation": {"token_lifetime_seconds": "3600"}},
         "token_lifetime_seconds must be an integer"),
        ("xml-format", {"credential_source": {"file": "/t", "format": {"type": "xml"}}},
         'format.type must be "text" or "json"'),
        ("json-no-field", {"credential_source": {"file": "/t", "format": {"type": "json"}}},
         "needs subject_token_field_name"),
    ]  # fmt: skip
    return [pytest.param(extra, said, id=name) for name, extra, said in cases]


@pytest.mark.parametrize(("extra", "said"), _config_cases())
@sync
async def test_a_configuration_that_cannot_be_used(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP, extra: dict[str, Any], said: str
) -> None:
    pod = Pod(tmp_path, sts)
    config = json.loads(pod.config.read_text())
    config.update(extra)
    pod.config.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    with pytest.raises(CredentialsError) as caught:
        await pod.token(http)
    message = str(caught.value)
    assert message.startswith(f"GOOGLE_APPLICATION_CREDENTIALS {pod.config}: ")
    assert said in message
    assert "\n" not in message
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in message and "BEGIN PRIVATE" not in message
    assert sts.requests == []


@pytest.mark.parametrize(
    ("kind", "said"),
    [("missing", "does not exist"),
     ("fifo", "cannot use GOOGLE_APPLICATION_CREDENTIALS"),
     ("huge", "larger than 64 KiB"),
     ("not-json", "is not valid JSON"),
     ("array", "is not a JSON object")],
)  # fmt: skip
@sync
async def test_a_configuration_file_that_cannot_be_read(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP, kind: str, said: str
) -> None:
    pod = Pod(tmp_path, sts)
    pod.config.unlink()
    if kind == "fifo":
        os.mkfifo(pod.config)
    elif kind == "huge":
        pod.config.write_text(json.dumps({"type": "external_account", "pad": "x" * 70_000}))
    elif kind == "not-json":
        pod.config.write_text("{'type': 'external_account'}")
    elif kind == "array":
        pod.config.write_text("[]")
    with pytest.raises(CredentialsError) as caught:
        await pod.token(http)
    assert said in str(caught.value)
    assert str(pod.config) in str(caught.value)
    assert sts.requests == []


@sync
async def test_the_default_token_url_is_google_sts(tmp_path: Path, sts: GoogleSTS) -> None:
    pod = Pod(tmp_path, sts)
    config = json.loads(pod.config.read_text())
    del config["token_url"]
    pod.config.write_text(json.dumps(config))
    http = RecordingHTTP()
    with pytest.raises(CloudAuthError):
        await pod.token(http)
    assert [sent[:2] for sent in http.sent] == [("POST", "https://sts.googleapis.com/v1/token")]


def _sts_failures() -> list[Any]:
    cases: list[tuple[str, Fault, bool, str]] = [
        ("429", Fault(reply=google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.")), True,
         "HTTP 429: RESOURCE_EXHAUSTED: Quota exceeded."),
        ("500", Fault(reply=oauth_error(500, "server_error", "Internal error.")), True,
         "HTTP 500: server_error"),
        ("503", Fault(reply=Reply(503, b"<html>unavailable</html>")), True, "HTTP 503"),
        ("401", Fault(reply=oauth_error(401, "invalid_client", "Unknown client.")), False,
         "HTTP 401: invalid_client: Unknown client."),
        ("malformed", Fault(reply=Reply(200, b'{"access_token": ')), False, "not valid JSON"),
        ("no-expiry", Fault(reply=json_reply(200, {"access_token": "ya29.x"})), False,
         "no usable expires_in"),
        ("oversized", Fault(size=70_000), False, "larger than 65536 bytes"),
        ("slow", Fault(delay=1.5), True, "did not answer within 0.5s"),
    ]  # fmt: skip
    return [pytest.param(f, t, s, id=name) for name, f, t, s in cases]


@pytest.mark.parametrize(("fault", "temporary", "said"), _sts_failures())
@sync
async def test_sts_failures(
    tmp_path: Path,
    sts: GoogleSTS,
    endpoints: tuple[GoogleSTS, IAMCredentials, Path],
    fault: Fault,
    temporary: bool,
    said: str,
) -> None:
    pod = Pod(tmp_path, sts)
    sts.fail_next(fault)
    with pytest.raises(CloudAuthError) as caught:
        await pod.token(cloud_http(endpoints[2], timeout=0.5))
    message = str(caught.value)
    assert caught.value.temporary is temporary
    assert said in message
    assert f"Google STS at {sts.token_url}" in message
    assert pod.subject not in message and "ya29.x" not in message


@sync
async def test_an_expired_subject_token_is_refused_by_sts(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP
) -> None:
    pod = Pod(tmp_path, sts)
    expired = subject_jwt(lifetime=-60)
    pod.token_file.write_text(expired)
    with pytest.raises(CloudAuthError) as caught:
        await pod.token(http)
    assert not caught.value.temporary
    assert str(caught.value).startswith(
        f"Google STS at {sts.token_url} gave no token for the subject token in "
        f"{pod.token_file} (audience {AUDIENCE}): HTTP 400: invalid_grant: ID Token issued at "
    )
    assert expired not in str(caught.value)


@sync
async def test_another_pools_audience_is_refused(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP
) -> None:
    pod = Pod(tmp_path, sts, audience=AUDIENCE.replace("imagecheck-pool", "other-pool"))
    with pytest.raises(CloudAuthError) as caught:
        await pod.token(http)
    assert "HTTP 400: invalid_target: The target service" in str(caught.value)
    assert not caught.value.temporary


@sync
async def test_sts_echoing_the_subject_token_is_redacted(
    tmp_path: Path, sts: GoogleSTS, http: CloudHTTP
) -> None:
    pod = Pod(tmp_path, sts)
    sts.fail_next(Fault(reply=oauth_error(400, "invalid_grant", f"bad token {pod.subject}")))
    with pytest.raises(CloudAuthError) as caught:
        await pod.token(http)
    assert "bad token [redacted]" in str(caught.value)
    assert pod.subject not in str(caught.value)


@sync
async def test_impersonation_refused_names_the_account_and_the_role(
    tmp_path: Path, sts: GoogleSTS, iam: IAMCredentials, http: CloudHTTP
) -> None:
    other = "other@imagecheck-test.iam.gserviceaccount.com"
    pod = Pod(tmp_path, sts, service_account_impersonation_url=iam.impersonation_url(other))
    with pytest.raises(CloudAuthError) as caught:
        await pod.token(http)
    message = str(caught.value)
    assert not caught.value.temporary
    assert message.startswith(f"IAM Credentials at {iam.impersonation_url(other)} did not let ")
    assert f"impersonate {other} (HTTP 403: PERMISSION_DENIED: Permission " in message
    assert message.endswith("the federated identity needs roles/iam.workloadIdentityUser on it")
    assert sts.access_token not in message


def _iam_failures() -> list[Any]:
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    cases: list[tuple[str, Fault, bool, str]] = [
        ("429", Fault(reply=google_error(429, "RESOURCE_EXHAUSTED", "Slow down.")), True,
         "HTTP 429: RESOURCE_EXHAUSTED"),
        ("503", Fault(reply=google_error(503, "UNAVAILABLE", "Try again.")), True, "HTTP 503"),
        ("401", Fault(reply=google_error(401, "UNAUTHENTICATED", "Bad token.")), False,
         "HTTP 401: UNAUTHENTICATED"),
        ("no-token", Fault(reply=json_reply(200, {"expireTime": later})), False,
         "answered no accessToken"),
        ("no-expiry", Fault(reply=json_reply(200, {"accessToken": "ya29.x"})), False,
         "no usable expireTime"),
        ("bad-expiry", Fault(reply=json_reply(200, {"accessToken": "ya29.x",
                                                    "expireTime": "tomorrow"})), False,
         "no usable expireTime"),
        ("naive-expiry", Fault(reply=json_reply(200, {"accessToken": "ya29.x",
                                                      "expireTime": later[:-1]})), False,
         "no usable expireTime"),
        ("expired", Fault(reply=json_reply(200, {"accessToken": "ya29.x",
                                                 "expireTime": "2020-01-01T00:00:00Z"})), False,
         "a token that has already expired"),
        ("oversized", Fault(size=70_000), False, "larger than 65536 bytes"),
    ]  # fmt: skip
    return [pytest.param(f, t, s, id=name) for name, f, t, s in cases]


@pytest.mark.parametrize(("fault", "temporary", "said"), _iam_failures())
@sync
async def test_impersonation_failures(
    tmp_path: Path,
    sts: GoogleSTS,
    iam: IAMCredentials,
    http: CloudHTTP,
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
    temporary: bool,
    said: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    pod = Pod(tmp_path, sts, service_account_impersonation_url=iam.impersonation_url())
    iam.fail_next(fault)
    with pytest.raises(CloudAuthError) as caught:
        await pod.token(http)
    message = str(caught.value)
    assert caught.value.temporary is temporary
    assert said in message
    assert f"IAM Credentials at {iam.impersonation_url()}" in message
    for secret in (sts.access_token, "ya29.x", pod.subject):
        assert secret not in message and secret not in caplog.text
