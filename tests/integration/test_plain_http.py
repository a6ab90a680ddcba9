"""When imagecheck uses plain HTTP, as the kubelet's containerd does (issue #11): against the
real registry and token server.

* A registry falls back to plain HTTP only when containerd's ``docker.IsLocalhost`` says so:
  exactly ``localhost`` (lowercase) or a loopback address. ``LocalHost:PORT`` gets HTTPS only,
  so against a plain-HTTP registry it is an error (exit 4), as the pull fails.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.clirun import run_cli
from tests.integration.conftest import RegistryEndpoint


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
