"""Fixtures of the differential suite: a private containerd, the mirror registry, the site,
and the agreement table printed at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.integration.differential.oracle import Containerd
from tests.integration.differential.report import TABLE_KEY, Row, render_table
from tests.integration.differential.site import Site, seed_extra, seed_mirror
from tests.support.endpoint import RegistryEndpoint
from tests.support.pki import TLSMaterial
from tests.support.registry import LocalRegistry
from tests.support.tools import system_tool


@pytest.fixture(scope="session")
def containerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Containerd]:
    """A containerd daemon of the suite's own (installed by scripts/system-deps.sh)."""
    daemon = system_tool("containerd")
    ctr = system_tool("ctr")
    with Containerd(tmp_path_factory.mktemp("containerd"), containerd=daemon, ctr=ctr) as running:
        yield running


@pytest.fixture(scope="session")
def registry_mirror(
    registry_binary: str, registry_plain: RegistryEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryEndpoint]:
    """A second plain registry with storage of its own: the mirror."""
    workdir = tmp_path_factory.mktemp("registry-mirror")
    with LocalRegistry(workdir, binary=registry_binary) as registry:
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            seed_mirror(client, registry.url)
        yield RegistryEndpoint(registry.host, registry.url, registry_plain.images, registry)


@pytest.fixture(scope="session")
def site(
    registry_plain: RegistryEndpoint,
    registry_basic: RegistryEndpoint,
    registry_token: RegistryEndpoint,
    registry_mirror: RegistryEndpoint,
    tls_material: TLSMaterial,
    tmp_path_factory: pytest.TempPathFactory,
) -> Site:
    with httpx.Client(timeout=10.0, trust_env=False) as client:
        extra = seed_extra(client, registry_plain.url)
    return Site(
        plain=registry_plain,
        basic=registry_basic,
        token=registry_token,
        mirror=registry_mirror,
        tls=tls_material,
        extra=extra,
        workdir=tmp_path_factory.mktemp("site"),
    )


@pytest.fixture
def agreement(request: pytest.FixtureRequest) -> list[Row]:
    """The run's table: each scenario test appends its row."""
    return request.config.stash.setdefault(TABLE_KEY, [])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    rows = terminalreporter.config.stash.get(TABLE_KEY, [])
    if rows:
        terminalreporter.write_sep(
            "=", "imagecheck vs the kubelet's puller (containerd) and skopeo"
        )
        terminalreporter.write_line(render_table(rows))
