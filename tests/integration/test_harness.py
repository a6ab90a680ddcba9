"""The harness itself: the fixtures start real registries that answer the way Distribution does.

Plain httpx only, so a failure here is the harness's, not imagecheck's. The status codes and
headers asserted below are what Distribution 2.8.2 (Debian ``docker-registry``) answers; the
comments record the ones an image checker has to get right.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from typing import Any

import httpx
import jwt
import pytest

from imagecheck.registry._mediatypes import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    OCI_INDEX,
    OCI_MANIFEST,
)
from tests.support.endpoint import TOKEN_ISSUER, TOKEN_SERVICE, RegistryEndpoint
from tests.support.images import push_image
from tests.support.tokenserver import TokenServer

ACCEPT_ALL = ", ".join([OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST])
SCHEMA1_SIGNED = "application/vnd.docker.distribution.manifest.v1+prettyjws"
SAMPLES = [
    "sample/app:1.0.0",
    "sample/app:docker",
    "sample/app:multi",
    "sample/app:list",
    "private/secret:1.0",
    "public/tool:2.1",
]


def manifest_url(endpoint: RegistryEndpoint, name: str) -> str:
    repo, _, reference = name.rpartition(":")
    return f"{endpoint.url}/v2/{repo}/manifests/{reference}"


def _client(endpoint: RegistryEndpoint) -> httpx.Client:
    return httpx.Client(verify=endpoint.verify, timeout=10.0, trust_env=False)


def _token(
    endpoint: RegistryEndpoint, scope: str, auth: tuple[str, str] | None = None
) -> dict[str, Any]:
    assert endpoint.token_server is not None
    with _client(endpoint) as c:
        response = c.get(
            endpoint.token_server.realm,
            params={"service": TOKEN_SERVICE, "scope": scope},
            auth=auth,
        )
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def _head(
    endpoint: RegistryEndpoint, name: str, *, bearer: str | None = None, **kwargs: Any
) -> httpx.Response:
    headers = {"Accept": ACCEPT_ALL}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    with _client(endpoint) as c:
        return c.head(manifest_url(endpoint, name), headers=headers, **kwargs)


# --- plain ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_plain_serves_every_sample_with_its_digest(
    registry_plain: RegistryEndpoint, name: str
) -> None:
    pushed = registry_plain.images[name]
    response = _head(registry_plain, name)
    assert response.status_code == 200
    assert response.headers["Docker-Content-Digest"] == pushed.digest
    assert response.headers["Content-Type"] == pushed.media_type
    assert int(response.headers["Content-Length"]) == pushed.size


def test_plain_ref_and_url(registry_plain: RegistryEndpoint) -> None:
    assert registry_plain.ref("sample/app:1.0.0") == f"{registry_plain.host}/sample/app:1.0.0"
    assert registry_plain.url == f"http://{registry_plain.host}"
    assert registry_plain.host.startswith("127.0.0.1:")


def test_index_and_manifest_list_name_their_platforms(registry_plain: RegistryEndpoint) -> None:
    multi_url = manifest_url(registry_plain, "sample/app:multi")
    list_url = manifest_url(registry_plain, "sample/app:list")
    with _client(registry_plain) as c:
        index = c.get(multi_url, headers={"Accept": OCI_INDEX})
        docker_list = c.get(list_url, headers={"Accept": DOCKER_MANIFEST_LIST})
    platforms = [m["platform"] for m in index.json()["manifests"]]
    assert platforms == [
        {"architecture": "amd64", "os": "linux"},
        {"architecture": "arm64", "os": "linux"},
    ]
    entries = docker_list.json()["manifests"]
    assert entries[1]["platform"] == {"architecture": "arm", "os": "linux", "variant": "v7"}
    children = registry_plain.images["sample/app:list"].children
    assert [e["digest"] for e in entries] == [child.digest for child in children]
    assert str(children[1].platform) == "linux/arm/v7"


def test_plain_without_accept_header(registry_plain: RegistryEndpoint) -> None:
    # Distribution 2.8 quirk: with no (or only */*) Accept, an OCI manifest is 404
    # MANIFEST_UNKNOWN ("OCI manifest found, but accept header does not support OCI
    # manifests") and a Docker schema 2 manifest or list is rewritten on the fly to signed
    # schema 1 (application/vnd.docker.distribution.manifest.v1+prettyjws), with another
    # digest. A checker must always send the full Accept list.
    pushed = registry_plain.images["sample/app:docker"]
    with _client(registry_plain) as c:
        oci = c.get(manifest_url(registry_plain, "sample/app:1.0.0"))
        docker = c.head(manifest_url(registry_plain, "sample/app:docker"))
    assert oci.status_code == 404
    assert oci.json()["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    assert docker.status_code == 200
    assert docker.headers["Content-Type"] == SCHEMA1_SIGNED
    assert docker.headers["Docker-Content-Digest"] != pushed.digest


@pytest.mark.parametrize(
    ("name", "code"),
    [
        # A missing repository is reported like a missing tag on the manifests endpoint:
        # 404 MANIFEST_UNKNOWN; only tags/list says NAME_UNKNOWN.
        ("sample/app:9.9.9", "MANIFEST_UNKNOWN"),
        ("nothing/here:1.0", "MANIFEST_UNKNOWN"),
        ("sample/app:sha256:" + "0" * 64, "MANIFEST_UNKNOWN"),
    ],
    ids=["missing-tag", "missing-repo", "missing-digest"],
)
def test_plain_missing(registry_plain: RegistryEndpoint, name: str, code: str) -> None:
    repo, _, reference = name.partition(":")
    with _client(registry_plain) as c:
        url = f"{registry_plain.url}/v2/{repo}/manifests/{reference}"
        head = c.head(url, headers={"Accept": ACCEPT_ALL})
        get = c.get(url, headers={"Accept": ACCEPT_ALL})
    assert head.status_code == 404
    assert "Docker-Content-Digest" not in head.headers
    assert get.json()["errors"][0]["code"] == code


def test_request_count_follows_the_access_log(registry_plain: RegistryEndpoint) -> None:
    before = registry_plain.registry.request_count()
    _head(registry_plain, "sample/app:1.0.0")
    _head(registry_plain, "sample/app:9.9.9")  # 404s count too
    assert registry_plain.registry.request_count() == before + 2


def test_push_goes_to_the_shared_storage(
    registry_plain: RegistryEndpoint, registry_basic: RegistryEndpoint
) -> None:
    with _client(registry_plain) as c:
        pushed = push_image(c, registry_plain.url, "harness/pushed", "new")
    response = _head(registry_basic, "harness/pushed:new", auth=registry_basic.basic_auth)
    assert response.headers["Docker-Content-Digest"] == pushed.digest


# --- basic ------------------------------------------------------------------------------------


def test_basic_requires_credentials(registry_basic: RegistryEndpoint) -> None:
    assert registry_basic.url.startswith("https://")
    anonymous = _head(registry_basic, "sample/app:1.0.0")
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"] == 'Basic realm="imagecheck-test"'

    good = _head(registry_basic, "sample/app:1.0.0", auth=registry_basic.basic_auth)
    assert good.status_code == 200
    assert good.headers["Docker-Content-Digest"] == registry_basic.images["sample/app:1.0.0"].digest


def test_basic_wrong_password(registry_basic: RegistryEndpoint) -> None:
    # Wrong password and unknown user both get the same 401 and Basic challenge as no
    # credentials at all; the body says UNAUTHORIZED "authentication required".
    assert registry_basic.username is not None
    response = _head(registry_basic, "sample/app:1.0.0", auth=(registry_basic.username, "wrong"))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Basic realm="imagecheck-test"'


def test_basic_missing_tag_is_404(registry_basic: RegistryEndpoint) -> None:
    response = _head(registry_basic, "sample/app:9.9.9", auth=registry_basic.basic_auth)
    assert response.status_code == 404


def test_basic_rejects_an_unknown_ca(registry_basic: RegistryEndpoint) -> None:
    with httpx.Client(timeout=10.0, trust_env=False) as c, pytest.raises(httpx.ConnectError):
        c.get(f"{registry_basic.url}/v2/")


# --- token ------------------------------------------------------------------------------------


def test_token_challenge(registry_token: RegistryEndpoint, token_server: TokenServer) -> None:
    with _client(registry_token) as c:
        ping = c.get(f"{registry_token.url}/v2/")
    assert ping.status_code == 401
    assert ping.headers["WWW-Authenticate"] == (
        f'Bearer realm="{token_server.realm}",service="{TOKEN_SERVICE}"'
    )
    # Without a token, a repository request names its scope in the challenge.
    head = _head(registry_token, "private/secret:1.0")
    assert head.status_code == 401
    assert head.headers["WWW-Authenticate"] == (
        f'Bearer realm="{token_server.realm}",service="{TOKEN_SERVICE}",'
        'scope="repository:private/secret:pull"'
    )


def test_token_for_alice_opens_private(
    registry_token: RegistryEndpoint, token_server: TokenServer
) -> None:
    body = _token(registry_token, "repository:private/secret:pull", registry_token.basic_auth)
    assert set(body) == {"token", "access_token", "expires_in", "issued_at"}
    assert body["expires_in"] == 300
    response = _head(registry_token, "private/secret:1.0", bearer=body["token"])
    assert response.status_code == 200
    digest = registry_token.images["private/secret:1.0"].digest
    assert response.headers["Docker-Content-Digest"] == digest

    (received,) = token_server.requests
    assert received.method == "GET"
    assert received.service == TOKEN_SERVICE
    assert received.scopes == ["repository:private/secret:pull"]
    expected = base64.b64encode(f"alice:{registry_token.password}".encode()).decode()
    assert received.authorization == f"Basic {expected}"


def test_token_claims(registry_token: RegistryEndpoint) -> None:
    body = _token(
        registry_token,
        "repository:private/secret:pull,push",
        registry_token.basic_auth,
    )
    header = jwt.get_unverified_header(body["token"])
    claims = jwt.decode(body["token"], options={"verify_signature": False})
    assert header["alg"] == "RS256"
    assert len(header["x5c"]) == 1
    assert claims["iss"] == TOKEN_ISSUER
    assert claims["aud"] == TOKEN_SERVICE
    assert claims["sub"] == "alice"
    assert claims["access"] == [
        {"type": "repository", "name": "private/secret", "actions": ["pull", "push"]}
    ]


def test_anonymous_token_does_not_open_private(registry_token: RegistryEndpoint) -> None:
    # The token server leaves the scope out rather than refusing, as real ones do; then
    # Distribution answers 401 with error="insufficient_scope" in the challenge (not 403).
    # A missing repository outside the anonymous policy looks exactly the same.
    body = _token(registry_token, "repository:private/secret:pull")
    assert jwt.decode(body["token"], options={"verify_signature": False})["access"] == []
    response = _head(registry_token, "private/secret:1.0", bearer=body["token"])
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].endswith(
        'scope="repository:private/secret:pull",error="insufficient_scope"'
    )


def test_anonymous_token_opens_sample(registry_token: RegistryEndpoint) -> None:
    body = _token(registry_token, "repository:sample/app:pull")
    found = _head(registry_token, "sample/app:1.0.0", bearer=body["token"])
    missing = _head(registry_token, "sample/app:9.9.9", bearer=body["token"])
    assert found.status_code == 200
    assert missing.status_code == 404


def test_token_missing_repo_and_tag(registry_token: RegistryEndpoint) -> None:
    # With a token that covers them, both are 404 (MANIFEST_UNKNOWN in a GET body).
    auth = registry_token.basic_auth
    repo_token = _token(registry_token, "repository:nothing/here:pull", auth)["token"]
    tag_token = _token(registry_token, "repository:private/secret:pull", auth)["token"]
    assert _head(registry_token, "nothing/here:1.0", bearer=repo_token).status_code == 404
    assert _head(registry_token, "private/secret:9.9", bearer=tag_token).status_code == 404


def test_bad_tokens_are_invalid_token(
    registry_token: RegistryEndpoint, token_server: TokenServer
) -> None:
    access = [{"type": "repository", "name": "private/secret", "actions": ["pull"]}]
    expired = token_server.issue("alice", access, expires_in=-120)
    for bearer in (expired, "not.a.jwt"):
        response = _head(registry_token, "private/secret:1.0", bearer=bearer)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"].endswith('error="invalid_token"')


def test_basic_credentials_on_token_registry(registry_token: RegistryEndpoint) -> None:
    # Basic credentials sent straight to a token registry are ignored: 401 and a Bearer
    # challenge, same as anonymous.
    response = _head(registry_token, "private/secret:1.0", auth=registry_token.basic_auth)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer ")


def test_token_server_wrong_password(registry_token: RegistryEndpoint) -> None:
    assert registry_token.token_server is not None
    with _client(registry_token) as c:
        get = c.get(registry_token.token_server.realm, auth=("alice", "wrong"))
        post = c.post(
            registry_token.token_server.realm,
            data={"grant_type": "password", "username": "alice", "password": "wrong"},
        )
    assert get.status_code == 401
    assert get.json()["errors"][0]["code"] == "UNAUTHORIZED"
    assert post.status_code == 401
    assert post.json()["error"] == "invalid_grant"


def test_oauth_refresh_token_grant(
    registry_token: RegistryEndpoint, token_server: TokenServer
) -> None:
    (refresh,) = token_server.refresh_tokens
    form = {
        "grant_type": "refresh_token",
        "refresh_token": refresh,
        "service": TOKEN_SERVICE,
        "scope": "repository:private/secret:pull repository:public/tool:pull",
        "client_id": "imagecheck",
    }
    with _client(registry_token) as c:
        response = c.post(token_server.realm, data=form)
    body = response.json()
    assert response.status_code == 200
    assert body["refresh_token"] == refresh
    assert _head(registry_token, "private/secret:1.0", bearer=body["access_token"]).is_success
    (received,) = token_server.requests
    assert received.form["grant_type"] == ["refresh_token"]
    assert received.scopes == ["repository:private/secret:pull", "repository:public/tool:pull"]


def test_oauth_password_grant_offline(
    registry_token: RegistryEndpoint, token_server: TokenServer
) -> None:
    form = {
        "grant_type": "password",
        "username": "alice",
        "password": registry_token.password or "",
        "service": TOKEN_SERVICE,
        "scope": "repository:private/secret:pull",
        "access_type": "offline",
        "client_id": "imagecheck",
    }
    with _client(registry_token) as c:
        body = c.post(token_server.realm, data=form).json()
    assert token_server.refresh_tokens[body["refresh_token"]] == "alice"


def test_token_server_toggles(registry_token: RegistryEndpoint, token_server: TokenServer) -> None:
    token_server.fail_next(2, 503, headers={"Retry-After": "1"})
    with _client(registry_token) as c:
        statuses = [c.get(token_server.realm).status_code for _ in range(3)]
        assert "token" in c.get(token_server.realm).json()
        token_server.configure(fields=["access_token"], expires_in=60)
        only_access = c.get(token_server.realm).json()
    assert statuses == [503, 503, 200]
    assert set(only_access) == {"access_token"}
    claims = jwt.decode(only_access["access_token"], options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 60
    assert len(token_server.requests) == 5
    token_server.clear()
    assert token_server.requests == []


# --- a peer ----------------------------------------------------------------------------------


def test_skopeo_inspects_the_plain_registry(registry_plain: RegistryEndpoint) -> None:
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        if os.environ.get("CI") == "true":
            pytest.fail("skopeo not installed (CI=true)", pytrace=False)
        pytest.skip("skopeo not installed")
    result = subprocess.run(
        [
            skopeo,
            "inspect",
            "--no-tags",
            "--no-creds",
            "--tls-verify=false",
            f"docker://{registry_plain.ref('sample/app:1.0.0')}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    inspected = json.loads(result.stdout)
    assert inspected["Digest"] == registry_plain.images["sample/app:1.0.0"].digest
    assert (inspected["Os"], inspected["Architecture"]) == ("linux", "amd64")
