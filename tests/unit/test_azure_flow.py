"""The Azure flows (``imagecheck/authn/cloud/_azure.py``, ``_azuread.py``) over real HTTP
against the stand-ins of ``tests/support/azurecloud.py``: Azure AD over HTTPS, IMDS over
plain HTTP, ACR's exchange over HTTPS on the registry's own name (resolved to 127.0.0.1 in
this process). Each
test asserts on what the stand-ins received and on the error a failure becomes: one line,
naming the endpoint and the identity, temporary only where a retry could help, and holding
no token."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._azure import NULL_USERNAME, AzureSource
from imagecheck.authn.cloud._hosts import CloudRegistry
from imagecheck.authn.cloud._http import CloudHTTP
from imagecheck.authn.cloud._keychain import CloudKeychain, CloudToken
from imagecheck.errors import CloudAuthError
from imagecheck.reference import parse_reference
from tests.support.azurecloud import (
    ACR_AUDIENCE,
    CLIENT_ID,
    IMDS,
    IMDS_PATH,
    JWT_BEARER,
    OTHER_CLIENT_ID,
    REGISTRY,
    TENANT,
    ACRExchange,
    AzureAD,
    Mint,
    aad_error,
    acr_errors,
    acr_registry,
    federated_token,
    resolve_here,
    workload_env,
)
from tests.support.cloudnet import make_cloud_tls
from tests.support.cloudstandin import Fault, Reply
from tests.support.pki import TLSMaterial

CHINA = "myregistry.azurecr.cn"
NEEDS = (
    f"the AcrPull role on {REGISTRY} (Container Registry Repository Reader on a registry with "
    "ABAC repository permissions)"
)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSMaterial:
    return make_cloud_tls(tmp_path_factory.mktemp("azure-tls"), [REGISTRY, CHINA])


@pytest.fixture
def http(tls: TLSMaterial) -> CloudHTTP:
    return CloudHTTP(tls=lambda: ssl.create_default_context(cafile=str(tls.ca_file)), timeout=3)


@pytest.fixture(scope="module")
def cluster() -> Mint:
    return Mint()


@pytest.fixture(scope="module")
def aad() -> Mint:
    return Mint()


# The stand-ins live for the module (a server's shutdown costs a poll interval); each test
# gets them emptied, with their defaults back.
@pytest.fixture(scope="module")
def _azure_ad(tls: TLSMaterial, cluster: Mint, aad: Mint) -> Iterator[AzureAD]:
    with AzureAD(tls.server_context(), cluster=cluster, aad=aad) as server:
        yield server


@pytest.fixture(scope="module")
def _imds(aad: Mint) -> Iterator[IMDS]:
    with IMDS(aad=aad, assigned=[CLIENT_ID]) as server:
        yield server


@pytest.fixture(scope="module")
def _exchange(tls: TLSMaterial, aad: Mint) -> Iterator[ACRExchange]:
    with ACRExchange(tls.server_context(), aad=aad) as server:
        yield server


@pytest.fixture
def azure_ad(_azure_ad: AzureAD) -> AzureAD:
    _azure_ad.clear()
    _azure_ad.lifetime = 3599
    return _azure_ad


@pytest.fixture
def imds(_imds: IMDS) -> IMDS:
    _imds.clear()
    _imds.system, _imds.assigned = None, (CLIENT_ID,)
    return _imds


@pytest.fixture
def exchange(_exchange: ACRExchange, monkeypatch: pytest.MonkeyPatch) -> ACRExchange:
    resolve_here(monkeypatch, REGISTRY, CHINA)
    _exchange.clear()
    _exchange.lifetime = 3 * 3600
    return _exchange


@pytest.fixture
def token_file(tmp_path: Path, cluster: Mint) -> Path:
    path = tmp_path / "azure-identity-token"
    path.write_text(federated_token(cluster), encoding="ascii")
    return path


@pytest.fixture
def dmi(tmp_path: Path) -> Path:
    path = tmp_path / "dmi"
    path.mkdir()
    return path


def workload(token_file: Path, azure_ad: AzureAD, **extra: str) -> dict[str, str]:
    return workload_env(token_file, AZURE_AUTHORITY_HOST=azure_ad.url, **extra)


def managed(imds: IMDS, **extra: str) -> dict[str, str]:
    return {"AZURE_POD_IDENTITY_AUTHORITY_HOST": imds.url, **extra}


def registry_of(exchange: ACRExchange, host: str = REGISTRY) -> CloudRegistry:
    return acr_registry(f"{host}:{exchange.port}")


def flow(source: AzureSource, registry: CloudRegistry, http: CloudHTTP) -> CloudToken:
    return asyncio.run(source.token(registry, http, Deadline.after(10)))


def failure(source: AzureSource, registry: CloudRegistry, http: CloudHTTP) -> CloudAuthError:
    with pytest.raises(CloudAuthError) as caught:
        flow(source, registry, http)
    assert "\n" not in str(caught.value)
    return caught.value


def secrets_of(token_file: Path, exchange: ACRExchange) -> list[str]:
    """Every token the flow held: the federated token, Azure AD's, the refresh tokens."""
    sent = [r.form.get("access_token", "") for r in exchange.requests]
    return [token_file.read_text(), *filter(None, sent), *exchange.issued]


