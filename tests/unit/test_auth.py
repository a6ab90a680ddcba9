"""Tests for imagecheck.registry._auth through :class:`ImageChecker`, the network faked with respx.

Each test sets up a registry (``registry.test``) and a token service (``auth.test``) as respx
routes, runs a check, and asserts on the answer and on what the fake servers *received*: the
token request's ``service`` and ``scope``, the ``Authorization`` the registry saw. Token
expiry is tested on ``parse_token_response`` / ``TokenCache`` directly, because
``ImageChecker`` does not take a clock.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Sequence
from urllib.parse import parse_qs

import httpx
import pytest
import respx

from imagecheck._capped import MAX_TOKEN_RESPONSE
from imagecheck._deadline import Deadline
from imagecheck.authn import AnonymousKeychain, ChainKeychain, Credentials, Keychain
from imagecheck.authn._credentials import StaticKeychain
from imagecheck.errors import Hint, ProtocolError
from imagecheck.reference import Reference, parse_reference
from imagecheck.registry import ClientOptions, ImageChecker
from imagecheck.registry._auth import TokenCache, names_host, names_realm
from imagecheck.registry._retry import RetryPolicy
from imagecheck.registry._tokens import (
    DEFAULT_EXPIRES_IN,
    MAX_EXPIRES_IN,
    Token,
    parse_token_response,
)
from imagecheck.result import CheckResult, Status

REGISTRY = "https://registry.test"
REALM = "https://auth.test/token"
BEARER = f'Bearer realm="{REALM}",service="registry.test"'
BASIC = 'Basic realm="Registry Realm"'
DIGEST = "sha256:" + "ab" * 32
PASSWORD = "pa55-SECRET-word"
ALICE = Credentials(username="alice", password=PASSWORD, source="--username")

pytestmark = pytest.mark.usefixtures("small_trust_store")


# -- harness -----------------------------------------------------------------------------------


class Sleeps:
    """A no-op async sleep that records the waits."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class ListKeychain:
    """Offers the same candidates, in order, for every reference."""

    def __init__(self, *candidates: Credentials) -> None:
        self.candidates = candidates

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        return self.candidates


def checks(
    router: respx.Router,
    images: Sequence[str],
    *,
    keychain: Keychain | None = None,
    concurrent: bool = False,
    sleeps: Sleeps | None = None,
) -> list[CheckResult]:
    """Check ``images`` with one ImageChecker: one after another, or with ``check_many``."""

    async def main() -> list[CheckResult]:
        async with ImageChecker(
            ClientOptions(concurrency=16),
            keychain,
            transport=httpx.MockTransport(router.async_handler),
            retry_policy=RetryPolicy(retries=3, sleep=sleeps or Sleeps(), rng=lambda: 0.0),
        ) as checker:
            deadline = Deadline.after(30)
            if concurrent:
                items = [(image, parse_reference(image)) for image in images]
                return await checker.check_many(items, deadline)
            return [await checker.check(parse_reference(i), deadline) for i in images]

    return asyncio.run(main())


def check(router: respx.Router, image: str, keychain: Keychain | None = None) -> CheckResult:
    return checks(router, [image], keychain=keychain)[0]


def ping(router: respx.Router, challenge: str | None) -> respx.Route:
    if challenge is None:
        return router.get(f"{REGISTRY}/v2/").respond(200)
    return router.get(f"{REGISTRY}/v2/").respond(401, headers={"WWW-Authenticate": challenge})


def manifest(router: respx.Router, repo: str = "app", ident: str = "1.0") -> respx.Route:
    return router.head(f"{REGISTRY}/v2/{repo}/manifests/{ident}")


