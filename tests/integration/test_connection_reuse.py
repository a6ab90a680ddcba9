"""Connections opened per host, for the whole run, are at most ``concurrency + 1`` (issue #14):
registry and token service each keep theirs alive, and neither closes the other's.

Counted by a TCP proxy (``countingproxy.py``) in front of the real registry and, on the token
registry, in front of the token service too: a registry of this test's own, whose ``realm``
names the proxy. The ``+ 1``: a loopback registry is asked over HTTPS first, and a plain-HTTP
one answers that probe on a connection of its own (``ping.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import imagecheck
from imagecheck.result import Status
from tests.support.countingproxy import CountingProxy
from tests.support.endpoint import TOKEN_ISSUER, RegistryEndpoint
from tests.support.images import seed_many
from tests.support.pki import TLSMaterial, make_token_signer
from tests.support.registry import LocalRegistry, TokenAuthSettings
from tests.support.tokenserver import TokenServer

# Over the fast paths and over stock httpx (conftest.fastpath_mode).
pytestmark = pytest.mark.usefixtures("fastpath_mode")

SERVICE = "imagecheck-connection-reuse"
# More than httpx keeps alive by default (20), so a pool that closes its surplus would show.
CONCURRENCIES = [4, 24]
IMAGES = 96  # each in a repository of its own: one token each


@dataclass(frozen=True)
class Counted:
    """Image references through the registry's proxy, and the proxies that count."""

    images: list[str]
    registry: CountingProxy
    token_service: CountingProxy | None = None
    ca_file: Path | None = None


@pytest.fixture(scope="module")
def repositories(registry_plain: RegistryEndpoint) -> list[str]:
    """``public/reuse/repoNNNN:v0``: anonymous pull on the token registry (``public/*``)."""
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        return seed_many(client, registry_plain.url, IMAGES, 1, prefix="public/reuse")


@pytest.fixture(scope="module")
def plain(registry_plain: RegistryEndpoint, repositories: list[str]) -> Iterator[Counted]:
    with CountingProxy(registry_plain.registry.port) as proxy:
        yield Counted([f"{proxy.host}/{name}" for name in repositories], proxy)


@pytest.fixture(scope="module")
def token(
    registry_binary: str,
    registry_plain: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path_factory: pytest.TempPathFactory,
    repositories: list[str],
) -> Iterator[Counted]:
    """A token registry over TLS whose realm is the counting proxy of its token server."""
    workdir = tmp_path_factory.mktemp("registry-reuse")
    signer = make_token_signer(workdir / "signer")
    server = TokenServer(ssl_context=tls_material.server_context(), signer=signer, service=SERVICE)
    with server, CountingProxy(server.port) as token_proxy:
        settings = TokenAuthSettings(
            realm=f"https://{token_proxy.host}/token",
            service=SERVICE,
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
        with registry, CountingProxy(registry.port) as proxy:
            images = [f"{proxy.host}/{name}" for name in repositories]
            yield Counted(images, proxy, token_proxy, tls_material.ca_file)


def check_counted(counted: Counted, concurrency: int) -> None:
    counted.registry.reset()
    if counted.token_service is not None:
        counted.token_service.reset()
    ca_files = [counted.ca_file] if counted.ca_file else []
    results = imagecheck.check(
        counted.images, concurrency=concurrency, ca_files=ca_files, env={}, deadline=60
    )
    assert [r.status for r in results] == [Status.FOUND] * IMAGES, results[0].message


@pytest.mark.parametrize("concurrency", CONCURRENCIES)
def test_plain_registry_connections(plain: Counted, concurrency: int) -> None:
    check_counted(plain, concurrency)
    assert 1 <= plain.registry.accepted <= concurrency + 1


@pytest.mark.parametrize("concurrency", CONCURRENCIES)
def test_token_registry_and_token_service_connections(token: Counted, concurrency: int) -> None:
    check_counted(token, concurrency)
    assert token.token_service is not None
    assert 1 <= token.registry.accepted <= concurrency + 1
    assert 1 <= token.token_service.accepted <= concurrency + 1
