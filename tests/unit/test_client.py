"""Tests for the registry client through :class:`ImageChecker`, the network faked with respx.

Each test sets up ``registry.test`` as respx routes, runs a check, and asserts on the
:class:`CheckResult` and on what the fake registry *received* (paths, Accept, Authorization,
how many times). Retries use a policy whose ``sleep`` only records the waits.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
import respx

from imagecheck._deadline import Deadline
from imagecheck.authn import Credentials
from imagecheck.authn._credentials import StaticKeychain
from imagecheck.errors import Hint, UsageError
from imagecheck.reference import parse_reference
from imagecheck.registry import ClientOptions, ImageChecker, Platform
from imagecheck.registry._retry import RetryPolicy
from imagecheck.result import CheckResult, Status

REGISTRY = "https://registry.test"
HEAD_URL = f"{REGISTRY}/v2/app/manifests/1.0"
IMAGE = "registry.test/app:1.0"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_V2 = "application/vnd.docker.distribution.manifest.v2+json"
SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+json"
SCHEMA1_SIGNED = "application/vnd.docker.distribution.manifest.v1+prettyjws"
BODY = b'{"schemaVersion":2,"mediaType":"' + OCI_MANIFEST.encode() + b'"}'
BODY_DIGEST = "sha256:" + hashlib.sha256(BODY).hexdigest()
OTHER_DIGEST = "sha256:" + "0" * 64
RETRIES = 3
CREDS = StaticKeychain(Credentials(username="alice", password="pw", source="--username"))

pytestmark = pytest.mark.usefixtures("small_trust_store")


# -- harness -----------------------------------------------------------------------------------


class Sleeps:
    """A no-op async sleep that records the waits."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def checks(
    router: respx.Router,
    images: Sequence[str],
    *,
    sleeps: Sleeps | None = None,
    options: ClientOptions | None = None,
    keychain: StaticKeychain | None = None,
) -> list[CheckResult]:
    async def main() -> list[CheckResult]:
        async with ImageChecker(
            options or ClientOptions(concurrency=16),
            keychain,
            transport=httpx.MockTransport(router.async_handler),
            retry_policy=RetryPolicy(retries=RETRIES, sleep=sleeps or Sleeps(), rng=lambda: 0.0),
        ) as checker:
            items = [(image, parse_reference(image)) for image in images]
            return await checker.check_many(items, Deadline.after(30))

    return asyncio.run(main())


def check(
    router: respx.Router,
    image: str = IMAGE,
    *,
    sleeps: Sleeps | None = None,
    options: ClientOptions | None = None,
    keychain: StaticKeychain | None = None,
) -> CheckResult:
    return checks(router, [image], sleeps=sleeps, options=options, keychain=keychain)[0]


def open_registry(router: respx.Router, base: str = REGISTRY) -> respx.Route:
    return router.get(f"{base}/v2/").respond(
        200, headers={"Docker-Distribution-API-Version": "registry/2.0"}
    )


def manifest_headers(
    digest: str | None = BODY_DIGEST, media_type: str = OCI_MANIFEST, size: int | None = None
) -> dict[str, str]:
    headers = {"Content-Type": media_type}
    if digest is not None:
        headers["Docker-Content-Digest"] = digest
    if size is not None:
        headers["Content-Length"] = str(size)
    return headers


def found() -> httpx.Response:
    return httpx.Response(200, headers=manifest_headers(size=len(BODY)))


def oci_error(status: int, code: str, message: str, **headers: str) -> httpx.Response:
    body = {"errors": [{"code": code, "message": message}]}
    return httpx.Response(status, json=body, headers=headers)


# -- ping and HEAD -----------------------------------------------------------------------------


def test_head_with_every_manifest_type_in_accept(router: respx.Router) -> None:
    pinged = open_registry(router)
    head = router.head(HEAD_URL).mock(return_value=found())
    get = router.get(HEAD_URL)
    result = check(router)
    assert result.status is Status.FOUND
    assert pinged.call_count == 1
    assert head.call_count == 1
    assert not get.called  # HEAD answered; no body fetched
    request = head.calls.last.request
    accepted = [t.strip() for t in request.headers["Accept"].split(",")]
    for media_type in (OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_V2, SCHEMA1, SCHEMA1_SIGNED):
        assert media_type in accepted
    assert request.headers["User-Agent"].startswith("imagecheck/")
    assert "Authorization" not in request.headers


def test_docker_hub_goes_to_registry_1(router: respx.Router) -> None:
    pinged = router.get("https://registry-1.docker.io/v2/").respond(
        401,
        headers={
            "WWW-Authenticate": 'Bearer realm="https://auth.docker.io/token",'
            'service="registry.docker.io"'
        },
    )
    token = router.get("https://auth.docker.io/token").respond(200, json={"token": "hub"})
    head = router.head("https://registry-1.docker.io/v2/library/busybox/manifests/latest").mock(
        return_value=found()
    )
    result = check(router, "busybox")
    assert result.status is Status.FOUND
    assert result.registry == "registry-1.docker.io"
    assert pinged.call_count == 1
    assert dict(token.calls.last.request.url.params) == {
        "service": "registry.docker.io",
        "scope": "repository:library/busybox:pull",
    }
    assert head.calls.last.request.headers["Authorization"] == "Bearer hub"