class Replies:
    """A respx side effect that answers in turn (the last answer repeats) and snapshots each
    request's ``Authorization``: the auth flow re-sends the *same* request object with new
    headers, so ``route.calls`` alone would show only the last value."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.auth: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.auth.append(request.headers.get("Authorization"))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


def found() -> httpx.Response:
    return httpx.Response(200, headers={"Docker-Content-Digest": DIGEST})


def unauthorized(challenge: str = BEARER) -> httpx.Response:
    return httpx.Response(401, headers={"WWW-Authenticate": challenge})


def token_route(router: respx.Router, realm: str = REALM) -> respx.Route:
    return router.get(realm)


def auth_of(route: respx.Route, index: int = -1) -> str | None:
    request: httpx.Request = route.calls[index].request
    value: str | None = request.headers.get("Authorization")
    return value


def params_of(route: respx.Route, index: int = -1) -> dict[str, str]:
    return dict(route.calls[index].request.url.params)


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


# -- no challenge ------------------------------------------------------------------------------


def test_open_registry_gets_no_authorization(router: respx.Router) -> None:
    pinged = ping(router, None)
    head = manifest(router).mock(return_value=found())
    token = token_route(router)
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert result.status is Status.FOUND
    assert pinged.call_count == 1
    assert auth_of(pinged) is None
    assert head.call_count == 1
    assert auth_of(head) is None  # credentials are not offered unasked
    assert not token.called


# -- Bearer ------------------------------------------------------------------------------------

# (id, token response body, token expected on the HEAD)
TOKEN_BODIES: list[tuple[str, dict[str, object], str]] = [
    ("token", {"token": "tok-1"}, "tok-1"),
    ("access_token-only", {"access_token": "tok-2"}, "tok-2"),
    ("both-token-wins", {"token": "tok-3", "access_token": "other"}, "tok-3"),
    ("empty-token-uses-access_token", {"token": "", "access_token": "tok-4"}, "tok-4"),
    ("with-expiry", {"token": "tok-5", "expires_in": 300, "issued_at": "2024-01-01T00:00:00Z"},
     "tok-5"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "expected"), [c[1:] for c in TOKEN_BODIES], ids=[c[0] for c in TOKEN_BODIES]
)
def test_bearer_token_exchange(
    router: respx.Router, body: dict[str, object], expected: str
) -> None:
    pinged = ping(router, BEARER)
    token = token_route(router).respond(200, json=body)
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0")
    assert result.status is Status.FOUND
    assert pinged.call_count == 1
    assert token.call_count == 1
    assert params_of(token) == {"service": "registry.test", "scope": "repository:app:pull"}
    assert auth_of(token) is None  # anonymous token request
    assert head.call_count == 1
    assert auth_of(head) == f"Bearer {expected}"


# (id, image, HEAD path, expected scope)
SCOPES: list[tuple[str, str, str, str]] = [
    ("one-component", "registry.test/app:1.0", "/v2/app/manifests/1.0", "repository:app:pull"),
    ("nested", "registry.test/team/sub/app:v2", "/v2/team/sub/app/manifests/v2",
     "repository:team/sub/app:pull"),
    ("digest", f"registry.test/app@{DIGEST}", f"/v2/app/manifests/{DIGEST}",
     "repository:app:pull"),
    ("repo-named-manifests", "registry.test/x/manifests/y:1", "/v2/x/manifests/y/manifests/1",
     "repository:x/manifests/y:pull"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("image", "path", "scope"), [c[1:] for c in SCOPES], ids=[c[0] for c in SCOPES]
)
def test_bearer_scope_names_the_repository(
    router: respx.Router, image: str, path: str, scope: str
) -> None:
    ping(router, BEARER)
    token = token_route(router).respond(200, json={"token": "t"})
    head = router.head(f"{REGISTRY}{path}").mock(return_value=found())
    assert check(router, image).status is Status.FOUND
    assert params_of(token)["scope"] == scope
    assert auth_of(head) == "Bearer t"


def test_challenge_scope_and_extra_params_do_not_leak_into_token_request(
    router: respx.Router,
) -> None:
    # The scope comes from the request, not from the ping's challenge.
    ping(router, f'Bearer realm="{REALM}",service="svc",scope="registry:catalog:*"')
    token = token_route(router).respond(200, json={"token": "t"})
    manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0").status is Status.FOUND
    assert params_of(token) == {"service": "svc", "scope": "repository:app:pull"}


def test_bearer_without_service(router: respx.Router) -> None:
    ping(router, f'Bearer realm="{REALM}"')
    token = token_route(router).respond(200, json={"token": "t"})
    manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0").status is Status.FOUND
    assert params_of(token) == {"scope": "repository:app:pull"}


def test_bearer_with_basic_credentials(router: respx.Router) -> None:
    ping(router, BEARER)
    token = token_route(router).respond(200, json={"token": "t"})
    head = manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0", StaticKeychain(ALICE)).status is Status.FOUND
    assert auth_of(token) == basic("alice", PASSWORD)
    assert params_of(token) == {
        "service": "registry.test",
        "scope": "repository:app:pull",
        "account": "alice",
    }
    assert auth_of(head) == "Bearer t"  # the password itself never reaches the registry


def test_open_ping_then_challenge_on_the_repository(router: respx.Router) -> None:
    # Some registries leave /v2/ open and challenge only on the repository.
    ping(router, None)
    token = token_route(router).respond(200, json={"token": "t"})
    replies = Replies(unauthorized(), found())
    manifest(router).mock(side_effect=replies)
    assert check(router, "registry.test/app:1.0").status is Status.FOUND
    assert token.call_count == 1
    assert replies.auth == [None, "Bearer t"]


def test_bearer_without_realm_is_an_error(router: respx.Router) -> None:
    ping(router, 'Bearer service="registry.test"')
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0")
    assert result.status is Status.ERROR
    assert "without a realm" in result.message
    assert not head.called


# -- sharing: one ping and one token per repository --------------------------------------------


def test_one_ping_one_token_for_many_tags(router: respx.Router) -> None:
    pinged = ping(router, BEARER)
    token = token_route(router).respond(200, json={"token": "shared"})
    head = router.head(url__regex=rf"^{REGISTRY}/v2/app/manifests/").mock(return_value=found())
    images = [f"registry.test/app:{n}" for n in range(20)]
    results = checks(router, images, concurrent=True)
    assert [r.status for r in results] == [Status.FOUND] * 20
    assert [r.image for r in results] == images
    assert pinged.call_count == 1
    assert token.call_count == 1
    assert head.call_count == 20
    assert {auth_of(head, i) for i in range(20)} == {"Bearer shared"}
    assert sorted(c.request.url.path for c in head.calls) == sorted(
        f"/v2/app/manifests/{n}" for n in range(20)
    )


def test_one_token_per_repository(router: respx.Router) -> None:
    pinged = ping(router, BEARER)

    def issue(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"token": "tok:" + request.url.params["scope"]})

    token = token_route(router).mock(side_effect=issue)
    head = router.head(url__regex=rf"^{REGISTRY}/v2/").mock(return_value=found())
    images = [f"registry.test/{repo}:{n}" for repo in ("one", "two") for n in range(5)]
    results = checks(router, images, concurrent=True)
    assert {r.status for r in results} == {Status.FOUND}
    assert pinged.call_count == 1
    assert token.call_count == 2
    assert sorted(params_of(token, i)["scope"] for i in range(2)) == [
        "repository:one:pull",
        "repository:two:pull",
    ]
    for call in head.calls:
        repo = call.request.url.path.split("/")[2]
        assert call.request.headers["Authorization"] == f"Bearer tok:repository:{repo}:pull"


def test_duplicate_references_checked_once(router: respx.Router) -> None:
    ping(router, BEARER)
    token_route(router).respond(200, json={"token": "t"})
    head = manifest(router).mock(return_value=found())
    results = checks(router, ["registry.test/app:1.0", "registry.test/app:1.0"], concurrent=True)
    assert [r.status for r in results] == [Status.FOUND, Status.FOUND]
    assert head.call_count == 1


# -- 401 on a cached token, 401 on a fresh token -----------------------------------------------


def test_401_on_cached_token_fetches_a_new_one_once(router: respx.Router) -> None:
    ping(router, BEARER)
    token = token_route(router).mock(
        side_effect=[
            httpx.Response(200, json={"token": "old"}),
            httpx.Response(200, json={"token": "new"}),
        ]
    )
    first = manifest(router, ident="1").mock(return_value=found())

    revoked = Replies(unauthorized(), found())  # "old" went stale on the registry's side
    manifest(router, ident="2").mock(side_effect=revoked)
    results = checks(router, ["registry.test/app:1", "registry.test/app:2"])
    assert [r.status for r in results] == [Status.FOUND, Status.FOUND]
    assert token.call_count == 2
    assert auth_of(first) == "Bearer old"
    assert revoked.auth == ["Bearer old", "Bearer new"]


def test_401_on_cached_then_on_refreshed_token_is_denied(router: respx.Router) -> None:
    ping(router, BEARER)
    token = token_route(router).respond(200, json={"token": "t"})
    manifest(router, ident="1").mock(return_value=found())
    second = Replies(unauthorized())
    manifest(router, ident="2").mock(side_effect=second)
    results = checks(router, ["registry.test/app:1", "registry.test/app:2"])
    assert [r.status for r in results] == [Status.FOUND, Status.DENIED]
    assert token.call_count == 2  # one refresh, not a loop
    assert second.auth == ["Bearer t", "Bearer t"]


def test_401_on_fresh_token_is_denied_not_retried(router: respx.Router) -> None:
    ping(router, BEARER)
    token = token_route(router).respond(200, json={"token": "t"})
    head = manifest(router).mock(return_value=unauthorized())
    result = check(router, "registry.test/app:1.0")
    assert result.status is Status.DENIED
    assert "does not exist or requires authorization" in result.message
    assert "registry.test/app" in result.message
    assert "anonymously" in result.message
    assert token.call_count == 1
    assert head.call_count == 1


def test_next_candidate_tried_when_token_service_refuses_the_first(router: respx.Router) -> None:
    # As the kubelet does with several matching pull secrets.
    ping(router, BEARER)
    wrong = Credentials(username="wrong", password="nope", source="secret-a")
    right = Credentials(username="right", password="yes", source="secret-b")

    def service(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") == basic("right", "yes"):
            return httpx.Response(200, json={"token": "t-right"})
        return httpx.Response(401)

    token = token_route(router).mock(side_effect=service)
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0", ListKeychain(wrong, right))
    assert result.status is Status.FOUND
    assert [auth_of(token, i) for i in range(2)] == [basic("wrong", "nope"), basic("right", "yes")]
    assert head.call_count == 1
    assert auth_of(head) == "Bearer t-right"


# -- Basic -------------------------------------------------------------------------------------

# (id, keychain, Authorization expected on the HEAD)
BASIC_CASES: list[tuple[str, Keychain | None, str | None]] = [
    ("static", StaticKeychain(ALICE), basic("alice", PASSWORD)),
    ("static-for-this-registry", StaticKeychain(ALICE, registry="registry.test"),
     basic("alice", PASSWORD)),
    ("chain", ChainKeychain((AnonymousKeychain(), StaticKeychain(ALICE))),
     basic("alice", PASSWORD)),
    ("utf8-password", StaticKeychain(Credentials(username="zoë", password="pässword")),
     basic("zoë", "pässword")),
    ("static-for-another-registry", StaticKeychain(ALICE, registry="other.test"), None),
    ("anonymous-default", None, None),
    ("anonymous-explicit", AnonymousKeychain(), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("keychain", "expected"), [c[1:] for c in BASIC_CASES], ids=[c[0] for c in BASIC_CASES]
)
def test_basic_challenge(
    router: respx.Router, keychain: Keychain | None, expected: str | None
) -> None:
    ping(router, BASIC)
    token = token_route(router)

    def registry(request: httpx.Request) -> httpx.Response:
        accepted = {basic("alice", PASSWORD), basic("zoë", "pässword")}
        return found() if request.headers.get("Authorization") in accepted else unauthorized(BASIC)

    head = manifest(router).mock(side_effect=registry)
    result = check(router, "registry.test/app:1.0", keychain)
    assert head.call_count == 1
    assert auth_of(head) == expected
    assert result.status is (Status.FOUND if expected else Status.DENIED)
    assert not token.called


def test_basic_credentials_refused_by_registry(router: respx.Router) -> None:
    ping(router, BASIC)
    head = manifest(router).mock(return_value=unauthorized(BASIC))
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert result.status is Status.DENIED
    assert "(HTTP 401 with credentials from --username)" in result.message
    assert PASSWORD not in result.message
    assert head.call_count == 1


def test_basic_preferred_less_than_bearer(router: respx.Router) -> None:
    ping(router, f"{BASIC}, {BEARER}")
    token = token_route(router).respond(200, json={"token": "t"})
    head = manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0", StaticKeychain(ALICE)).status is Status.FOUND
    assert token.call_count == 1
    assert auth_of(head) == "Bearer t"


# -- identity tokens and registry tokens -------------------------------------------------------

IDENTITY = Credentials(username="<token>", identity_token="refresh-SECRET", source="config.json")


def test_identity_token_uses_oauth2_post(router: respx.Router) -> None:
    ping(router, BEARER)
    post = router.post(REALM).respond(200, json={"access_token": "from-oauth"})
    get = token_route(router).respond(200, json={"token": "from-get"})
    head = manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0", StaticKeychain(IDENTITY)).status is Status.FOUND
    assert post.call_count == 1
    request = post.calls.last.request
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
    assert form == {
        "grant_type": "refresh_token",
        "refresh_token": "refresh-SECRET",
        "service": "registry.test",
        "scope": "repository:app:pull",
        "client_id": "imagecheck",
    }
    assert not get.called
    assert auth_of(head) == "Bearer from-oauth"


@pytest.mark.parametrize("status", [404, 405], ids=["post-404", "post-405"])
def test_identity_token_falls_back_to_get(router: respx.Router, status: int) -> None:
    ping(router, BEARER)
    post = router.post(REALM).respond(status)
    get = token_route(router).respond(200, json={"token": "from-get"})
    head = manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0", StaticKeychain(IDENTITY)).status is Status.FOUND
    assert post.call_count == 1
    assert get.call_count == 1
    assert params_of(get)["scope"] == "repository:app:pull"
    assert params_of(get)["service"] == "registry.test"
    assert auth_of(get) == basic("<token>", "refresh-SECRET")
    assert auth_of(head) == "Bearer from-get"


def test_registry_token_is_used_directly(router: respx.Router) -> None:
    ping(router, BEARER)
    token = token_route(router).respond(200, json={"token": "not-this"})
    post = router.post(REALM).respond(200, json={"token": "not-this"})
    head = manifest(router).mock(return_value=found())
    creds = Credentials(registry_token="registry-bearer", source="config.json")
    assert check(router, "registry.test/app:1.0", StaticKeychain(creds)).status is Status.FOUND
    assert not token.called
    assert not post.called
    assert auth_of(head) == "Bearer registry-bearer"


# -- refusals ----------------------------------------------------------------------------------

# (id, keychain, token service status, words in the message)
REFUSALS: list[tuple[str, Keychain | None, int, str]] = [
    ("creds-401", StaticKeychain(ALICE), 401, "refused credentials from --username (HTTP 401"),
    ("creds-403", StaticKeychain(ALICE), 403, "refused credentials from --username (HTTP 403"),
    ("anonymous-401", None, 401, "refused anonymous access (HTTP 401)"),
    ("identity-token-401", StaticKeychain(IDENTITY), 401, "refused credentials from config.json"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("keychain", "status", "words"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_token_service_refusal_is_denied(
    router: respx.Router, keychain: Keychain | None, status: int, words: str
) -> None:
    ping(router, BEARER)
    token = token_route(router).respond(status, json={"details": "incorrect username or password"})
    post = router.post(REALM).respond(status)
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0", keychain)
    assert result.status is Status.DENIED
    assert "token service auth.test" in result.message
    assert words in result.message
    assert PASSWORD not in result.message
    assert "refresh-SECRET" not in result.message
    assert token.call_count + post.call_count == 1  # refused credentials are not retried
    assert not head.called


# (id, challenge realm, words in the message)
BAD_REALMS: list[tuple[str, str, str]] = [
    ("metadata-ipv4", "https://169.254.169.254/latest/meta-data", "cloud metadata service"),
    ("link-local-http", "http://169.254.10.1/token", "refusing token realm"),
    ("link-local-ipv6", "https://[fe80::1]/token", "a link-local address"),
    ("metadata-ipv6", "https://[fd00:ec2::254]/token", "cloud metadata service"),
    ("metadata-name", "https://metadata.google.internal/token", "cloud metadata service name"),
    ("metadata-name-spelled", "https://Metadata.Google.Internal./t", "cloud metadata service"),
    ("alibaba-metadata", "https://100.100.100.200/latest", "cloud metadata service address"),
    ("not-http", "ftp://auth.test/token", "not an http(s) URL"),
    ("relative", "/token", "not an http(s) URL"),
]


@pytest.mark.parametrize(
    ("realm", "words"), [c[1:] for c in BAD_REALMS], ids=[c[0] for c in BAD_REALMS]
)
def test_dangerous_realm_is_refused(router: respx.Router, realm: str, words: str) -> None:
    ping(router, f'Bearer realm="{realm}",service="registry.test"')
    anywhere = router.route(url__regex=r"^(?!https://registry\.test/).*").respond(
        200, json={"token": "t"}
    )
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert result.status is Status.ERROR
    assert words in result.message
    assert not anywhere.called  # the credentials went nowhere
    assert not head.called


# -- a plain-HTTP realm for an HTTPS registry (Harbor, Nexus behind a TLS-terminating proxy) ----

HTTP_REALM = "http://auth.test/token"
HTTP_BEARER = f'Bearer realm="{HTTP_REALM}",service="registry.test"'


def _checked(router: respx.Router, keychain: Keychain | None, **options: object) -> CheckResult:
    async def main() -> CheckResult:
        async with ImageChecker(
            ClientOptions(**options),  # type: ignore[arg-type]
            keychain,
            transport=httpx.MockTransport(router.async_handler),
            retry_policy=RetryPolicy(retries=3, sleep=Sleeps(), rng=lambda: 0.0),
        ) as checker:
            return await checker.check(parse_reference("registry.test/app:1.0"), Deadline.after(30))

    return asyncio.run(main())


def test_http_realm_is_followed_anonymously(router: respx.Router) -> None:
    # No secret to protect: as containerd, follow the realm the registry names.
    ping(router, HTTP_BEARER)
    plain = router.get(HTTP_REALM).respond(200, json={"token": "anon"})
    twin = router.get("https://auth.test/token").respond(200, json={"token": "t"})
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0")
    assert result.status is Status.FOUND
    assert plain.call_count == 1
    assert "Authorization" not in plain.calls.last.request.headers
    assert not twin.called
    assert head.calls.last.request.headers["Authorization"] == "Bearer anon"


def test_http_realm_credentials_go_to_its_https_twin(router: respx.Router) -> None:
    ping(router, HTTP_BEARER)
    plain = router.get(HTTP_REALM).respond(200, json={"token": "plain"})
    twin = router.get("https://auth.test/token").respond(200, json={"token": "tls"})
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert result.status is Status.FOUND
    assert not plain.called  # the secret never went over plain HTTP
    assert twin.calls.last.request.headers["Authorization"].startswith("Basic ")
    assert head.calls.last.request.headers["Authorization"] == "Bearer tls"


def test_http_realm_twin_answer_counts(router: respx.Router) -> None:
    # HTTPS answers: it is the token service, and its 401 is its answer about the credentials.
    ping(router, HTTP_BEARER)
    plain = router.get(HTTP_REALM).respond(200, json={"token": "plain"})
    router.get("https://auth.test/token").respond(401)
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert result.status is Status.DENIED
    assert not plain.called


@pytest.mark.parametrize(
    "failure",
    [httpx.ConnectError("connection refused"), httpx.ConnectTimeout("timed out")],
    ids=["refused", "timeout"],
)
def test_http_realm_without_https_twin_keeps_credentials(
    router: respx.Router, failure: Exception
) -> None:
    ping(router, HTTP_BEARER)
    plain = router.get(HTTP_REALM).respond(200, json={"token": "plain"})
    twin = router.get("https://auth.test/token").mock(side_effect=failure)
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert result.status is Status.ERROR
    assert result.message.startswith(
        "token realm http://auth.test is plain HTTP and https://auth.test cannot be reached ("
    )
    assert result.message.endswith("credentials are not sent over plain HTTP")
    assert result.hint == Hint("auth.test")
    assert PASSWORD not in result.message and "alice" not in result.message
    assert not plain.called
    assert twin.call_count == 1  # not retried: no retry sends them
    assert not head.called


@pytest.mark.parametrize(
    "insecure", ["auth.test", "auth.test:80", "AUTH.test"], ids=["host", "host-port", "case"]
)
def test_http_realm_named_insecure_gets_credentials(router: respx.Router, insecure: str) -> None:
    ping(router, HTTP_BEARER)
    plain = router.get(HTTP_REALM).respond(200, json={"token": "plain"})
    twin = router.get("https://auth.test/token").respond(200, json={"token": "tls"})
    head = manifest(router).mock(return_value=found())
    result = _checked(router, StaticKeychain(ALICE), insecure_registries=frozenset({insecure}))
    assert result.status is Status.FOUND
    assert not twin.called
    assert plain.calls.last.request.headers["Authorization"].startswith("Basic ")
    assert head.calls.last.request.headers["Authorization"] == "Bearer plain"


def test_http_realm_with_port_keeps_the_port(router: respx.Router) -> None:
    ping(router, 'Bearer realm="http://auth.test:8080/svc/token",service="s"')
    twin = router.get("https://auth.test:8080/svc/token").mock(side_effect=httpx.ConnectError)
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert result.status is Status.ERROR
    assert twin.call_count == 1
    assert result.hint == Hint("auth.test:8080")


# Other spellings of the cloud metadata address, which the resolver and the socket layer reach
# just as well as 169.254.169.254.
METADATA_SPELLINGS: list[tuple[str, str]] = [
    ("ipv4-mapped-ipv6", "https://[::ffff:169.254.169.254]/token"),
    ("decimal-ipv4", "https://2852039166/token"),
    ("hex-ipv4", "https://0xa9fea9fe/token"),
    ("octal-ipv4", "https://0251.0376.0251.0376/token"),
    ("short-ipv4", "https://169.254.43518/token"),
    ("nat64", "https://[64:ff9b::a9fe:a9fe]/token"),
    ("trailing-dot", "https://169.254.169.254./token"),
]


@pytest.mark.parametrize(
    "realm", [c[1] for c in METADATA_SPELLINGS], ids=[c[0] for c in METADATA_SPELLINGS]
)
def test_metadata_address_in_other_spellings_is_refused(router: respx.Router, realm: str) -> None:
    ping(router, f'Bearer realm="{realm}",service="registry.test"')
    anywhere = router.route(url__regex=r"^(?!https://registry\.test/).*").respond(
        200, json={"token": "t"}
    )
    manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0", StaticKeychain(ALICE))
    assert not anywhere.called
    assert result.status is Status.ERROR


def test_realm_on_the_registry_own_link_local_host_is_allowed(router: respx.Router) -> None:
    base = "https://169.254.1.1"
    router.get(f"{base}/v2/").respond(
        401, headers={"WWW-Authenticate": f'Bearer realm="{base}/token",service="s"'}
    )
    token = router.get(f"{base}/token").respond(200, json={"token": "t"})
    router.head(f"{base}/v2/app/manifests/1").respond(200)
    assert check(router, "169.254.1.1/app:1").status is Status.FOUND
    assert token.call_count == 1


# (id, token response, words in the message)
BAD_TOKEN_RESPONSES: list[tuple[str, httpx.Response, str]] = [
    ("over-64-KiB", httpx.Response(200, json={"token": "t" * MAX_TOKEN_RESPONSE}),
     "larger than 65536 bytes"),
    ("not-json", httpx.Response(200, text="<html>login</html>"), "not valid JSON"),
    ("json-not-object", httpx.Response(200, json=["t"]), "not a JSON object"),
    ("no-token", httpx.Response(200, json={"expires_in": 60}), "without a token"),
    ("token-not-string", httpx.Response(200, json={"token": 42}), "without a token"),
    ("unexpected-status", httpx.Response(400), "answered HTTP 400"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("response", "words"),
    [c[1:] for c in BAD_TOKEN_RESPONSES],
    ids=[c[0] for c in BAD_TOKEN_RESPONSES],
)
def test_bad_token_response_is_an_error(
    router: respx.Router, response: httpx.Response, words: str
) -> None:
    ping(router, BEARER)
    token = token_route(router).mock(return_value=response)
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0")
    assert result.status is Status.ERROR
    assert words in result.message
    assert token.call_count == 1  # not retried
    assert not head.called


def test_token_response_at_the_limit_is_accepted(router: respx.Router) -> None:
    ping(router, BEARER)
    body = json.dumps({"token": "t"}).encode()
    body += b" " * (MAX_TOKEN_RESPONSE - len(body))
    token_route(router).respond(200, content=body)
    manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0").status is Status.FOUND


def test_token_service_transient_failure_is_retried(router: respx.Router) -> None:
    ping(router, BEARER)
    token = token_route(router).mock(
        side_effect=[
            httpx.Response(503, headers={"Retry-After": "2"}),
            httpx.Response(200, json={"token": "t"}),
        ]
    )
    head = manifest(router).mock(return_value=found())
    sleeps = Sleeps()
    [result] = checks(router, ["registry.test/app:1.0"], sleeps=sleeps)
    assert result.status is Status.FOUND
    assert token.call_count == 2
    assert sleeps.waits == [2.0]
    assert auth_of(head) == "Bearer t"


def test_token_redirect_to_other_host_drops_credentials(router: respx.Router) -> None:
    ping(router, BEARER)
    token_route(router).respond(307, headers={"Location": "https://elsewhere.test/token"})
    moved = router.get("https://elsewhere.test/token").respond(200, json={"token": "t"})
    manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0", StaticKeychain(ALICE)).status is Status.FOUND
    assert moved.call_count == 1
    assert auth_of(moved) is None


# -- token lifetime (no clock can be injected through ImageChecker) -----------------------------

# (id, expires_in in the response, seconds the token is used for)
LIFETIMES: list[tuple[str, object, float]] = [
    ("absent-default-60", None, DEFAULT_EXPIRES_IN - 5),
    ("300", 300, 295.0),
    ("3600", 3600, 3595.0),
    ("float", 90.5, 85.5),
    ("short-margin-is-a-tenth", 30, 27.0),
    ("very-short-at-least-1s", 1, 1.0),
    ("zero-default", 0, DEFAULT_EXPIRES_IN - 5),
    ("negative-default", -10, DEFAULT_EXPIRES_IN - 5),
    ("string-default", "300", DEFAULT_EXPIRES_IN - 5),
]


@pytest.mark.parametrize(
    ("expires_in", "lifetime"), [c[1:] for c in LIFETIMES], ids=[c[0] for c in LIFETIMES]
)
def test_token_expiry(expires_in: object, lifetime: float) -> None:
    body: dict[str, object] = {"token": "t"}
    if expires_in is not None:
        body["expires_in"] = expires_in
    token = parse_token_response(json.dumps(body).encode(), now=1000.0)
    assert token.value == "t"
    assert token.expires_at == pytest.approx(1000.0 + lifetime)


def test_token_cache_honours_expiry() -> None:
    cache = TokenCache()
    key = ("https://auth.test/token", "registry.test", "repository:app:pull", "anonymous")
    token = parse_token_response(b'{"token": "t", "expires_in": 300}', now=1000.0)
    cache.put(key, token)
    assert cache.get(key, now=1000.0) is token
    assert cache.get(key, now=1294.9) is token
    assert cache.get(key, now=1295.0) is None
    assert cache.get((*key[:3], "other-credentials"), now=1000.0) is None


def test_token_repr_hides_the_value() -> None:
    assert "SECRET" not in repr(Token("SECRET", 1.0))


def test_parse_token_response_errors_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError):
        parse_token_response(b"\xff", now=0.0)


# (id, token answer, words in the error): hostile answers are a ProtocolError, never a crash.
HOSTILE_TOKEN_ANSWERS: list[tuple[str, bytes, str]] = [
    ("16-KiB-of-[", b"[" * 16384, "token response is nested too deeply"),
    ("5000-digit-number", b'{"token": "t", "expires_in": ' + b"1" * 5000 + b"}",
     "token response is not valid JSON"),
    ("NaN", b'{"token": "t", "expires_in": NaN}', "token response is not valid JSON"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "words"),
    [c[1:] for c in HOSTILE_TOKEN_ANSWERS],
    ids=[c[0] for c in HOSTILE_TOKEN_ANSWERS],
)
def test_hostile_token_answer_is_a_protocol_error(body: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        parse_token_response(body, now=0.0)


@pytest.mark.parametrize(
    ("expires_in", "lifetime"),
    [
        pytest.param(b"9" * 400, MAX_EXPIRES_IN, id="400-digits-capped-not-overflowing"),
        pytest.param(b"1e308", MAX_EXPIRES_IN, id="huge-float-capped"),
        pytest.param(b"true", DEFAULT_EXPIRES_IN, id="boolean-default"),
    ],
)
def test_token_lifetime_of_odd_numbers(expires_in: bytes, lifetime: float) -> None:
    token = parse_token_response(b'{"token": "t", "expires_in": ' + expires_in + b"}", now=0.0)
    assert token.expires_at == pytest.approx(lifetime - min(5.0, lifetime / 10))


def test_token_service_error_body_is_not_read_whole(router: respx.Router) -> None:
    """Only a 200 carries a token: a 503's page (however large) is not read, and the answer
    is the transient error it is, not a 'larger than' refusal."""
    ping(router, BEARER)
    token_route(router).mock(
        side_effect=[
            httpx.Response(503, content=b"<html>" + b"x" * (2 * MAX_TOKEN_RESPONSE)),
            httpx.Response(200, json={"token": "t"}),
        ]
    )
    manifest(router).mock(return_value=found())
    assert check(router, "registry.test/app:1.0").status is Status.FOUND


@pytest.mark.parametrize(
    "token", ["tok-SECRET\n", "tok-SECRET\r\nX-Injected: 1", "tok SECRET", "\x00tok-SECRET"]
)
def test_token_that_cannot_be_a_header_is_a_protocol_error_never_echoed(
    router: respx.Router, token: str
) -> None:
    ping(router, BEARER)
    route = token_route(router).respond(200, json={"token": token})
    head = manifest(router).mock(return_value=found())
    result = check(router, "registry.test/app:1.0")
    assert result.status is Status.ERROR
    assert result.message == "token service answered a token that " + (
        "contains whitespace or a control character (a trailing newline?)"
    )
    assert route.call_count == 1  # a protocol error: not retried
    assert not head.called


# The one matcher of insecure hosts, for the registry (ping) and its realm (names_realm).
NAMES_HOST = [
    ("host-any-port", {"reg.test"}, ("reg.test", 5000), True),
    ("host-port", {"reg.test:5000"}, ("reg.test", 5000), True),
    ("other-port", {"reg.test:5001"}, ("reg.test", 5000), False),
    ("default-port-spelled", {"reg.test:443"}, ("reg.test", 443), True),
    ("any-case", {"REG.Test"}, ("reg.test", 443), True),
    ("ipv6-bracketed", {"[fd00::1]"}, ("fd00::1", 443), True),
    ("ipv6-bare", {"fd00::1"}, ("fd00::1", 443), True),
    ("ipv6-port", {"[fd00::1]:5000"}, ("fd00::1", 5000), True),
    ("other-host", {"reg.test.evil"}, ("reg.test", 443), False),
    ("suffix-is-not-a-match", {"test"}, ("reg.test", 443), False),
]


@pytest.mark.parametrize(
    ("names", "where", "named"), [c[1:] for c in NAMES_HOST], ids=[c[0] for c in NAMES_HOST]
)
def test_names_host(names: set[str], where: tuple[str, int], named: bool) -> None:
    assert names_host(frozenset(names), *where) is named


def test_names_host_takes_other_spellings() -> None:
    names = frozenset({"docker.io"})
    assert names_host(names, "registry-1.docker.io", 443, "docker.io")
    assert not names_host(names, "registry-1.docker.io", 443)


@pytest.mark.parametrize(
    ("realm", "named"),
    [("http://auth.test/token", True), ("http://auth.test:8080/token", True),
     ("https://AUTH.test:443/token", True), ("http://other.test/token", False)],
)  # fmt: skip
def test_names_realm(realm: str, named: bool) -> None:
    assert names_realm(frozenset({"auth.test"}), httpx.URL(realm)) is named
