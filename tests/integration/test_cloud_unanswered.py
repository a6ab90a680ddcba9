"""A cloud's registry refusing anonymous access to a process with no identity of that cloud:
the kubelet would have pulled with the node's identity, so this is no verdict on the image.
It is an error that says so (exit 4, which ``--on-error pass`` lets through), not a denial;
with the cloud identities turned off it is a denial as for any registry.

A real registry (htpasswd Basic auth over TLS, as ECR answers) under an ECR host name,
resolved here by ``NameServer``."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cloudnet import NameServer, make_cloud_tls
from tests.support.endpoint import RegistryEndpoint
from tests.support.registry import LocalRegistry, bcrypt_line
from tests.support.tools import skip_or_fail

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


@dataclass(frozen=True)
class Cloudy:
    names: NameServer
    address: str  # host:port
    ca_file: Path


@pytest.fixture(scope="module")
def ecr_like(
    registry_binary: str, registry_plain: RegistryEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cloudy]:
    if shutil.which("htpasswd") is None:
        skip_or_fail("htpasswd not installed (apt-get install apache2-utils)")
    workdir = tmp_path_factory.mktemp("ecr-like")
    tls = make_cloud_tls(workdir / "tls", [ECR])
    htpasswd = workdir / "htpasswd"
    htpasswd.write_text(bcrypt_line("AWS", secrets.token_hex(16)), encoding="utf-8")
    registry = LocalRegistry(
        workdir,
        storage=registry_plain.registry.storage,
        tls=tls.server,
        htpasswd=htpasswd,
        binary=registry_binary,
    )
    with registry:
        names = NameServer(workdir, (ECR,))
        yield Cloudy(names, f"{ECR}:{registry.port}", tls.ca_file)


def run(
    cloudy: Cloudy, home: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    image = f"{cloudy.address}/sample/app:1.0.0"
    done = cloudy.names.run_cli(
        ["check", "--ca-file", str(cloudy.ca_file), *args, image], home, env=env
    )
    return done.code, done.stdout + done.stderr


def test_no_identity_is_an_error_that_names_what_is_missing(
    ecr_like: Cloudy, tmp_path: Path
) -> None:
    code, output = run(ecr_like, tmp_path)
    assert code == 4, output
    assert "HTTP 401 anonymously" in output
    assert f"no AWS identity in this process to ask {ECR} with" in output
    assert "Traceback" not in output


def test_on_error_pass_lets_the_kubelet_try(ecr_like: Cloudy, tmp_path: Path) -> None:
    code, output = run(ecr_like, tmp_path, "--on-error", "pass")
    assert code == 0, output


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(["--cloud-auth", "off"], None, id="flag"),
        pytest.param([], {"IMAGECHECK_CLOUD_AUTH": "off"}, id="env"),
    ],
)
def test_with_the_cloud_off_it_is_a_denial(
    ecr_like: Cloudy, tmp_path: Path, args: list[str], env: dict[str, str] | None
) -> None:
    code, output = run(ecr_like, tmp_path, *args, env=env)
    assert code == 3, output
    assert "no AWS identity" not in output
