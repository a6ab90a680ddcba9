"""The metadata server flow (GCE, GKE Workload Identity) against the metadata server stand-in
over real HTTP: the token and the email asked with ``Metadata-Flavor: Google``, the answer's
own ``Metadata-Flavor`` required, ``GCE_METADATA_HOST`` as the only override, every failure a
one-line error of the right kind that never holds the token."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._google import GoogleSource, source
from imagecheck.authn.cloud._http import CloudHTTP
from imagecheck.authn.cloud._keychain import CloudKeychain, CloudToken
from imagecheck.errors import CloudAuthError, CredentialsError, DeadlineExceeded
from imagecheck.reference import parse_reference
from tests.support.aio import sync
from tests.support.cloudstandin import Fault, RecordingHTTP, Reply
from tests.support.googlecloud import (
    EMAIL_PATH,
    SERVICE_ACCOUNT,
    TOKEN_PATH,
    MetadataServer,
    cloud_http,
    google_host,
    json_reply,
    metadata_reply,
)

REGISTRY = google_host("us-docker.pkg.dev")
GKE = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}


@pytest.fixture(scope="module")
def metadata_server() -> Iterator[MetadataServer]:
    with MetadataServer() as server:
        yield server


@pytest.fixture
def metadata(metadata_server: MetadataServer) -> MetadataServer:
    metadata_server.reset()
    return metadata_server


def google(metadata: MetadataServer, tmp_path: Path, **env: str) -> GoogleSource:
    return source({"GCE_METADATA_HOST": metadata.host, **env}, tmp_path)


async def token(
    src: GoogleSource, http: CloudHTTP | None = None, seconds: float = 10
) -> CloudToken:
    return await src.token(REGISTRY, http or cloud_http(), Deadline.after(seconds))


@sync
async def test_the_token_and_who_it_is(metadata: MetadataServer, tmp_path: Path) -> None:
    found = await token(google(metadata, tmp_path, **GKE))
    creds = found.credentials
    assert (creds.username, creds.password) == ("oauth2accesstoken", metadata.access_token)
    assert found.lifetime == 3599
    assert creds.source.startswith(
        f"the pod's Google identity {SERVICE_ACCOUNT} (GKE metadata server at "
        f"http://{metadata.host}), which needs roles/artifactregistry.reader on the repository"
    )
    assert metadata.access_token not in repr(found)
    token_request, email_request = metadata.requests
    assert (token_request.method, token_request.path) == ("GET", TOKEN_PATH)
    assert email_request.path == EMAIL_PATH
    assert all(r.headers["metadata-flavor"] == "Google" for r in metadata.requests)
    assert token_request.query == {}  # the account's own scopes: no scopes asked


@sync
async def test_a_vm_is_worded_as_a_vm(metadata: MetadataServer, tmp_path: Path) -> None:
    found = await token(google(metadata, tmp_path))
    assert found.credentials.source.startswith(
        f"the VM's Google identity {SERVICE_ACCOUNT} (GCE metadata server at"
    )


@pytest.mark.parametrize(
    "reply",
    [Reply(500, b"oops"), Reply(200, b"a b\n"), Reply(200, b"x@y", {"Content-Type": "text/plain"})],
    ids=["500", "not-an-email", "no-flavor"],
)
@sync
async def test_no_email_costs_the_name_not_the_token(
    metadata: MetadataServer, tmp_path: Path, reply: Reply
) -> None:
    metadata.fail_next(Fault(), times=1)  # the token answered as usual
    metadata.fail_next(Fault(reply=reply))
    found = await token(google(metadata, tmp_path, **GKE))
    assert found.credentials.password == metadata.access_token
    assert found.credentials.source.startswith("the pod's default Google service account (GKE")


def token_body(**fields: object) -> bytes:
    body = {"access_token": "ya29.answered", "expires_in": 3599, "token_type": "Bearer"}
    body.update(fields)
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def flavored(body: bytes) -> Reply:
    return metadata_reply(200, body, "application/json")


@pytest.mark.parametrize(
    ("fault", "temporary", "said"),
    [
        (Fault(reply=metadata_reply(403, b"Forbidden")), False, "HTTP 403: Forbidden"),
        (Fault(reply=metadata_reply(429, b"Too many requests")), True, "HTTP 429"),
        (Fault(reply=metadata_reply(500, b"Internal error")), True, "HTTP 500"),
        (Fault(reply=metadata_reply(503, b"")), True, "HTTP 503"),
        (Fault(reply=json_reply(200, {"access_token": "ya29.x", "expires_in": 60})), False,
         "without Metadata-Flavor: Google, so it is not the metadata server"),
        (Fault(reply=Reply(302, b"", {"Location": "http://evil.test/"})), False, "redirect"),
        (Fault(reply=flavored(b"{not json")), False, "is not valid JSON"),
        (Fault(reply=flavored(b"[]")), False, "is not a JSON object"),
        (Fault(reply=flavored(token_body(access_token=None))), False, "answered no access_token"),
        (Fault(reply=flavored(token_body(access_token="ya29.a\nb"))), False, "cannot be sent"),
        (Fault(reply=flavored(token_body(expires_in=0))), False, "no usable expires_in"),
        (Fault(reply=flavored(token_body(expires_in="soon"))), False, "no usable expires_in"),
        (Fault(reply=flavored(token_body(token_type="MAC"))), False, "other than Bearer"),
        (Fault(size=70_000), False, "larger than 65536 bytes"),
        (Fault(delay=1.5), True, "did not answer within 0.5s"),
    ],
    ids=[
        "403", "429", "500", "503", "no-flavor", "redirect", "malformed", "not-object",
        "no-token", "token-with-newline", "expired", "expires-in-text", "token-type",
        "oversized", "slow",
    ],
)  # fmt: skip
@sync
async def test_failures(
    metadata: MetadataServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
    temporary: bool,
    said: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    metadata.fail_next(fault)
    with pytest.raises(CloudAuthError) as caught:
        await token(google(metadata, tmp_path), cloud_http(timeout=0.5))
    message = str(caught.value)
    assert caught.value.temporary is temporary
    assert said in message
    assert f"metadata server at http://{metadata.host}" in message
    assert "\n" not in message
    for secret in (metadata.access_token, "ya29.answered", "ya29.x", "ya29.a"):
        assert secret not in message and secret not in caplog.text


@pytest.mark.parametrize(
    ("env", "fix"),
    [({}, "attach one to the VM"),
     (GKE, "bind the pod's Kubernetes ServiceAccount to one with Workload Identity")],
    ids=["gce", "gke"],
)  # fmt: skip
@sync
async def test_no_service_account_says_how_to_get_one(
    metadata: MetadataServer, tmp_path: Path, env: dict[str, str], fix: str
) -> None:
    metadata.bound = False
    with pytest.raises(CloudAuthError) as caught:
        await token(google(metadata, tmp_path, **env))
    assert not caught.value.temporary
    assert "has no service account here (HTTP 404: Not Found: no service account" in str(
        caught.value
    )
    assert str(caught.value).endswith(fix)


@sync
async def test_a_gke_refusal_names_the_binding(metadata: MetadataServer, tmp_path: Path) -> None:
    metadata.fail_next(Fault(reply=metadata_reply(403, b"Unable to generate access token")))
    with pytest.raises(CloudAuthError) as caught:
        await token(google(metadata, tmp_path, **GKE))
    assert "roles/iam.workloadIdentityUser" in str(caught.value)


@sync
async def test_an_unreachable_server_is_temporary(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{sock.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(CloudAuthError) as caught:
            await token(source({"GCE_METADATA_HOST": closed}, tmp_path))
    assert caught.value.temporary
    assert f"cannot reach the GCE metadata server at http://{closed}" in str(caught.value)


@sync
async def test_the_deadline_bounds_the_flow(metadata: MetadataServer, tmp_path: Path) -> None:
    metadata.fail_next(Fault(delay=2))
    with pytest.raises(DeadlineExceeded):
        await token(google(metadata, tmp_path), seconds=0.5)


@sync
async def test_the_default_endpoint_is_the_metadata_server_by_name(tmp_path: Path) -> None:
    (tmp_path / "product_name").write_text("Google Compute Engine\n")
    http = RecordingHTTP()
    with pytest.raises(CloudAuthError):
        await token(source({}, tmp_path), http)
    assert [sent[:2] for sent in http.sent] == [
        ("GET", "http://metadata.google.internal/computeMetadata/v1/instance/"
                "service-accounts/default/token")
    ]  # fmt: skip


@pytest.mark.parametrize(
    "host",
    ["[::1]:8080", "metadata.internal.example:80", "10.0.0.1", "169.254.169.254:80"],
)
@sync
async def test_gce_metadata_host_takes_a_host_and_port(tmp_path: Path, host: str) -> None:
    http = RecordingHTTP()
    with pytest.raises(CloudAuthError):
        await token(source({"GCE_METADATA_HOST": host}, tmp_path), http)
    assert [sent[:2] for sent in http.sent] == [("GET", f"http://{host}/computeMetadata/v1/instance/"
                                 "service-accounts/default/token")]  # fmt: skip


@pytest.mark.parametrize(
    "host",
    ["http://10.0.0.1", "10.0.0.1/computeMetadata", "user:s3cr3t@10.0.0.1", "10.0.0.1 x",
     "10.0.0.1:80?x=s3cr3t", "-10.0.0.1", "10.0.0.1:http"],
)  # fmt: skip
@sync
async def test_gce_metadata_host_of_another_shape_is_refused(tmp_path: Path, host: str) -> None:
    http = RecordingHTTP()
    with pytest.raises(CredentialsError) as caught:
        await token(source({"GCE_METADATA_HOST": host}, tmp_path), http)
    assert str(caught.value) == "GCE_METADATA_HOST must be a host or host:port"
    assert http.sent == []


@sync
async def test_through_the_keychain_no_token_in_logs(
    metadata: MetadataServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = [1000.0]
    env = {"GCE_METADATA_HOST": metadata.host}
    keychain = CloudKeychain(env, http=cloud_http(), dmi_dir=tmp_path, clock=lambda: clock[0])
    image = parse_reference("gcr.io/p/app:1")
    (creds,) = await keychain.aresolve(image, Deadline.after(5))
    clock[0] += 3000  # past renewal: the renewal fails, the current token still holds
    metadata.fail_next(Fault(reply=metadata_reply(503, b"")))
    assert await keychain.aresolve(image, Deadline.after(5)) == (creds,)
    assert "renewing the credential for gcr.io failed" in caplog.text
    assert metadata.access_token not in caplog.text