def test_one_ping_for_many_images(router: respx.Router) -> None:
    pinged = open_registry(router)
    head = router.head(url__regex=rf"^{REGISTRY}/v2/").mock(return_value=found())
    images = [f"registry.test/{repo}:{n}" for repo in ("a", "b") for n in range(10)]
    results = checks(router, images)
    assert [r.image for r in results] == images  # input order
    assert {r.status for r in results} == {Status.FOUND}
    assert pinged.call_count == 1
    assert head.call_count == 20


def test_cookies_are_neither_kept_nor_sent(router: respx.Router) -> None:
    # A registry has no use for cookies, and the webhook's jar would grow for ever.
    router.get(f"{REGISTRY}/v2/").respond(200, headers={"Set-Cookie": "session=s3cret; Path=/"})
    head = router.head(url__regex=rf"^{REGISTRY}/v2/").mock(
        side_effect=lambda _: httpx.Response(200, headers=manifest_headers(size=len(BODY)))
    )
    results = checks(router, ["registry.test/a:1", "registry.test/b:1"])
    assert {r.status for r in results} == {Status.FOUND}
    assert head.call_count == 2
    assert all("cookie" not in call.request.headers for call in head.calls)


def test_ping_404_is_not_a_registry(router: respx.Router) -> None:
    router.get(f"{REGISTRY}/v2/").respond(404)
    head = router.head(HEAD_URL)
    result = check(router)
    assert result.status is Status.ERROR
    assert "does not serve the registry API" in result.message
    assert not head.called


# -- status mapping ----------------------------------------------------------------------------

# (id, HEAD answer, expected status, digest, media type, size, words in the message)
ANSWERS: list[tuple[str, httpx.Response, Status, str | None, str | None, int | None, str]] = [
    ("200-found", httpx.Response(200, headers=manifest_headers(size=1234)),
     Status.FOUND, BODY_DIGEST, OCI_MANIFEST, 1234, "found in registry.test"),
    ("200-index-with-charset", httpx.Response(200, headers=manifest_headers(
        media_type=f"{OCI_INDEX}; charset=utf-8", size=10)),
     Status.FOUND, BODY_DIGEST, OCI_INDEX, 10, "found"),
    ("200-no-length", httpx.Response(200, headers=manifest_headers()),
     Status.FOUND, BODY_DIGEST, OCI_MANIFEST, None, "found"),
    ("200-no-digest-for-tag", httpx.Response(200, headers=manifest_headers(digest=None)),
     Status.FOUND, None, OCI_MANIFEST, None, "found"),
    ("404-missing", oci_error(404, "MANIFEST_UNKNOWN", "manifest unknown"),
     Status.MISSING, None, None, None, "tag '1.0' not found in registry.test/app"),
    ("403-denied", httpx.Response(403),
     Status.DENIED, None, None, None, "does not exist or requires authorization (HTTP 403"),
    ("401-denied", httpx.Response(401),
     Status.DENIED, None, None, None, "does not exist or requires authorization (HTTP 401"),
    ("418-error", httpx.Response(418),
     Status.ERROR, None, None, None, "answered HTTP 418"),
    ("409-error", httpx.Response(409), Status.ERROR, None, None, None, "answered HTTP 409"),
    ("505-error-not-retried", httpx.Response(505),
     Status.ERROR, None, None, None, "answered HTTP 505"),
    ("bad-digest-header", httpx.Response(200, headers=manifest_headers(digest="not a digest")),
     Status.ERROR, None, None, None, "invalid Docker-Content-Digest"),
    # Issue #10, 7.4: only registered algorithms, spelled as the spec says, are a digest found.
    ("md5-digest-header", httpx.Response(200, headers=manifest_headers(digest="md5:" + "0" * 32)),
     Status.ERROR, None, None, None, "not a sha256 or sha512 digest"),
    ("sha256-uppercase-header", httpx.Response(200, headers=manifest_headers(
        digest=BODY_DIGEST.upper().replace("SHA256", "sha256"))),
     Status.ERROR, None, None, None, "not a sha256 or sha512 digest"),
    ("sha512-header", httpx.Response(200, headers=manifest_headers(digest="sha512:" + "a" * 128)),
     Status.FOUND, "sha512:" + "a" * 128, OCI_MANIFEST, None, "found"),
    ("control-characters-not-echoed", httpx.Response(
        200, headers=manifest_headers(digest="md5:\x1b[31mred")),
     Status.ERROR, None, None, None, "'md5:?[31mred'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "status", "digest", "media_type", "size", "words"),
    [c[1:] for c in ANSWERS],
    ids=[c[0] for c in ANSWERS],
)
def test_head_answer_to_result(
    router: respx.Router,
    answer: httpx.Response,
    status: Status,
    digest: str | None,
    media_type: str | None,
    size: int | None,
    words: str,
) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).mock(return_value=answer)
    sleeps = Sleeps()
    result = check(router, sleeps=sleeps)
    assert result.status is status
    assert result.digest == digest
    assert result.media_type == media_type
    assert result.size == size
    assert words in result.message
    assert result.image == IMAGE
    assert result.reference == parse_reference(IMAGE)
    assert result.elapsed_ms >= 0
    assert head.call_count == 1  # none of these is retried
    assert sleeps.waits == []


