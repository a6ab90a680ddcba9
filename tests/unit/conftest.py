"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import certifi
import pytest
import respx


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_called=False)


@pytest.fixture(scope="session")
def one_ca_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bundle = Path(certifi.where()).read_text(encoding="ascii")
    end = "-----END CERTIFICATE-----\n"
    path = tmp_path_factory.mktemp("trust") / "one-ca.pem"
    path.write_text(bundle[bundle.index("-----BEGIN CERTIFICATE-----") :].split(end)[0] + end)
    return path


@pytest.fixture
def small_trust_store(one_ca_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here speaks TLS, but each ImageChecker loads the trust store (~20-50 ms from a
    bundle file); a one-certificate SSL_CERT_FILE keeps the suite fast."""
    monkeypatch.setenv("SSL_CERT_FILE", str(one_ca_file))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.fixture
def env(tmp_path: Path, one_ca_file: Path) -> dict[str, str | None]:
    """No credential source but the ones a test writes; a small trust store (speed only)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    return {
        "DOCKER_CONFIG": str(empty),
        "XDG_RUNTIME_DIR": str(empty),
        "REGISTRY_AUTH_FILE": None,
        "DOCKER_AUTH_CONFIG": None,
        "IMAGECHECK_PULL_SECRETS": None,
        "IMAGECHECK_USERNAME": None,
        "IMAGECHECK_PASSWORD": None,
        "SSL_CERT_FILE": str(one_ca_file),
        "SSL_CERT_DIR": None,
    }


@pytest.fixture
def network() -> Iterator[respx.MockRouter]:
    """Every request the CLI makes goes here; unrouted ones fail."""
    with respx.mock(assert_all_called=False, assert_all_mocked=True, using="httpx") as mock:
        yield mock
