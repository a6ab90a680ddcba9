"""When imagecheck uses plain HTTP, as the kubelet's containerd does (issue #11): against the
real registry and token server.

* A registry falls back to plain HTTP only when containerd's ``docker.IsLocalhost`` says so:
  exactly ``localhost`` (lowercase) or a loopback address. ``LocalHost:PORT`` gets HTTPS only,
  so against a plain-HTTP registry it is an error (exit 4), as the pull fails.
* An HTTPS registry whose token realm is plain ``http://`` (Harbor, Nexus behind a
  TLS-terminating proxy): anonymous token requests follow it, as containerd does; credentials
  go to the same realm over HTTPS, and are kept back (exit 4, with a hint) when HTTPS does not
  answer there, unless the realm's host is named with ``--insecure-registry``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clirun import run_cli, tls_args
from tests.support.endpoint import TOKEN_ISSUER, TOKEN_SERVICE, USERNAME, RegistryEndpoint
from tests.support.pki import TLSMaterial, make_token_signer
from tests.support.registry import LocalRegistry, TokenAuthSettings
from tests.support.tokenserver import TokenServer


def _port(endpoint: RegistryEndpoint) -> str:
    return endpoint.host.rsplit(":", 1)[1]


def test_lowercase_localhost_falls_back_to_plain_http(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    image = f"localhost:{_port(registry_plain)}/sample/app:1.0.0"
    run = run_cli(["check", "-o", "json", image], tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    [result] = run.json()
    assert result["status"] == "found"
    assert result["digest"] == registry_plain.images["sample/app:1.0.0"].digest


def test_mixed_case_localhost_gets_https_only(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    # The name resolves (/etc/hosts is read without regard to case); only HTTPS is tried, and
    # the plain-HTTP registry cannot answer it: an error, as containerd's pull fails.
    host = f"LocalHost:{_port(registry_plain)}"
    before = registry_plain.registry.request_count()
    run = run_cli(["check", "-o", "json", f"{host}/sample/app:1.0.0"], tmp_path)
    assert run.code == 4, run.stdout + run.stderr
    [result] = run.json()
    assert result["status"] == "error"
    assert result["message"] == (
        f"{host} does not speak TLS (a plain-HTTP server?); plain HTTP is tried only for "
        "localhost, 127.0.0.0/8 and ::1, as containerd does; "
        f"add --insecure-registry {host} to allow it"
    )
    assert "Traceback" not in run.stderr
    # Nothing reached the registry as HTTP: the TLS handshake is all it saw.
    assert registry_plain.registry.request_count() == before


def test_mixed_case_localhost_named_insecure_is_found(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    host = f"LocalHost:{_port(registry_plain)}"
    run = run_cli(["check", "--insecure-registry", host, f"{host}/sample/app:1.0.0"], tmp_path)
    assert run.code == 0, run.stdout + run.stderr


# -- a plain-HTTP token realm for an HTTPS registry ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class HttpRealm:
    endpoint: RegistryEndpoint  # HTTPS registry whose realm is http://127.0.0.1:PORT/token
    server: TokenServer  # that realm's token server: plain HTTP only

    @property
    def realm_host(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture(scope="module")
def http_realm(
    registry_binary: str,
    registry_token: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[HttpRealm]:
    """The token registry's storage and user, behind a token server on plain HTTP only."""
    workdir = tmp_path_factory.mktemp("registry-http-realm")
    signer = make_token_signer(workdir / "signer")
    assert registry_token.password is not None
    server = TokenServer(
        ssl_context=None,
        signer=signer,
        service=TOKEN_SERVICE,
        issuer=TOKEN_ISSUER,
        users={USERNAME: registry_token.password},
    )
    with server:
        assert server.realm.startswith("http://")
        settings = TokenAuthSettings(server.realm, TOKEN_SERVICE, TOKEN_ISSUER, signer.root_bundle)
        with _token_registry(
            registry_token, settings, workdir, tls_material, registry_binary
        ) as endpoint:
            yield HttpRealm(endpoint, server)