def test_digest_reference_missing_names_the_digest(router: respx.Router) -> None:
    open_registry(router)
    router.head(f"{REGISTRY}/v2/app/manifests/{OTHER_DIGEST}").respond(404)
    result = check(router, f"registry.test/app@{OTHER_DIGEST}")
    assert result.status is Status.MISSING
    assert f"digest {OTHER_DIGEST} not found" in result.message


# -- retries -----------------------------------------------------------------------------------

TRANSIENT = [429, 500, 502, 503, 504, 408]


@pytest.mark.parametrize("status", TRANSIENT, ids=[str(s) for s in TRANSIENT])
def test_transient_answer_is_retried(router: respx.Router, status: int) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).mock(side_effect=[httpx.Response(status), found()])
    sleeps = Sleeps()
    result = check(router, sleeps=sleeps)
    assert result.status is Status.FOUND
    assert head.call_count == 2
    assert sleeps.waits == [0.25]  # RetryPolicy's first backoff, no jitter


# (id, Retry-After, minimum expected wait)
RETRY_AFTER: list[tuple[str, str, float]] = [
    ("seconds", "3", 3.0),
    ("zero-uses-backoff", "0", 0.25),
    ("garbage-uses-backoff", "later", 0.25),
]


@pytest.mark.parametrize(
    ("retry_after", "wait"), [c[1:] for c in RETRY_AFTER], ids=[c[0] for c in RETRY_AFTER]
)
def test_retry_after_is_respected(router: respx.Router, retry_after: str, wait: float) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).mock(
        side_effect=[
            oci_error(429, "TOOMANYREQUESTS", "slow down", **{"Retry-After": retry_after}),
            found(),
        ]
    )
    sleeps = Sleeps()
    assert check(router, sleeps=sleeps).status is Status.FOUND
    assert head.call_count == 2
    assert len(sleeps.waits) == 1
    assert sleeps.waits[0] >= wait


def test_unreadable_retry_after_byte_is_ignored(router: respx.Router) -> None:
    open_registry(router)
    router.head(HEAD_URL).mock(
        side_effect=[httpx.Response(503, headers=[(b"Retry-After", b"\xb2")]), found()]
    )
    assert check(router).status is Status.FOUND


def test_persistent_503_is_an_error_after_every_retry(router: respx.Router) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).mock(return_value=oci_error(503, "UNAVAILABLE", "try again later"))
    sleeps = Sleeps()
    result = check(router, sleeps=sleeps)
    assert result.status is Status.ERROR
    # A HEAD answer has no body, so the reason is the status line's.
    assert "registry.test answered HTTP 503 (Service Unavailable)" in result.message
    assert head.call_count == RETRIES + 1
    assert sleeps.waits == [0.25, 0.5, 1.0]


def test_retry_after_past_the_deadline_ends_at_once(router: respx.Router) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).respond(429, headers={"Retry-After": "120"})
    sleeps = Sleeps()
    result = check(router, sleeps=sleeps)  # Deadline.after(30)
    assert result.status is Status.ERROR
    assert "retried in 120s" in result.message
    assert "past the deadline" in result.message
    assert head.call_count == 1
    assert sleeps.waits == []


def test_transient_ping_is_retried(router: respx.Router) -> None:
    pinged = router.get(f"{REGISTRY}/v2/").mock(
        side_effect=[httpx.Response(502), httpx.Response(200)]
    )
    head = router.head(HEAD_URL).mock(return_value=found())
    assert check(router).status is Status.FOUND
    assert pinged.call_count == 2
    assert head.call_count == 1


# (id, where the connection fails: "ping" or "head")
CONNECT_ERRORS = [("on-ping", "ping"), ("on-head", "head")]


@pytest.mark.parametrize(
    "where", [c[1] for c in CONNECT_ERRORS], ids=[c[0] for c in CONNECT_ERRORS]
)
def test_connection_error_is_retried_then_an_error(router: respx.Router, where: str) -> None:
    pinged = router.get(f"{REGISTRY}/v2/")
    head = router.head(HEAD_URL)
    if where == "ping":
        pinged.mock(side_effect=httpx.ConnectError)
    else:
        pinged.respond(200)
        head.mock(side_effect=httpx.ConnectError)
    sleeps = Sleeps()
    result = check(router, sleeps=sleeps)
    assert result.status is Status.ERROR
    assert "cannot talk to registry.test" in result.message
    failing = pinged if where == "ping" else head
    assert failing.call_count == RETRIES + 1
    assert len(sleeps.waits) == RETRIES


@pytest.mark.parametrize(
    "error",
    [httpx.ReadTimeout("slow"), httpx.ConnectTimeout("slow"), httpx.RemoteProtocolError("eof")],
    ids=["read-timeout", "connect-timeout", "remote-protocol-error"],
)
def test_transport_failure_is_retried_then_found(
    router: respx.Router, error: httpx.TransportError
) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).mock(side_effect=[error, found()])
    sleeps = Sleeps()
    assert check(router, sleeps=sleeps).status is Status.FOUND
    assert head.call_count == 2
    assert sleeps.waits == [0.25]


