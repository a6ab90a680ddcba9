"""Fixtures that run the real Distribution registry (``docker-registry``) for integration tests.

One storage directory is seeded once, over the HTTP API, through the no-auth registry
(``registry_plain``); ``registry_basic`` and ``registry_token`` are further ``docker-registry``
processes serving that same directory over TLS with Basic or token auth. All are session
scoped, listen on 127.0.0.1 only, and are stopped when the session ends.

The storage is shared: a test may push to a repository of its own, but must not delete or
overwrite the samples (:func:`tests.support.images.seed_samples`).

``kube_api`` is the Kubernetes API stand-in (``tests/support/kubeapi``): one HTTPS server for
the session, emptied before each test that uses it, with a kubeconfig pointing at it.

``docker-registry`` or ``htpasswd`` missing: the fixtures skip, except under ``CI=true``
where they fail, so that CI cannot go green by running nothing.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.endpoint import TOKEN_ISSUER, TOKEN_SERVICE, USERNAME, RegistryEndpoint
from tests.support.images import seed_samples
from tests.support.kubeapi import KubeAPI
from tests.support.pki import TLSMaterial, make_tls_material, make_token_signer
from tests.support.registry import (
    LocalRegistry,
    TokenAuthSettings,
    bcrypt_line,
    find_registry_binary,
)
from tests.support.tokenserver import TokenServer
from tests.support.tools import skip_or_fail

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(params=["fast", "stock"])
def fastpath_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A test run once with the fast paths and once with stock httpx and aiohttp
    (``IMAGECHECK_FASTPATH``, which the CLI children inherit): use it with
    ``pytestmark = pytest.mark.usefixtures("fastpath_mode")``."""
    monkeypatch.setenv("IMAGECHECK_FASTPATH", "1" if request.param == "fast" else "0")
    return str(request.param)


@pytest.fixture(scope="session")
def registry_binary() -> str:
    binary = find_registry_binary()
    if binary is None:
        skip_or_fail("docker-registry not installed (apt-get install docker-registry)")
    return binary


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TLSMaterial:
    return make_tls_material(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def registry_plain(
    registry_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryEndpoint]:
    """No auth, plain HTTP; also the instance that seeds the shared storage."""
    storage = tmp_path_factory.mktemp("registry-storage")
    workdir = tmp_path_factory.mktemp("registry-plain")
    with LocalRegistry(workdir, storage=storage, binary=registry_binary) as registry:
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            images = seed_samples(client, registry.url)
        yield RegistryEndpoint(registry.host, registry.url, images, registry)


@pytest.fixture(scope="session")
def registry_basic(
    registry_binary: str,
    registry_plain: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RegistryEndpoint]:
    """htpasswd (bcrypt) Basic auth over TLS; user ``alice`` with a random password."""
    if shutil.which("htpasswd") is None:
        skip_or_fail("htpasswd not installed (apt-get install apache2-utils)")
    workdir = tmp_path_factory.mktemp("registry-basic")
    password = secrets.token_hex(12)
    htpasswd = workdir / "htpasswd"
    htpasswd.write_text(bcrypt_line(USERNAME, password), encoding="utf-8")
    registry = LocalRegistry(
        workdir,
        storage=registry_plain.registry.storage,
        tls=tls_material.server,
        htpasswd=htpasswd,
        binary=registry_binary,
    )
    with registry:
        yield RegistryEndpoint(
            registry.host,
            registry.url,
            registry_plain.images,
            registry,
            ca_file=tls_material.ca_file,
            username=USERNAME,
            password=password,
        )


@pytest.fixture(scope="session")
def registry_token(
    registry_binary: str,
    registry_plain: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RegistryEndpoint]:
    """Token auth over TLS, tokens from a :class:`TokenServer` on its own port.

    ``alice`` (random password) may do anything; anonymous callers may pull ``sample/*`` and
    ``public/*``. ``token_server.refresh_tokens`` holds one identity token for alice.
    """
    workdir = tmp_path_factory.mktemp("registry-token")
    signer = make_token_signer(workdir / "signer")
    password = secrets.token_hex(12)
    server = TokenServer(
        ssl_context=tls_material.server_context(),
        signer=signer,
        service=TOKEN_SERVICE,
        issuer=TOKEN_ISSUER,
        users={USERNAME: password},
        refresh_tokens={secrets.token_urlsafe(24): USERNAME},
    )
    with server:
        settings = TokenAuthSettings(
            realm=server.realm,
            service=TOKEN_SERVICE,
            issuer=TOKEN_ISSUER,
            rootcertbundle=signer.root_bundle,
        )
        registry = LocalRegistry(
            workdir,
            storage=registry_plain.registry.storage,
            tls=tls_material.server,
            token=settings,
            binary=registry_binary,
        )
        with registry:
            yield RegistryEndpoint(
                registry.host,
                registry.url,
                registry_plain.images,
                registry,
                ca_file=tls_material.ca_file,
                username=USERNAME,
                password=password,
                token_server=server,
            )


@pytest.fixture(autouse=True)
def _reset_token_server(request: pytest.FixtureRequest) -> None:
    """Each test that uses the token registry starts with a fresh log and default behaviour."""
    if "registry_token" in request.fixturenames:
        endpoint: RegistryEndpoint = request.getfixturevalue("registry_token")
        assert endpoint.token_server is not None
        endpoint.token_server.reset()


@pytest.fixture
def token_server(registry_token: RegistryEndpoint) -> TokenServer:
    """The token registry's token server, reset for this test."""
    assert registry_token.token_server is not None
    return registry_token.token_server


@pytest.fixture(scope="session")
def _kube_api_server(
    tls_material: TLSMaterial, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeAPI]:
    api = KubeAPI.start(
        tls_material.server_context(), tls_material.ca_file, tmp_path_factory.mktemp("kubeapi")
    )
    yield api
    api.stop()


@pytest.fixture
def kube_api(_kube_api_server: KubeAPI) -> KubeAPI:
    """The Kubernetes API stand-in (``tests/support/kubeapi``), emptied for this test: no
    objects, every verb allowed, no writes logged. ``kube_api.kubeconfig`` points at it."""
    _kube_api_server.reset()
    return _kube_api_server
