"""Tests for imagecheck.registry._netguard: which destinations are refused, and that every hop of a
check (ping, manifest, token request, each redirect) is asked before it is sent.

The hop tests run :class:`ImageChecker` against respx routes; a route for every other URL
records whatever would have left the machine, and the assertions are on that.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import respx

from imagecheck._deadline import Deadline
from imagecheck.authn import Credentials
from imagecheck.authn._credentials import StaticKeychain
from imagecheck.reference import parse_reference
from imagecheck.registry import ClientOptions, ImageChecker
from imagecheck.registry._netguard import numeric_host, refusal
from imagecheck.registry._retry import RetryPolicy
from imagecheck.result import CheckResult, Status

REGISTRY = "https://registry.test"
REALM = "https://auth.test/token"
DIGEST = "sha256:" + "ab" * 32
PASSWORD = "pa55-SECRET-word"
REFRESH = "refresh-SECRET-token"
ALICE = StaticKeychain(Credentials(username="alice", password=PASSWORD, source="--username"))

pytestmark = pytest.mark.usefixtures("small_trust_store")


# -- refusal(): the list, in every spelling ---------------------------------------------------

# (id, URL, named registry host or None, words of the reason; None: allowed)
DESTINATIONS: list[tuple[str, str, str | None, str | None]] = [
    ("public-name", "https://registry.example/v2/", None, None),
    ("private-ipv4", "http://10.1.2.3:5000/v2/", None, None),
    ("loopback", "http://127.0.0.1:5000/v2/", None, None),
    ("aws-imds", "http://169.254.169.254/latest/meta-data/", None, "metadata service address"),
    ("aws-imds-ipv6", "http://[fd00:ec2::254]/", None, "metadata service address"),
    ("ecs-credentials", "http://169.254.170.2/v2/credentials", None, "metadata service address"),
    ("eks-pod-identity", "http://169.254.170.23/v1/credentials", None, "metadata service"),
    ("alibaba", "http://100.100.100.200/latest/meta-data/", None, "metadata service address"),
    ("oracle-classic", "http://192.0.0.192/latest/", None, "metadata service address"),
    ("azure-wireserver", "http://168.63.129.16/machine", None, "metadata service address"),
    ("decimal", "http://2852039166/", None, "metadata service address"),
    ("hex", "http://0xa9fea9fe/", None, "metadata service address"),
    ("short", "http://169.254.43518/", None, "metadata service address"),
    ("mapped-ipv6", "http://[::ffff:169.254.169.254]/", None, "metadata service address"),
    ("mapped-ipv6-hex", "http://[::ffff:a9fe:a9fe]/", None, "metadata service address"),
    ("nat64", "http://[64:ff9b::a9fe:a9fe]/", None, "metadata service address"),
    ("trailing-dot-address", "http://169.254.169.254./", None, "metadata service address"),
    ("gcp-name", "http://metadata.google.internal/computeMetadata/v1/", None, "service name"),
    ("gcp-name-case-dot", "http://METADATA.Google.Internal./", None, "service name"),
    ("gcp-short-name", "http://metadata/computeMetadata/v1/", None, "service name"),
    ("gcp-goog", "http://metadata.goog/", None, "service name"),
    ("aws-name", "http://instance-data.ec2.internal/latest/", None, "service name"),
    ("aws-short-name", "http://instance-data/latest/", None, "service name"),
    ("link-local", "http://169.254.7.7:5000/v2/", None, "a link-local address"),
    ("link-local-ipv6", "http://[fe80::1]/", None, "a link-local address"),
    ("link-local-ipv6-zone", "http://[fe80::1%25eth0]/", None, "a link-local address"),
    ("link-local-named", "http://169.254.7.7:5000/v2/", "169.254.7.7", None),
    ("link-local-named-other-port", "http://169.254.7.7/token", "169.254.7.7", None),
    ("link-local-not-the-named", "http://169.254.7.8/", "169.254.7.7", "a link-local address"),
    ("metadata-even-when-named", "http://169.254.169.254/v2/", "169.254.169.254", "address"),
    ("metadata-name-even-when-named", "http://metadata/v2/", "metadata", "service name"),
    ("file", "file:///etc/passwd", None, "not an http(s) URL"),
    ("ftp", "ftp://registry.example/x", None, "not an http(s) URL"),
]


@pytest.mark.parametrize(
    ("url", "named", "words"), [c[1:] for c in DESTINATIONS], ids=[c[0] for c in DESTINATIONS]
)
def test_refusal(url: str, named: str | None, words: str | None) -> None:
    reason = refusal(httpx.URL(url), named_host=named)
    if words is None:
        assert reason is None
    else:
        assert reason is not None and words in reason


def test_numeric_host_is_none_for_names() -> None:
    assert numeric_host("registry.example") is None
    assert numeric_host("0xzz") is None
    assert str(numeric_host("0251.0376.0251.0376")) == "169.254.169.254"


# -- every hop through ImageChecker ------------------------------------------------------------


def run_check(
    router: respx.Router,
    image: str = "registry.test/app:1.0",
    keychain: StaticKeychain | None = None,
) -> CheckResult:
    async def no_sleep(seconds: float) -> None:
        pass

    async def main() -> CheckResult:
        async with ImageChecker(
            ClientOptions(retries=3),
            keychain,
            transport=httpx.MockTransport(router.async_handler),
            retry_policy=RetryPolicy(retries=3, sleep=no_sleep, rng=lambda: 0.0),
        ) as checker:
            return await checker.check(parse_reference(image), Deadline.after(30))

    return asyncio.run(main())


def elsewhere(router: respx.Router) -> respx.Route:
    """Every request that is not for the registry or its token service: what must not leave."""
    return router.route(url__regex=r"^(?!https://(registry|auth)\.test/)").respond(
        200, json={"token": "METADATA-ANSWER"}, headers={"Docker-Content-Digest": DIGEST}
    )


def redirect(location: str) -> httpx.Response:
    return httpx.Response(302, headers={"Location": location})


REDIRECT_TARGETS: list[tuple[str, str]] = [
    ("imds", "http://169.254.169.254/latest/meta-data/iam/security-credentials/"),
    ("imds-mapped-ipv6", "http://[::ffff:169.254.169.254]/latest/meta-data/"),
    ("imds-hex", "http://0xa9fea9fe/latest/meta-data/"),
    ("gcp-name", "http://metadata.google.internal/computeMetadata/v1/"),
    ("link-local", "http://169.254.7.7/v2/app/manifests/1.0"),
]
TARGET_IDS = [c[0] for c in REDIRECT_TARGETS]
TARGETS = [c[1] for c in REDIRECT_TARGETS]


@pytest.mark.parametrize("location", TARGETS, ids=TARGET_IDS)
def test_manifest_redirect_to_metadata_is_refused(router: respx.Router, location: str) -> None:
    router.get(f"{REGISTRY}/v2/").respond(200)
    head = router.head(f"{REGISTRY}/v2/app/manifests/1.0").mock(return_value=redirect(location))
    leak = elsewhere(router)
    result = run_check(router)
    assert result.status is Status.ERROR
    assert "refusing to send a request to" in result.message
    assert not leak.called
    assert head.call_count == 1  # refused, not retried


@pytest.mark.parametrize("location", TARGETS, ids=TARGET_IDS)
def test_ping_redirect_to_metadata_is_refused(router: respx.Router, location: str) -> None:
    router.get(f"{REGISTRY}/v2/").mock(return_value=redirect(location))
    leak = elsewhere(router)
    result = run_check(router)
    assert result.status is Status.ERROR
    assert "refusing to send a request to" in result.message
    assert not leak.called


@pytest.mark.parametrize("location", TARGETS, ids=TARGET_IDS)
def test_token_realm_redirect_to_metadata_is_refused(router: respx.Router, location: str) -> None:
    """The realm passes check_realm; its answer, a redirect, must be checked too (#10)."""
    router.get(f"{REGISTRY}/v2/").respond(
        401, headers={"WWW-Authenticate": f'Bearer realm="{REALM}",service="registry.test"'}
    )
    router.get(REALM).mock(return_value=redirect(location))
    head = router.head(f"{REGISTRY}/v2/app/manifests/1.0").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    leak = elsewhere(router)
    result = run_check(router, keychain=ALICE)
    assert result.status is Status.ERROR
    assert "refusing to send a request to" in result.message
    assert not leak.called
    assert not head.called  # no metadata answer became a Bearer token


@pytest.mark.parametrize("location", ["file:///etc/passwd", "gopher://registry.test/x"])
def test_non_http_redirect_is_a_protocol_error_not_retried(
    router: respx.Router, location: str
) -> None:
    router.get(f"{REGISTRY}/v2/").respond(200)
    head = router.head(f"{REGISTRY}/v2/app/manifests/1.0").mock(return_value=redirect(location))
    result = run_check(router)
    assert result.status is Status.ERROR
    assert "refusing to follow a" in result.message
    assert "not an http(s) URL" in result.message
    assert head.call_count == 1


def test_invalid_location_is_a_protocol_error_not_retried(router: respx.Router) -> None:
    router.get(f"{REGISTRY}/v2/").respond(200)
    head = router.head(f"{REGISTRY}/v2/app/manifests/1.0").mock(
        return_value=redirect("http://0251.0376.0251.0376/")
    )
    result = run_check(router)
    assert result.status is Status.ERROR
    assert "redirected to an invalid URL" in result.message
    assert head.call_count == 1


def test_named_link_local_registry_may_redirect_to_itself_only(router: respx.Router) -> None:
    base = "https://169.254.7.7"
    router.get(f"{base}/v2/").respond(200)
    router.head(f"{base}/v2/app/manifests/1").mock(return_value=redirect(f"{base}:8443/blobs/app"))
    router.head(f"{base}:8443/blobs/app").respond(200, headers={"Docker-Content-Digest": DIGEST})
    assert run_check(router, "169.254.7.7/app:1").status is Status.FOUND

    router.head(f"{base}/v2/app/manifests/2").mock(return_value=redirect("https://169.254.7.8/"))
    other = router.route(host="169.254.7.8").respond(200)
    result = run_check(router, "169.254.7.7/app:2")
    assert result.status is Status.ERROR
    assert "a link-local address" in result.message
    assert not other.called


def test_metadata_address_is_refused_even_as_the_named_registry(router: respx.Router) -> None:
    leak = router.route().respond(200)
    result = run_check(router, "169.254.169.254/latest:meta-data")
    assert result.status is Status.ERROR
    assert "cloud metadata service address" in result.message
    assert not leak.called


def test_https_to_http_downgrade_drops_authorization(router: respx.Router) -> None:
    """Same host, plain http: httpx's cross-origin rule strips the credentials."""
    router.get(f"{REGISTRY}/v2/").respond(200)
    router.head(f"{REGISTRY}/v2/app/manifests/1.0").mock(
        side_effect=[
            httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="r"'}),
            redirect("http://registry.test/plain/app"),
        ]
    )
    plain = router.head("http://registry.test/plain/app").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    assert run_check(router, keychain=ALICE).status is Status.FOUND
    assert plain.call_count == 1
    assert "Authorization" not in plain.calls.last.request.headers


def test_oauth_post_is_not_redirected_with_the_refresh_token(router: respx.Router) -> None:
    """A 307 re-sends the POST body, refresh token included, to wherever it points: the
    POST is not redirected; the GET form, whose credentials httpx strips, answers instead."""
    router.get(f"{REGISTRY}/v2/").respond(
        401, headers={"WWW-Authenticate": f'Bearer realm="{REALM}",service="registry.test"'}
    )
    router.post(REALM).respond(307, headers={"Location": "https://elsewhere.test/token"})
    router.get(REALM).respond(200, json={"token": "granted"})
    other = router.route(host="elsewhere.test").respond(200, json={"token": "stolen"})
    head = router.head(f"{REGISTRY}/v2/app/manifests/1.0").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    keychain = StaticKeychain(Credentials(identity_token=REFRESH, source="config"))
    assert run_check(router, keychain=keychain).status is Status.FOUND
    assert not other.called
    assert head.calls.last.request.headers["Authorization"] == "Bearer granted"


def test_no_name_is_resolved_before_the_guard(
    router: respx.Router, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the real transport: a realm on a metadata name is refused before any lookup."""
    looked_up: list[Any] = []

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        looked_up.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no lookups in this test")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    async def main() -> CheckResult:
        async with ImageChecker(ClientOptions(retries=0)) as checker:
            ref = parse_reference("metadata.google.internal/app:1")
            return await checker.check(ref, Deadline.after(10))

    result = asyncio.run(main())
    assert result.status is Status.ERROR
    assert "cloud metadata service name" in result.message
    assert looked_up == []


def test_token_query_survives_the_guard(router: respx.Router) -> None:
    """The realm on the registry's own link-local host is still asked, with the scope."""
    base = "https://169.254.1.1"
    router.get(f"{base}/v2/").respond(
        401, headers={"WWW-Authenticate": f'Bearer realm="{base}/token",service="s"'}
    )
    token = router.get(f"{base}/token").respond(200, json={"token": "t"})
    router.head(f"{base}/v2/app/manifests/1").respond(200)
    assert run_check(router, "169.254.1.1/app:1").status is Status.FOUND
    assert parse_qs(token.calls.last.request.url.query.decode())["scope"] == ["repository:app:pull"]