def test_persistent_timeout_says_timed_out(router: respx.Router) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).mock(side_effect=httpx.ReadTimeout)
    result = check(router)
    assert result.status is Status.ERROR
    assert "timed out talking to registry.test" in result.message
    assert head.call_count == RETRIES + 1


# -- HEAD not supported: GET and hash ----------------------------------------------------------

# (id, HEAD status, GET headers, expected digest)
FALLBACKS: list[tuple[str, int, dict[str, str], str]] = [
    ("405-digest-from-body", 405, {"Content-Type": OCI_MANIFEST}, BODY_DIGEST),
    ("400-digest-from-body", 400, {"Content-Type": OCI_MANIFEST}, BODY_DIGEST),
    ("501-digest-from-body", 501, {"Content-Type": OCI_MANIFEST}, BODY_DIGEST),
    ("405-digest-header-kept", 405, manifest_headers(digest=OTHER_DIGEST), OTHER_DIGEST),
]


@pytest.mark.parametrize(
    ("head_status", "get_headers", "digest"),
    [c[1:] for c in FALLBACKS],
    ids=[c[0] for c in FALLBACKS],
)
def test_head_unsupported_falls_back_to_get(
    router: respx.Router, head_status: int, get_headers: dict[str, str], digest: str
) -> None:
    open_registry(router)
    head = router.head(HEAD_URL).respond(head_status)
    get = router.get(HEAD_URL).respond(200, headers=get_headers, content=BODY)
    result = check(router)
    assert result.status is Status.FOUND
    assert result.digest == digest
    assert result.media_type == OCI_MANIFEST
    assert result.size == len(BODY)
    assert head.call_count == 1
    assert get.call_count == 1
    assert "manifest.v1+json" in get.calls.last.request.headers["Accept"]


