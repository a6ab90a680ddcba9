"""Fixtures the unit tests share."""

from __future__ import annotations

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