def assert_no_secret(text: str, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in text


# --- the happy paths ---------------------------------------------------------------------------


def test_workload_identity_gets_an_acr_refresh_token(
    token_file: Path, azure_ad: AzureAD, exchange: ACRExchange, dmi: Path, http: CloudHTTP
) -> None:
    registry = registry_of(exchange)
    token = flow(AzureSource(workload(token_file, azure_ad), dmi), registry, http)

    (asked,) = azure_ad.requests
    assert (asked.method, asked.path) == ("POST", f"/{TENANT}/oauth2/v2.0/token")
    assert asked.headers["content-type"] == "application/x-www-form-urlencoded"
    assert asked.form == {
        "grant_type": "client_credentials",
        "client_id": CLIENT_ID,
        "scope": f"{ACR_AUDIENCE}/.default",
        "client_assertion_type": JWT_BEARER,
        "client_assertion": token_file.read_text(),
    }
    (traded,) = exchange.requests
    assert (traded.method, traded.path) == ("POST", "/oauth2/exchange")
    assert traded.headers["host"] == registry.address
    assert set(traded.form) == {"grant_type", "service", "tenant", "access_token"}
    assert (traded.form["grant_type"], traded.form["service"]) == ("access_token", REGISTRY)
    assert traded.form["tenant"] == TENANT

    creds = token.credentials
    assert (creds.username, creds.identity_token) == (NULL_USERNAME, exchange.issued[0])
    assert (creds.password, creds.registry_token) == ("", "")
    assert creds.source == (
        f"the pod's Azure identity {CLIENT_ID} (AKS workload identity, tenant {TENANT}), "
        f"which needs {NEEDS}"
    )
    assert_no_secret(repr(token), secrets_of(token_file, exchange))
    assert 3 * 3600 - 60 < token.lifetime <= 3 * 3600


def test_the_federated_token_is_read_at_every_flow(
    token_file: Path,
    azure_ad: AzureAD,
    exchange: ACRExchange,
    cluster: Mint,
    dmi: Path,
    http: CloudHTTP,
) -> None:
    source = AzureSource(workload(token_file, azure_ad), dmi)
    first = token_file.read_text()
    flow(source, registry_of(exchange), http)
    rotated = federated_token(cluster, lifetime=7200)
    assert rotated != first
    token_file.write_text(rotated, encoding="ascii")  # the kubelet rotates the projected token
    flow(source, registry_of(exchange), http)
    assert [r.form["client_assertion"] for r in azure_ad.requests] == [first, rotated]


def test_a_tenant_may_be_a_domain(
    tls: TLSMaterial,
    token_file: Path,
    cluster: Mint,
    aad: Mint,
    exchange: ACRExchange,
    dmi: Path,
    http: CloudHTTP,
) -> None:
    domain = "contoso.onmicrosoft.com"
    with AzureAD(tls.server_context(), cluster=cluster, aad=aad, tenant=domain) as azure_ad:
        env = workload(token_file, azure_ad, AZURE_TENANT_ID=domain)
        flow(AzureSource(env, dmi), registry_of(exchange), http)
    assert [r.path for r in azure_ad.requests] == [f"/{domain}/oauth2/v2.0/token"]


@pytest.mark.parametrize(
    ("assigned", "client", "sent"),
    [((CLIENT_ID,), None, None), ((OTHER_CLIENT_ID, CLIENT_ID), CLIENT_ID, CLIENT_ID)],
    ids=["only-identity", "user-assigned"],
)
def test_managed_identity_through_imds(
    imds: IMDS,
    exchange: ACRExchange,
    dmi: Path,
    http: CloudHTTP,
    assigned: tuple[str, ...],
    client: str | None,
    sent: str | None,
) -> None:
    imds.assigned = assigned
    env = managed(imds, **({"AZURE_CLIENT_ID": client} if client else {}))
    token = flow(AzureSource(env, dmi), registry_of(exchange), http)
    (asked,) = imds.requests
    assert (asked.method, asked.path) == ("GET", IMDS_PATH)
    assert asked.headers["metadata"] == "true"
    assert "x-forwarded-for" not in asked.headers
    assert asked.param("api-version") == "2018-02-01"
    assert asked.param("resource") == ACR_AUDIENCE
    assert asked.param("client_id") == sent
    (traded,) = exchange.requests
    assert traded.form["tenant"] == TENANT  # the access token's tid claim
    who = f"Azure managed identity {CLIENT_ID}" if client else "default Azure managed identity"
    assert token.credentials.source == (
        f"the VM's {who} (instance metadata service), which needs {NEEDS}"
    )


def test_the_lifetime_is_the_refresh_tokens_exp(
    token_file: Path, azure_ad: AzureAD, exchange: ACRExchange, dmi: Path, http: CloudHTTP
) -> None:
    exchange.lifetime = 1800
    token = flow(AzureSource(workload(token_file, azure_ad), dmi), registry_of(exchange), http)
    assert 1740 < token.lifetime <= 1800


def test_a_refresh_token_without_exp_lives_three_hours(
    token_file: Path, azure_ad: AzureAD, exchange: ACRExchange, dmi: Path, http: CloudHTTP
) -> None:
    exchange.fail_next(Fault(reply=Reply(200, json.dumps({"refresh_token": "opaque"}).encode())))
    token = flow(AzureSource(workload(token_file, azure_ad), dmi), registry_of(exchange), http)
    assert token.lifetime == 3 * 3600
    assert token.credentials.identity_token == "opaque"


def test_an_expired_refresh_token_is_an_error(
    token_file: Path, azure_ad: AzureAD, exchange: ACRExchange, dmi: Path, http: CloudHTTP
) -> None:
    exchange.lifetime = -60
    source = AzureSource(workload(token_file, azure_ad), dmi)
    error = failure(source, registry_of(exchange), http)
    assert "answered a refresh token that has already expired" in str(error)
    assert not error.temporary


def test_the_keychain_caches_per_registry_address(
    tls: TLSMaterial,
    aad: Mint,
    token_file: Path,
    azure_ad: AzureAD,
    exchange: ACRExchange,
    dmi: Path,
    http: CloudHTTP,
) -> None:
    keychain = CloudKeychain(workload(token_file, azure_ad), http=http, dmi_dir=dmi)

    async def resolve(*refs: str) -> list[str]:
        found = [await keychain.aresolve(parse_reference(r), Deadline.after(10)) for r in refs]
        return [creds.identity_token for (creds,) in found]

    with ACRExchange(tls.server_context(), aad=aad) as other:
        one, two = f"{REGISTRY}:{exchange.port}", f"{REGISTRY}:{other.port}"
        tokens = asyncio.run(resolve(f"{one}/a:1", f"{one}/b/c:2", f"{two}/a:1", f"{two}/d:3"))
    assert tokens == [exchange.issued[0]] * 2 + [other.issued[0]] * 2
    assert (len(azure_ad.requests), len(exchange.requests), len(other.requests)) == (2, 1, 1)


# --- refusals and failures ---------------------------------------------------------------------


def assert_clean(
    error: CloudAuthError, secrets: list[str], caplog: pytest.LogCaptureFixture
) -> str:
    """The message, once it is shown to hold none of ``secrets`` (nor does the log)."""
    message = str(error)
    assert "\n" not in message
    assert "Trace ID" not in message  # Azure AD's later lines are cut
    assert_no_secret(message, secrets)
    assert_no_secret(caplog.text, secrets)
    return message


_ROLE = "The signed in user is not assigned to a role for the application."
_LOOP = "The server terminated an operation because it encountered a client request loop."
_NEEDS = f"; it needs {NEEDS}"
REFUSALS = [
    # (endpoint, id, its answer, temporary, the reason shown)
    ("azure-ad", "forbidden", aad_error(403, "access_denied", 50105, _ROLE), False,
     f"HTTP 403: access_denied: AADSTS50105: {_ROLE}"),
    ("azure-ad", "throttled", aad_error(429, "temporarily_unavailable", 50196, _LOOP), True,
     f"HTTP 429: temporarily_unavailable: AADSTS50196: {_LOOP}"),
    ("azure-ad", "server-error", aad_error(500, "server_error", 90033, "A transient error."),
     True, "HTTP 500: server_error: AADSTS90033: A transient error."),
    ("azure-ad", "unavailable-html", Reply(503, b"<html><body>Unavailable</body></html>"),
     True, "HTTP 503"),
    ("exchange", "unauthorized", acr_errors(401, "UNAUTHORIZED", "The token is invalid."),
     False, f"HTTP 401: UNAUTHORIZED: The token is invalid.{_NEEDS}"),
    ("exchange", "forbidden", acr_errors(403, "DENIED", "client IP not allowed"), False,
     f"HTTP 403: DENIED: client IP not allowed{_NEEDS}"),
    ("exchange", "throttled", acr_errors(429, "TOOMANYREQUESTS", "too many requests"), True,
     "HTTP 429: TOOMANYREQUESTS: too many requests"),
    ("exchange", "unavailable", Reply(503, b"upstream connect error"), True, "HTTP 503"),
    ("exchange", "not-found", acr_errors(404, "NOT_FOUND", "not found"), False,
     "HTTP 404: NOT_FOUND: not found"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("endpoint", "reply", "temporary", "reason"),
    [(case[0], *case[2:]) for case in REFUSALS],
    ids=[f"{case[0]}-{case[1]}" for case in REFUSALS],
)
def test_refusals_name_the_endpoint_and_the_identity(
    token_file: Path,
    azure_ad: AzureAD,
    exchange: ACRExchange,
    dmi: Path,
    http: CloudHTTP,
    caplog: pytest.LogCaptureFixture,
    endpoint: str,
    reply: Reply,
    temporary: bool,
    reason: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = registry_of(exchange)
    (azure_ad if endpoint == "azure-ad" else exchange).fail_next(Fault(reply=reply))
    error = failure(AzureSource(workload(token_file, azure_ad), dmi), registry, http)
    message = assert_clean(error, secrets_of(token_file, exchange), caplog)
    who = f"the AKS workload identity {CLIENT_ID} (tenant {TENANT})"
    assert (
        message
        == {
            "azure-ad": f"Azure AD at {azure_ad.url}/{TENANT}/oauth2/v2.0/token refused {who}: ",
            "exchange": f"ACR's token exchange at https://{registry.address}/oauth2/exchange "
            f"refused the Azure AD token of {who}: ",
        }[endpoint]
        + reason
    )
    assert error.temporary is temporary
    assert len(exchange.requests) == (endpoint == "exchange")


STALE = (
    "; the federated token in {file} (AZURE_FEDERATED_TOKEN_FILE) has expired or is not valid "
    "yet: is the kubelet still rotating it?"
)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("expired", "HTTP 400: invalid_client: AADSTS700024: Client assertion is not within its "
         "valid time range."),
        ("subject", "HTTP 400: invalid_client: AADSTS70021: No matching federated identity record"),
        ("client", "HTTP 400: unauthorized_client: AADSTS700016: Application with identifier"),
        ("issuer", "HTTP 401: invalid_client: AADSTS700027: Client assertion failed signature"),
    ],
)  # fmt: skip
def test_what_azure_ad_refuses_of_the_identity(
    token_file: Path,
    azure_ad: AzureAD,
    exchange: ACRExchange,
    cluster: Mint,
    dmi: Path,
    http: CloudHTTP,
    caplog: pytest.LogCaptureFixture,
    change: str,
    reason: str,
) -> None:
    env = workload(token_file, azure_ad)
    if change == "expired":
        token_file.write_text(federated_token(cluster, start=time.time() - 7200))
    elif change == "subject":
        token_file.write_text(federated_token(cluster, subject="system:serviceaccount:x:y"))
    elif change == "client":
        env["AZURE_CLIENT_ID"] = OTHER_CLIENT_ID
    else:
        token_file.write_text(federated_token(Mint()))  # another cluster's issuer
    error = failure(AzureSource(env, dmi), registry_of(exchange), http)
    message = assert_clean(error, secrets_of(token_file, exchange), caplog)
    assert reason in message
    assert (
        f"refused the AKS workload identity {env['AZURE_CLIENT_ID']} (tenant {TENANT})" in message
    )
    assert message.endswith(STALE.format(file=token_file)) is (change == "expired")
    assert not error.temporary
    assert exchange.requests == []


def test_a_registry_of_another_cloud_asks_for_its_audience(
    token_file: Path, azure_ad: AzureAD, exchange: ACRExchange, dmi: Path, http: CloudHTTP
) -> None:
    """A China registry asks for China's ACR audience: an Azure AD of the public cloud (the
    authority the environment names) does not know it, and says so."""
    error = failure(
        AzureSource(workload(token_file, azure_ad), dmi), registry_of(exchange, CHINA), http
    )
    (asked,) = azure_ad.requests
    assert asked.form["scope"] == "https://containerregistry.azure.cn/.default"
    assert "HTTP 400: invalid_resource: AADSTS500011: The resource principal named" in str(error)
    assert exchange.requests == []


def test_an_expired_azure_ad_token_is_refused_by_the_exchange(
    token_file: Path,
    azure_ad: AzureAD,
    exchange: ACRExchange,
    dmi: Path,
    http: CloudHTTP,
    caplog: pytest.LogCaptureFixture,
) -> None:
    azure_ad.lifetime = -60  # a clock far enough off
    registry = registry_of(exchange)
    error = failure(AzureSource(workload(token_file, azure_ad), dmi), registry, http)
    message = assert_clean(error, secrets_of(token_file, exchange), caplog)
    assert message.startswith(
        f"ACR's token exchange at https://{registry.address}/oauth2/exchange refused the Azure "
        f"AD token of the AKS workload identity {CLIENT_ID}"
    )
    assert "HTTP 401: UNAUTHORIZED: invalid AAD access token: Signature has expired" in message
    assert not error.temporary
    assert exchange.issued == []


IMDS_REFUSALS = [
    ("identity-not-found", {"AZURE_CLIENT_ID": OTHER_CLIENT_ID}, None, False,
     "HTTP 400: invalid_request: Identity not found"),
    ("several-identities", {}, "two", False, "HTTP 400: invalid_request: Multiple user "
     "assigned identities exist, please specify the clientId / resourceId of the identity in "
     "the token request"),
    ("updating-404", {}, Reply(404, b""), True, "HTTP 404"),
    ("updating-410", {}, Reply(410, b""), True, "HTTP 410"),
    ("throttled", {}, Reply(429, b'{"error":"throttled","error_description":"Too many"}'),
     True, "HTTP 429: throttled: Too many"),
    ("server-error", {}, Reply(500, b'{"error":"unknown_error"}'), True,
     "HTTP 500: unknown_error"),
    ("forbidden", {}, Reply(403, b'{"error":"forbidden"}'), False, "HTTP 403: forbidden"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "fault", "temporary", "reason"),
    [case[1:] for case in IMDS_REFUSALS],
    ids=[case[0] for case in IMDS_REFUSALS],
)
def test_imds_refusals(
    imds: IMDS,
    exchange: ACRExchange,
    dmi: Path,
    http: CloudHTTP,
    caplog: pytest.LogCaptureFixture,
    env: dict[str, str],
    fault: Reply | str | None,
    temporary: bool,
    reason: str,
) -> None:
    if fault == "two":
        imds.assigned = (CLIENT_ID, OTHER_CLIENT_ID)
    elif isinstance(fault, Reply):
        imds.fail_next(Fault(reply=fault))
    error = failure(AzureSource(managed(imds, **env), dmi), registry_of(exchange), http)
    message = assert_clean(error, [], caplog)
    who = f"Azure managed identity {OTHER_CLIENT_ID}" if env else "default Azure managed identity"
    assert (
        message
        == f"the Azure instance metadata service at {imds.url} refused the VM's {who}: {reason}"
    )
    assert error.temporary is temporary


def test_an_unreachable_imds_is_temporary(
    exchange: ACRExchange, dmi: Path, http: CloudHTTP
) -> None:
    env = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:9"}
    error = failure(AzureSource(env, dmi), registry_of(exchange), http)
    assert str(error).startswith(
        "cannot reach the Azure instance metadata service at http://127.0.0.1:9"
    )
    assert error.temporary


ANSWERS = [
    # (id, fault, temporary, the message's end)
    ("oversized", Fault(size=70_000), False, "is larger than 65536 bytes"),
    ("malformed", Fault(reply=Reply(200, b"<html>login</html>")), False,
     "is not valid JSON (line 1 column 1)"),
    ("array", Fault(reply=Reply(200, b"[]")), False, "is not a JSON object"),
    ("no-token", Fault(reply=Reply(200, b'{"token_type": "Bearer"}')), False,
     "answered no usable @token"),
    ("token-with-newline", Fault(reply=Reply(200, b'{"@token": "abc\\n", "refresh_token": '
     b'"abc\\n", "access_token": "abc\\n"}')), False, "answered no usable @token"),
    ("redirect", Fault(reply=Reply(307, b"", {"Location": "https://evil.test/"})), False,
     "answered a redirect (HTTP 307), not followed"),
    ("slow", Fault(delay=1.5), True, "did not answer within 0.5s"),
]  # fmt: skip
ENDPOINTS = ["azure-ad", "imds", "exchange"]
TOKEN_FIELD = {"azure-ad": "access_token", "imds": "access_token", "exchange": "refresh_token"}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(
    ("fault", "temporary", "end"),
    [case[1:] for case in ANSWERS],
    ids=[case[0] for case in ANSWERS],
)
def test_unusable_answers(
    token_file: Path,
    azure_ad: AzureAD,
    imds: IMDS,
    exchange: ACRExchange,
    dmi: Path,
    tls: TLSMaterial,
    caplog: pytest.LogCaptureFixture,
    endpoint: str,
    fault: Fault,
    temporary: bool,
    end: str,
) -> None:
    http = CloudHTTP(tls=lambda: ssl.create_default_context(cafile=str(tls.ca_file)), timeout=0.5)
    server = {"azure-ad": azure_ad, "imds": imds, "exchange": exchange}[endpoint]
    server.fail_next(fault)
    env = managed(imds) if endpoint == "imds" else workload(token_file, azure_ad)
    error = failure(AzureSource(env, dmi), registry_of(exchange), http)
    message = assert_clean(error, secrets_of(token_file, exchange), caplog)
    assert message.endswith(end.replace("@token", TOKEN_FIELD[endpoint])), message
    assert error.temporary is temporary
