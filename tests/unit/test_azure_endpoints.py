"""Where the Azure flows send their requests when nothing overrides them, and what a server
that echoes a token gets shown: the default endpoints (port 443, the link-local IMDS address)
cannot be served here, so these protocol edges are faked at the transport (respx); every
other flow test runs over real HTTP (``test_azure_flow.py``)."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import respx

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._azure import AZURE_ASSET_TAG, AzureSource
from imagecheck.authn.cloud._http import CloudHTTP
from imagecheck.authn.cloud._keychain import CloudToken
from imagecheck.errors import CloudAuthError
from tests.support.azurecloud import TENANT, Mint, acr_registry, federated_token, workload_env

AAD_TOKEN = "aad-access-token-that-must-not-show"
REFRESH = "acr-refresh-token-that-must-not-show"


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False, assert_all_mocked=True, using="httpx") as router:
        yield router


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(federated_token(Mint()), encoding="ascii")
    return path


def flow(env: dict[str, str], host: str, dmi: Path) -> CloudToken:
    source = AzureSource(env, dmi)
    return asyncio.run(source.token(acr_registry(host), CloudHTTP(), Deadline.after(5)))


def form(request: httpx.Request) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(request.content.decode()))


CLOUDS = [
    ("azurecr.io", "https://login.microsoftonline.com", "https://containerregistry.azure.net"),
    ("azurecr.us", "https://login.microsoftonline.us", "https://containerregistry.azure.us"),
    ("azurecr.cn", "https://login.chinacloudapi.cn", "https://containerregistry.azure.cn"),
    # Azure Germany's ARM audience: a resource ending in "/" has the scope "<resource>/.default".
    ("azurecr.de", "https://login.microsoftonline.de", "https://management.core.cloudapi.de/"),
]


@pytest.mark.parametrize(("suffix", "authority", "audience"), CLOUDS)
def test_each_cloud_has_its_authority_and_audience(
    mock: respx.MockRouter,
    token_file: Path,
    tmp_path: Path,
    suffix: str,
    authority: str,
    audience: str,
) -> None:
    aad = mock.post(f"{authority}/{TENANT}/oauth2/v2.0/token").respond(
        json={"access_token": AAD_TOKEN, "expires_in": 3599, "token_type": "Bearer"}
    )
    exchange = mock.post(f"https://myregistry.{suffix}/oauth2/exchange").respond(
        json={"refresh_token": REFRESH}
    )
    token = flow(workload_env(token_file), f"myregistry.{suffix}", tmp_path)
    assert form(aad.calls.last.request)["scope"] == f"{audience}/.default"
    assert form(exchange.calls.last.request) == {
        "grant_type": "access_token",
        "service": f"myregistry.{suffix}",
        "tenant": TENANT,
        "access_token": AAD_TOKEN,
    }
    assert token.credentials.identity_token == REFRESH


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("https://login.microsoftonline.us/", "https://login.microsoftonline.us"),
        ("login.partner.microsoftonline.cn", "https://login.partner.microsoftonline.cn"),
        ("https://adfs.contoso.test/adfs/", "https://adfs.contoso.test/adfs"),
    ],
    ids=["trailing-slash", "bare-host", "path"],
)
def test_azure_authority_host_wins(
    mock: respx.MockRouter, token_file: Path, tmp_path: Path, value: str, url: str
) -> None:
    aad = mock.post(f"{url}/{TENANT}/oauth2/v2.0/token").respond(json={"access_token": AAD_TOKEN})
    mock.post("https://myregistry.azurecr.io/oauth2/exchange").respond(
        json={"refresh_token": REFRESH}
    )
    flow(workload_env(token_file, AZURE_AUTHORITY_HOST=value), "myregistry.azurecr.io", tmp_path)
    assert aad.called


@pytest.mark.parametrize(
    ("env", "base"),
    [
        ({}, "http://169.254.169.254"),
        ({"AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://10.0.0.1:2579/"}, "http://10.0.0.1:2579"),
    ],
    ids=["default", "override"],
)
def test_the_imds_address(
    mock: respx.MockRouter, tmp_path: Path, env: dict[str, str], base: str
) -> None:
    (tmp_path / "chassis_asset_tag").write_bytes(AZURE_ASSET_TAG + b"\n")
    imds = mock.get(url__startswith=f"{base}/metadata/identity/oauth2/token?").respond(
        json={"access_token": AAD_TOKEN, "expires_in": "86399"}
    )
    exchange = mock.post("https://myregistry.azurecr.us/oauth2/exchange").respond(
        json={"refresh_token": REFRESH}
    )
    flow(env, "myregistry.azurecr.us", tmp_path)
    request = imds.calls.last.request
    assert request.headers["Metadata"] == "true"
    assert dict(request.url.params) == {
        "api-version": "2018-02-01",
        "resource": "https://containerregistry.azure.us",
    }
    assert "tenant" not in form(exchange.calls.last.request)  # a token with no tid claim


def test_tokens_an_endpoint_echoes_are_redacted(
    mock: respx.MockRouter, token_file: Path, tmp_path: Path
) -> None:
    assertion = token_file.read_text()
    mock.post(f"https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/token").mock(
        side_effect=[
            httpx.Response(400, json={"error": "invalid_client",
                                      "error_description": f"bad assertion {assertion}"}),
            httpx.Response(200, json={"access_token": AAD_TOKEN}),
        ]
    )  # fmt: skip
    mock.post("https://myregistry.azurecr.io/oauth2/exchange").respond(
        401, json={"errors": [{"code": "UNAUTHORIZED", "message": f"bad token {AAD_TOKEN}"}]}
    )
    for expected in (
        "HTTP 400: invalid_client: bad assertion [redacted]",
        "HTTP 401: UNAUTHORIZED: bad token [redacted]",
    ):
        with pytest.raises(CloudAuthError) as caught:
            flow(workload_env(token_file), "myregistry.azurecr.io", tmp_path)
        assert expected in str(caught.value)
        assert assertion not in str(caught.value)
        assert AAD_TOKEN not in str(caught.value)
