"""--platform against the real registry: indexes list their platforms, single manifests name
theirs in the config blob; a tag that exists but not for the platform is missing (exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clirun import run_cli, tls_args
from tests.support.endpoint import RegistryEndpoint

CASES = [
    ("sample/app:multi", "linux/arm64", 0, ""),
    ("sample/app:multi", "linux/aarch64", 0, ""),
    ("sample/app:multi", "linux/arm64/v8", 0, ""),
    ("sample/app:multi", "linux/arm/v7", 1, "it has: linux/amd64, linux/arm64"),
    ("sample/app:list", "linux/arm/v7", 0, ""),
    ("sample/app:list", "linux/arm", 0, ""),
    ("sample/app:list", "linux/arm/v6", 1, "it has: linux/amd64, linux/arm/v7"),
    ("sample/app:list", "windows/amd64", 1, "exists but not for windows/amd64"),
    ("sample/app:1.0.0", "linux/amd64", 0, ""),
    ("sample/app:1.0.0", "linux/x86_64", 0, ""),
    ("sample/app:1.0.0", "linux/arm64", 1, "it has: linux/amd64"),
    ("sample/app:docker", "linux/amd64", 0, ""),
    ("sample/app:docker", "linux/s390x", 1, "it has: linux/amd64"),
]


@pytest.mark.parametrize(
    ("name", "platform", "code", "message"), CASES, ids=[f"{n}-{p}" for n, p, _, _ in CASES]
)
def test_platform(
    registry_token: RegistryEndpoint,
    tmp_path: Path,
    name: str,
    platform: str,
    code: int,
    message: str,
) -> None:
    args = ["check", "-o", "json", *tls_args(registry_token), "--platform", platform]
    run = run_cli([*args, registry_token.ref(name)], tmp_path)
    assert run.code == code, run.stdout + run.stderr
    [result] = run.json()
    assert message in result["message"]
    if code == 0:
        assert result["digest"] == registry_token.images[name].digest


def test_platform_auto_is_this_machine(registry_plain: RegistryEndpoint, tmp_path: Path) -> None:
    # sample/app:multi has linux/amd64 and linux/arm64: CI machines are one of the two.
    run = run_cli(["check", "--platform", "auto", registry_plain.ref("sample/app:multi")], tmp_path)
    assert run.code == 0, run.stdout + run.stderr


def test_platform_checks_use_one_get_for_an_index(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    before = registry_plain.registry.request_count()
    run = run_cli(
        ["check", "--platform", "linux/arm64", registry_plain.ref("sample/app:multi")], tmp_path
    )
    assert run.code == 0
    assert registry_plain.registry.request_count() - before == 2  # ping + one GET


def test_bad_platform_is_a_usage_error(tmp_path: Path) -> None:
    run = run_cli(["check", "--platform", "linux", "busybox"], tmp_path)
    assert run.code == 2
    assert "expected OS/ARCH[/VARIANT]" in run.stderr