@pytest.fixture
def plain_realm(http_realm: HttpRealm) -> HttpRealm:
    http_realm.server.reset()
    return http_realm


def _check(endpoint: RegistryEndpoint, home: Path, *extra: str, creds: bool) -> tuple[int, str]:
    args = ["check", "-o", "json", *tls_args(endpoint), *extra]
    stdin = ""
    if creds:
        assert endpoint.username is not None and endpoint.password is not None
        args += ["--username", endpoint.username, "--password-stdin"]
        stdin = endpoint.password + "\n"
    run = run_cli([*args, endpoint.ref("sample/app:1.0.0")], home, stdin=stdin)
    assert "Traceback" not in run.stderr
    if endpoint.password is not None:
        assert endpoint.password not in run.stdout + run.stderr
    [result] = run.json()
    return run.code, str(result["message"]) if result["status"] != "found" else "found"


def test_http_realm_is_followed_anonymously(plain_realm: HttpRealm, tmp_path: Path) -> None:
    code, message = _check(plain_realm.endpoint, tmp_path, creds=False)
    assert (code, message) == (0, "found")
    asked = plain_realm.server.requests
    assert asked
    assert all(r.authorization is None for r in asked)


def test_http_realm_keeps_credentials_when_https_does_not_answer(
    plain_realm: HttpRealm, tmp_path: Path
) -> None:
    code, message = _check(plain_realm.endpoint, tmp_path, creds=True)
    assert code == 4
    realm = plain_realm.realm_host
    assert message.startswith(
        f"token realm http://{realm} is plain HTTP and https://{realm} cannot be reached ("
    ), message
    assert message.endswith(
        f"credentials are not sent over plain HTTP; add --insecure-registry {realm} to allow it"
    ), message
    assert not plain_realm.server.requests  # nothing was sent to it, over HTTP or HTTPS


def test_http_realm_named_insecure_gets_credentials_over_http(
    plain_realm: HttpRealm, tmp_path: Path
) -> None:
    insecure = ["--insecure-registry", plain_realm.realm_host]
    code, message = _check(plain_realm.endpoint, tmp_path, *insecure, creds=True)
    assert (code, message) == (0, "found")
    asked = plain_realm.server.requests
    assert asked
    assert all((r.authorization or "").startswith("Basic ") for r in asked)


@pytest.fixture(scope="module")
def upgradable_realm(
    registry_binary: str,
    registry_token: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RegistryEndpoint]:
    """A registry that names the token registry's HTTPS-only token server as an http:// realm:
    a TLS-terminating proxy's realm, whose HTTPS twin answers."""
    assert registry_token.token_server is not None and registry_token.registry.token is not None
    https_realm = registry_token.token_server.realm
    settings = dataclasses.replace(
        registry_token.registry.token, realm=https_realm.replace("https://", "http://", 1)
    )
    workdir = tmp_path_factory.mktemp("registry-upgradable-realm")
    with _token_registry(
        registry_token, settings, workdir, tls_material, registry_binary
    ) as endpoint:
        yield endpoint


@contextlib.contextmanager
def _token_registry(
    like: RegistryEndpoint,
    settings: TokenAuthSettings,
    workdir: Path,
    tls: TLSMaterial,
    binary: str,
) -> Iterator[RegistryEndpoint]:
    """Another TLS registry on ``like``'s storage and user, with the token ``settings``."""
    registry = LocalRegistry(
        workdir, storage=like.registry.storage, tls=tls.server, token=settings, binary=binary
    )
    with registry:
        yield dataclasses.replace(like, host=registry.host, url=registry.url, registry=registry)


def test_http_realm_credentials_go_over_https_when_it_answers(
    upgradable_realm: RegistryEndpoint, token_server: TokenServer, tmp_path: Path
) -> None:
    code, message = _check(upgradable_realm, tmp_path, creds=True)
    assert (code, message) == (0, "found")
    # The HTTPS-only token server was asked, with the credentials: over TLS.
    asked = token_server.requests
    assert asked
    assert all((r.authorization or "").startswith("Basic ") for r in asked)