# (id, GET answer, words in the message)
GET_ERRORS: list[tuple[str, httpx.Response, str]] = [
    ("oci-error-reason", oci_error(409, "CONFLICT", "repository busy"),
     "answered HTTP 409 for the manifest (CONFLICT: repository busy)"),
    ("html-not-echoed", httpx.Response(409, html="<html><b>nginx</b></html>"),
     "answered HTTP 409 for the manifest (Conflict)"),
    ("transient-oci-reason", oci_error(503, "UNAVAILABLE", "try again later"),
     "answered HTTP 503 (UNAVAILABLE: try again later)"),
    ("reason-on-one-line", oci_error(409, "CONFLICT", "busy\nfound registry.test/evil"),
     "(CONFLICT: busy?found registry.test/evil)"),
    ("reason-not-strings", httpx.Response(409, json={"errors": [{"code": 5, "message": [1]}]}),
     "answered HTTP 409 for the manifest (Conflict)"),
    ("errors-not-a-list", httpx.Response(409, json={"errors": {"code": "X"}}),
     "answered HTTP 409 for the manifest (Conflict)"),
    ("deep-json", httpx.Response(409, content=b"[" * 16384),
     "answered HTTP 409 for the manifest (Conflict)"),
    ("5000-digit-number", httpx.Response(409, content=b"1" * 5000),
     "answered HTTP 409 for the manifest (Conflict)"),
    ("control-characters-replaced",
     oci_error(409, "DENIED", "no\n\x1b[32mfound    evil.test/app:1  sha256:00\r"),
     "(DENIED: no??[32mfound    evil.test/app:1  sha256:00?)"),
    ("long-reason-capped", oci_error(409, "DENIED", "x" * 5000), "(DENIED: " + "x" * 192 + "...)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "words"), [c[1:] for c in GET_ERRORS], ids=[c[0] for c in GET_ERRORS]
)
def test_get_error_reason_from_oci_body(
    router: respx.Router, answer: httpx.Response, words: str
) -> None:
    open_registry(router)
    router.head(HEAD_URL).respond(405)
    router.get(HEAD_URL).mock(return_value=answer)
    result = check(router)
    assert result.status is Status.ERROR
    assert words in result.message
    assert "<html>" not in result.message


def test_get_fallback_missing(router: respx.Router) -> None:
    open_registry(router)
    router.head(HEAD_URL).respond(405)
    router.get(HEAD_URL).respond(404)
    assert check(router).status is Status.MISSING


# -- platform: the config blob's answer ---------------------------------------------------------

CONFIG_DIGEST = "sha256:" + "c" * 64
SINGLE = b'{"schemaVersion": 2, "config": {"digest": "' + CONFIG_DIGEST.encode() + b'"}}'
# (id, the config blob's answer, status, words in the message)
CONFIG_ANSWERS: list[tuple[str, httpx.Response, Status, str]] = [
    ("linux-amd64", httpx.Response(200, json={"os": "linux", "architecture": "amd64"}),
     Status.FOUND, "with linux/amd64"),
    ("foreign", httpx.Response(200, json={"os": "linux", "architecture": "arm64"}),
     Status.MISSING, "exists but not for linux/amd64; it has: linux/arm64"),
    # Every status becomes an error in one place (httperrors): a refusal is a denial there.
    ("refused", oci_error(401, "UNAUTHORIZED", "authentication required"), Status.DENIED,
     "answered HTTP 401 for the image config (UNAUTHORIZED: authentication required)"),
    ("blob-unknown", oci_error(404, "BLOB_UNKNOWN", "blob unknown to registry"), Status.ERROR,
     "answered HTTP 404 for the image config (BLOB_UNKNOWN: blob unknown to registry)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "status", "words"),
    [c[1:] for c in CONFIG_ANSWERS],
    ids=[c[0] for c in CONFIG_ANSWERS],
)
def test_platform_of_a_single_manifest_is_in_its_config(
    router: respx.Router, answer: httpx.Response, status: Status, words: str
) -> None:
    open_registry(router)
    get = router.get(HEAD_URL).respond(200, headers=manifest_headers(None), content=SINGLE)
    blob = router.get(f"{REGISTRY}/v2/app/blobs/{CONFIG_DIGEST}").mock(return_value=answer)
    result = check(router, options=ClientOptions(platform=Platform("linux", "amd64")))
    assert result.status is status
    assert words in result.message
    assert (get.call_count, blob.call_count) == (1, 1)


# -- digest references are verified -----------------------------------------------------------

PINNED = f"registry.test/app@{BODY_DIGEST}"
PINNED_URL = f"{REGISTRY}/v2/app/manifests/{BODY_DIGEST}"

# (id, HEAD answer, GET answer or None if no GET is expected, status, words in the message)
PINS: list[tuple[str, httpx.Response, httpx.Response | None, Status, str]] = [
    ("head-digest-matches", httpx.Response(200, headers=manifest_headers()), None,
     Status.FOUND, "found"),
    ("head-digest-differs", httpx.Response(200, headers=manifest_headers(digest=OTHER_DIGEST)),
     None, Status.ERROR, f"served digest {OTHER_DIGEST} when asked for {BODY_DIGEST}"),
    ("no-header-get-body-matches", httpx.Response(200, headers=manifest_headers(digest=None)),
     httpx.Response(200, headers=manifest_headers(digest=None), content=BODY),
     Status.FOUND, "found"),
    ("no-header-get-body-differs", httpx.Response(200, headers=manifest_headers(digest=None)),
     httpx.Response(200, headers=manifest_headers(digest=None), content=BODY + b" "),
     Status.ERROR, "when asked for"),
    ("head-405-get-body-differs", httpx.Response(405),
     httpx.Response(200, headers=manifest_headers(digest=None), content=b"{}"),
     Status.ERROR, "when asked for"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("head_answer", "get_answer", "status", "words"),
    [c[1:] for c in PINS],
    ids=[c[0] for c in PINS],
)
def test_digest_pin_is_verified(
    router: respx.Router,
    head_answer: httpx.Response,
    get_answer: httpx.Response | None,
    status: Status,
    words: str,
) -> None:
    open_registry(router)
    head = router.head(PINNED_URL).mock(return_value=head_answer)
    get = router.get(PINNED_URL)
    if get_answer is not None:
        get.mock(return_value=get_answer)
    result = check(router, PINNED)
    assert result.status is status
    assert words in result.message
    assert head.call_count == 1
    assert get.call_count == (0 if get_answer is None else 1)  # mismatches are not retried
    if status is Status.FOUND:
        assert result.digest == BODY_DIGEST


def test_digest_pin_reports_the_verified_digest(router: respx.Router) -> None:
    open_registry(router)
    router.head(PINNED_URL).respond(405)
    router.get(PINNED_URL).respond(200, headers=manifest_headers(digest=OTHER_DIGEST), content=BODY)
    result = check(router, PINNED)
    assert result.status is Status.ERROR or result.digest == BODY_DIGEST


# -- plain HTTP only for loopback and --insecure-registry --------------------------------------

# (id, image, registry host:port, options)
HTTP_FALLBACK: list[tuple[str, str, str, ClientOptions]] = [
    ("ipv4-loopback", "127.0.0.1:5000/app:1.0", "127.0.0.1:5000", ClientOptions()),
    ("localhost", "localhost:5000/app:1.0", "localhost:5000", ClientOptions()),
    ("ipv6-loopback", "[::1]:5000/app:1.0", "[::1]:5000", ClientOptions()),
    ("insecure-registry", "registry.test:5000/app:1.0", "registry.test:5000",
     ClientOptions(insecure_registries=frozenset({"registry.test:5000"}))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("image", "host", "options"),
    [c[1:] for c in HTTP_FALLBACK],
    ids=[c[0] for c in HTTP_FALLBACK],
)
def test_http_fallback_when_https_fails(
    router: respx.Router, image: str, host: str, options: ClientOptions
) -> None:
    https = router.get(f"https://{host}/v2/").mock(side_effect=httpx.ConnectError)
    http = router.get(f"http://{host}/v2/").respond(200)
    head_https = router.head(f"https://{host}/v2/app/manifests/1.0").respond(200)
    head_http = router.head(f"http://{host}/v2/app/manifests/1.0").mock(return_value=found())
    result = check(router, image, options=options)
    assert result.status is Status.FOUND
    assert https.call_count == 1
    assert http.call_count == 1
    assert head_http.call_count == 1
    assert not head_https.called


def test_loopback_prefers_https(router: respx.Router) -> None:
    https = router.get("https://127.0.0.1:5000/v2/").respond(200)
    http = router.get("http://127.0.0.1:5000/v2/").respond(200)
    head = router.head("https://127.0.0.1:5000/v2/app/manifests/1.0").mock(return_value=found())
    assert check(router, "127.0.0.1:5000/app:1.0").status is Status.FOUND
    assert https.call_count == 1
    assert not http.called
    assert head.call_count == 1


def test_no_http_fallback_for_other_hosts(router: respx.Router) -> None:
    https = router.get("https://registry.test:5000/v2/").mock(side_effect=httpx.ConnectError)
    http = router.get("http://registry.test:5000/v2/").respond(200)
    result = check(router, "registry.test:5000/app:1.0")
    assert result.status is Status.ERROR
    assert "cannot talk to registry.test:5000" in result.message
    assert https.call_count == RETRIES + 1
    assert not http.called


def test_http_registry_may_use_http_realm(router: respx.Router) -> None:
    router.get("https://127.0.0.1:5000/v2/").mock(side_effect=httpx.ConnectError)
    router.get("http://127.0.0.1:5000/v2/").respond(
        401, headers={"WWW-Authenticate": 'Bearer realm="http://127.0.0.1:5001/token"'}
    )
    token = router.get("http://127.0.0.1:5001/token").respond(200, json={"token": "t"})
    head = router.head("http://127.0.0.1:5000/v2/app/manifests/1.0").mock(return_value=found())
    assert check(router, "127.0.0.1:5000/app:1.0").status is Status.FOUND
    assert token.call_count == 1
    assert head.calls.last.request.headers["Authorization"] == "Bearer t"


# (id, image, options, Authorization expected on the HEAD over plain HTTP)
PLAIN_HTTP_CREDENTIALS: list[tuple[str, str, ClientOptions, str | None]] = [
    ("loopback-withheld", "127.0.0.1:5000/app:1.0", ClientOptions(), None),
    ("insecure-registry-sent", "127.0.0.1:5000/app:1.0",
     ClientOptions(insecure_registries=frozenset({"127.0.0.1:5000"})), "Basic YWxpY2U6cHc="),
    ("insecure-host-any-port-sent", "127.0.0.1:5000/app:1.0",
     ClientOptions(insecure_registries=frozenset({"127.0.0.1"})), "Basic YWxpY2U6cHc="),
    ("insecure-other-port-withheld", "127.0.0.1:5000/app:1.0",
     ClientOptions(insecure_registries=frozenset({"127.0.0.1:5001"})), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("image", "options", "sent"),
    [c[1:] for c in PLAIN_HTTP_CREDENTIALS],
    ids=[c[0] for c in PLAIN_HTTP_CREDENTIALS],
)
def test_credentials_over_plain_http_only_when_insecure(
    router: respx.Router, image: str, options: ClientOptions, sent: str | None
) -> None:
    router.get("https://127.0.0.1:5000/v2/").mock(side_effect=httpx.ConnectError)
    router.get("http://127.0.0.1:5000/v2/").respond(
        401, headers={"WWW-Authenticate": 'Basic realm="r"'}
    )

    def registry(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") == "Basic YWxpY2U6cHc=":
            return found()
        return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="r"'})

    head = router.head("http://127.0.0.1:5000/v2/app/manifests/1.0").mock(side_effect=registry)
    result = check(router, image, options=options, keychain=CREDS)
    assert head.call_count == 1
    assert head.calls.last.request.headers.get("Authorization") == sent
    if sent is None:
        assert result.status is Status.DENIED
        assert "not sent over plain HTTP" in result.message
        # The library names what would allow it; front ends word it (render.explained).
        assert result.hint == Hint("127.0.0.1:5000")
        assert "--insecure-registry" not in result.message
    else:
        assert result.status is Status.FOUND


# -- redirects ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("challenge", "sent"),
    [
        ('Bearer realm="https://auth.test/token",service="registry.test"', "Bearer t"),
        ('Basic realm="r"', "Basic YWxpY2U6cHc="),
    ],
    ids=["bearer", "basic"],
)
def test_redirect_to_other_host_drops_authorization(
    router: respx.Router, challenge: str, sent: str
) -> None:
    router.get(f"{REGISTRY}/v2/").respond(401, headers={"WWW-Authenticate": challenge})
    router.get("https://auth.test/token").respond(200, json={"token": "t"})
    head = router.head(HEAD_URL).respond(
        307, headers={"Location": "https://cdn.test/blobs/manifest-1"}
    )
    cdn = router.head("https://cdn.test/blobs/manifest-1").mock(return_value=found())
    result = check(router, keychain=CREDS)
    assert result.status is Status.FOUND
    assert head.calls.last.request.headers["Authorization"] == sent
    assert cdn.call_count == 1
    assert "Authorization" not in cdn.calls.last.request.headers


def test_redirect_to_plain_http_drops_authorization(router: respx.Router) -> None:
    router.get(f"{REGISTRY}/v2/").respond(401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    router.head(HEAD_URL).respond(307, headers={"Location": "http://registry.test/v2/app/m"})
    downgraded = router.head("http://registry.test/v2/app/m").mock(return_value=found())
    assert check(router, keychain=CREDS).status is Status.FOUND
    assert "Authorization" not in downgraded.calls.last.request.headers


def test_redirect_on_same_host_keeps_authorization(router: respx.Router) -> None:
    router.get(f"{REGISTRY}/v2/").respond(401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    router.head(HEAD_URL).respond(307, headers={"Location": f"{REGISTRY}/v2/app/manifests/moved"})
    moved = router.head(f"{REGISTRY}/v2/app/manifests/moved").mock(return_value=found())
    assert check(router, keychain=CREDS).status is Status.FOUND
    assert moved.calls.last.request.headers["Authorization"] == "Basic YWxpY2U6cHc="


# -- check_many --------------------------------------------------------------------------------


def test_check_many_keeps_input_order_and_texts(router: respx.Router) -> None:
    open_registry(router)
    router.head(f"{REGISTRY}/v2/app/manifests/1.0").mock(return_value=found())
    router.head(f"{REGISTRY}/v2/app/manifests/2.0").respond(404)
    router.head(f"{REGISTRY}/v2/other/manifests/latest").respond(403)
    images = ["registry.test/app:2.0", "registry.test/app:1.0", "registry.test/other"]
    results = checks(router, images)
    assert [(r.image, r.status) for r in results] == [
        ("registry.test/app:2.0", Status.MISSING),
        ("registry.test/app:1.0", Status.FOUND),
        ("registry.test/other", Status.DENIED),
    ]


def test_check_many_same_reference_two_spellings(router: respx.Router) -> None:
    router.get("https://registry-1.docker.io/v2/").respond(200)
    head = router.head("https://registry-1.docker.io/v2/library/busybox/manifests/latest").mock(
        return_value=found()
    )
    results = checks(router, ["busybox", "docker.io/library/busybox:latest"])
    assert [r.image for r in results] == ["busybox", "docker.io/library/busybox:latest"]
    assert [r.status for r in results] == [Status.FOUND, Status.FOUND]
    assert head.call_count == 1


def test_check_many_of_nothing(router: respx.Router) -> None:
    assert checks(router, []) == []


def test_check_many_ends_at_the_deadline(router: respx.Router) -> None:
    open_registry(router)
    router.head(f"{REGISTRY}/v2/app/manifests/1.0").mock(return_value=found())

    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return found()  # pragma: no cover - cancelled at the deadline

    router.head(f"{REGISTRY}/v2/slow/manifests/1.0").mock(side_effect=hang)

    async def main() -> list[CheckResult]:
        async with ImageChecker(transport=httpx.MockTransport(router.async_handler)) as checker:
            items = [(i, parse_reference(i)) for i in ("registry.test/slow:1.0", IMAGE)]
            return await checker.check_many(items, Deadline.after(1.0))  # the fast one's room

    slow, fast = asyncio.run(main())
    assert fast.status is Status.FOUND  # finished answers are kept
    assert slow.status is Status.ERROR
    assert "deadline exceeded" in slow.message


def run_many(
    router: respx.Router,
    images: Sequence[str],
    *,
    seconds: float = 30,
    concurrency: int = 16,
    sleep: Sleeps | None = None,
    checked: list[tuple[int, int]] | None = None,
) -> list[CheckResult]:
    """``check_many`` of ``images`` within ``seconds``; the progress calls into ``checked``."""

    async def main() -> list[CheckResult]:
        async with ImageChecker(
            ClientOptions(concurrency=concurrency),
            transport=httpx.MockTransport(router.async_handler),
            retry_policy=RetryPolicy(retries=RETRIES, sleep=sleep or Sleeps(), rng=lambda: 0.0),
        ) as checker:
            items = [(image, parse_reference(image)) for image in images]
            progress = None if checked is None else lambda *count: checked.append(count)
            return await checker.check_many(items, Deadline.after(seconds), checked=progress)

    return asyncio.run(main())


def test_check_many_runs_at_most_concurrency_checks_in_a_few_tasks(router: respx.Router) -> None:
    open_registry(router)
    running, most, tasks = [0], [0], [0]

    async def head(request: httpx.Request) -> httpx.Response:
        running[0] += 1
        most[0] = max(most[0], running[0])
        tasks[0] = max(tasks[0], len(asyncio.all_tasks()))
        await asyncio.sleep(0.001)
        running[0] -= 1
        return found()

    router.head(url__regex=r"/v2/app/manifests/").mock(side_effect=head)
    images = [f"registry.test/app:{n}" for n in range(60)]
    checked: list[tuple[int, int]] = []
    results = run_many(router, [*images, images[0]], concurrency=4, checked=checked)
    assert [r.image for r in results] == [*images, images[0]]
    assert {r.status for r in results} == {Status.FOUND}
    assert most[0] == 4
    assert tasks[0] <= 4 + 1  # the workers and the run: no task per image
    assert checked == [(n, 60) for n in range(1, 61)]  # each distinct reference once


def test_check_many_cuts_short_the_running_and_the_unstarted_checks(router: respx.Router) -> None:
    open_registry(router)
    router.head(f"{REGISTRY}/v2/app/manifests/1.0").respond(503)

    class Stalls(Sleeps):  # the retry's pause outlasts the deadline
        async def __call__(self, seconds: float) -> None:
            await asyncio.sleep(30)

    checked: list[tuple[int, int]] = []
    running, unstarted = run_many(
        router,
        [IMAGE, "registry.test/app:2.0"],
        seconds=1.5,  # room for the first 503 on a slow machine: see the test below
        concurrency=1,
        sleep=Stalls(),
        checked=checked,
    )
    assert running.status is Status.ERROR
    assert running.message.startswith("deadline exceeded before the registry answered")
    assert "(last error: " in running.message and "503" in running.message
    assert unstarted.status is Status.ERROR
    assert unstarted.message == "deadline exceeded before the registry answered"
    assert (unstarted.image, unstarted.registry) == ("registry.test/app:2.0", "registry.test")
    assert checked == [(1, 2), (2, 2)]  # both ended: cut short


def test_check_many_copies_a_cut_short_answer_to_each_spelling(router: respx.Router) -> None:
    router.get("https://registry-1.docker.io/v2/").respond(200)
    router.head("https://registry-1.docker.io/v2/library/busybox/manifests/latest").respond(503)

    class Stalls(Sleeps):
        async def __call__(self, seconds: float) -> None:
            await asyncio.sleep(30)

    # The deadline must leave room for the first answer and a retry wait, or the retry policy
    # (not the deadline's cancellation) ends the check: CI once took 271 ms for the first 503.
    results = run_many(router, ["busybox", "docker.io/library/busybox:latest"], seconds=1.5,
                       sleep=Stalls())  # fmt: skip
    assert [r.image for r in results] == ["busybox", "docker.io/library/busybox:latest"]
    assert results[0].message == results[1].message
    assert results[1].message.startswith("deadline exceeded before the registry answered")
    assert "(last error: " in results[1].message and "HTTP 503" in results[1].message


def test_check_many_cancelled_stops_every_check(router: respx.Router) -> None:
    open_registry(router)
    started: list[str] = []

    async def hang(request: httpx.Request) -> httpx.Response:
        started.append(request.url.path)
        await asyncio.sleep(30)
        return found()  # pragma: no cover - cancelled

    router.head(url__regex=r"/v2/a/manifests/").mock(side_effect=hang)

    async def main() -> int:
        async with ImageChecker(
            ClientOptions(concurrency=2), transport=httpx.MockTransport(router.async_handler)
        ) as checker:
            items = [(i, parse_reference(i)) for i in ("registry.test/a:1", "registry.test/a:2")]
            run = asyncio.ensure_future(checker.check_many(items, Deadline.after(30)))
            while len(started) < 2:
                await asyncio.sleep(0.01)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            return len(asyncio.all_tasks())

    assert asyncio.run(main()) == 1  # only main: no check left running


# -- TLS and size limits -----------------------------------------------------------------------


def test_untrusted_certificate_is_not_retried(router: respx.Router) -> None:
    pinged = router.get(f"{REGISTRY}/v2/").mock(
        side_effect=httpx.ConnectError(
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"
        )
    )
    sleeps = Sleeps()
    result = check(router, sleeps=sleeps)
    assert result.status is Status.ERROR
    assert "TLS certificate of registry.test is not trusted" in result.message
    assert "self-signed certificate" in result.message
    # The library names what would allow it; front ends word it (render.explained).
    assert result.hint == Hint(ca_file=True)
    assert "--ca-file" not in result.message
    assert pinged.call_count == 1
    assert sleeps.waits == []


def test_every_request_asks_for_an_uncompressed_body(router: respx.Router) -> None:
    """Bodies are capped as they arrive; a compressed one could grow past its cap when
    decoded (the capped decoder is there only for servers that compress unasked)."""
    ping = open_registry(router)
    head = router.head(HEAD_URL).mock(return_value=found())
    assert check(router).status is Status.FOUND
    for route in (ping, head):
        assert route.calls.last.request.headers["Accept-Encoding"] == "identity"


def test_manifest_over_4_MiB_is_refused(router: respx.Router) -> None:
    open_registry(router)
    router.head(HEAD_URL).respond(405)
    get = router.get(HEAD_URL).respond(
        200, headers={"Content-Length": str(4 * 1024 * 1024 + 1), "Content-Type": OCI_MANIFEST}
    )
    result = check(router)
    assert result.status is Status.ERROR
    assert "manifest is larger than 4194304 bytes" in result.message
    assert get.call_count == 1


@pytest.fixture
def broken_trust_store(
    small_trust_store: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CA bundle that fails to load: it shows when the system trust is loaded at all."""
    bundle = tmp_path / "broken.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.mark.usefixtures("broken_trust_store")
def test_plain_http_local_registry_never_loads_the_ca_store(router: respx.Router) -> None:
    """The HTTPS probe of a loopback registry needs no CA store; a plain-HTTP one never does."""
    router.get("https://127.0.0.1:5000/v2/").mock(side_effect=httpx.ConnectError("not TLS"))
    router.get("http://127.0.0.1:5000/v2/").respond(200)
    router.head("http://127.0.0.1:5000/v2/team/app/manifests/1.0").respond(
        200, headers={"Docker-Content-Digest": BODY_DIGEST, "Content-Type": OCI_MANIFEST}
    )
    [result] = checks(router, ["127.0.0.1:5000/team/app:1.0"])
    assert result.status is Status.FOUND


@pytest.mark.usefixtures("broken_trust_store")
def test_https_registry_loads_the_ca_store_before_its_first_request(router: respx.Router) -> None:
    ping = open_registry(router)
    with pytest.raises(UsageError, match="cannot load CA certificates"):
        checks(router, ["registry.test/team/app:1.0"])
    assert not ping.called
