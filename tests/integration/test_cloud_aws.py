"""The AWS cloud identity end to end: ``python -m imagecheck check`` on an image of
``123456789012.dkr.ecr.us-east-1.amazonaws.com:<port>`` (resolved to loopback by
:class:`~tests.support.cloudnet.NameServer`), with the environment a pod has for IRSA, EKS Pod
Identity or static keys, the AWS stand-ins (``tests/support/awscloud.py``), and a real
registry over TLS whose only user is ``AWS`` with the password the ECR stand-in issues: the
check finds the image only with the credential the flow yields."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.awscloud import (
    GET_TOKEN,
    REGISTRY,
    WEB_IDENTITY_TOKEN,
    AwsWorld,
    aws_world,
    write_token,
)
from tests.support.clirun import Run
from tests.support.cloudnet import NameServer
from tests.support.endpoint import RegistryEndpoint
from tests.support.registry import LocalRegistry, bcrypt_line
from tests.support.tools import system_tool

FOUND = "sample/app:1.0.0"
MISSING = "sample/app:no-such-tag"


@dataclass(frozen=True)
class Ecr:
    """The stand-ins, and the registry under its ECR name."""

    world: AwsWorld
    registry: LocalRegistry
    names: NameServer

    def ref(self, image: str) -> str:
        return f"{REGISTRY}:{self.registry.port}/{image}"

    def check(self, home: Path, env: dict[str, str], *args: str, image: str = FOUND) -> Run:
        argv = ["check", "--ca-file", str(self.world.ca_file), *args, self.ref(image)]
        run = self.names.run_cli(argv, home, env=env)
        self.assert_no_secret(run)
        return run

    def assert_no_secret(self, run: Run) -> None:
        shown = run.stdout + run.stderr
        found = [WEB_IDENTITY_TOKEN, self.world.ecr.password]
        for principal in self.world.iam.issued():
            found += [principal.secret_access_key, principal.session_token]
        assert not [s for s in found if s and s in shown]


@pytest.fixture(scope="module")
def ecr(
    registry_binary: str,
    registry_plain: RegistryEndpoint,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Ecr]:
    workdir = tmp_path_factory.mktemp("aws-ecr")
    password = secrets.token_urlsafe(48)
    system_tool("htpasswd")
    htpasswd = workdir / "htpasswd"
    htpasswd.write_text(bcrypt_line("AWS", password), encoding="utf-8")
    with aws_world(workdir / "pki", (REGISTRY,), password=password) as world:
        registry = LocalRegistry(
            workdir / "registry",
            storage=registry_plain.registry.storage,
            tls=world.tls.server,
            htpasswd=htpasswd,
            binary=registry_binary,
        )
        with registry:
            yield Ecr(world, registry, NameServer(workdir, (REGISTRY,)))


@pytest.fixture
def world(ecr: Ecr) -> AwsWorld:
    ecr.world.clear()
    return ecr.world


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return write_token(tmp_path / "token")


def test_irsa_finds_the_image_with_the_credential_ecr_issues(
    ecr: Ecr, world: AwsWorld, token_file: Path, tmp_path: Path
) -> None:
    run = ecr.check(tmp_path, world.irsa_env(token_file))
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.startswith("found")
    [asked] = world.sts.requests
    assert asked.form["WebIdentityToken"] == WEB_IDENTITY_TOKEN
    assert asked.form["RoleArn"] == world.role.arn
    [signed] = world.ecr.signed
    assert (signed.region, signed.service) == ("us-east-1", "ecr")


def test_irsa_a_missing_tag_is_missing(
    ecr: Ecr, world: AwsWorld, token_file: Path, tmp_path: Path
) -> None:
    run = ecr.check(tmp_path, world.irsa_env(token_file), image=MISSING)
    assert run.code == 1, run.stdout + run.stderr
    assert run.stdout.startswith("missing")


def test_pod_identity_finds_the_image(
    ecr: Ecr, world: AwsWorld, token_file: Path, tmp_path: Path
) -> None:
    run = ecr.check(tmp_path, world.pod_identity_env(token_file))
    assert run.code == 0, run.stdout + run.stderr
    [asked] = world.agent.requests
    assert asked.headers["authorization"] == WEB_IDENTITY_TOKEN
    assert world.sts.requests == []
    assert len(world.ecr.signed) == 1


def test_static_keys_find_the_image(ecr: Ecr, world: AwsWorld, tmp_path: Path) -> None:
    key = world.iam.static_key("arn:aws:iam::123456789012:user/ci", {GET_TOKEN})
    env = {"AWS_ACCESS_KEY_ID": key.access_key_id, "AWS_SECRET_ACCESS_KEY": key.secret_access_key,
           **world.endpoints()}  # fmt: skip
    run = ecr.check(tmp_path, env)
    assert run.code == 0, run.stdout + run.stderr
    assert world.ecr.signed[0].access_key_id == key.access_key_id


@pytest.mark.parametrize("how", ["flag", "env"])
def test_cloud_auth_off_goes_anonymous_and_is_denied(
    ecr: Ecr, world: AwsWorld, token_file: Path, tmp_path: Path, how: str
) -> None:
    env = world.irsa_env(token_file)
    args: tuple[str, ...] = ("--cloud-auth", "off") if how == "flag" else ()
    if how == "env":
        env["IMAGECHECK_CLOUD_AUTH"] = "off"
    run = ecr.check(tmp_path, env, *args)
    assert run.code == 3, run.stdout + run.stderr
    assert "anonymously" in run.stdout + run.stderr
    assert world.sts.requests == [] and world.ecr.requests == []


def test_a_refusal_by_sts_is_an_error_naming_the_role(
    ecr: Ecr, world: AwsWorld, token_file: Path, tmp_path: Path
) -> None:
    world.role.trusted.clear()
    run = ecr.check(tmp_path, world.irsa_env(token_file))
    assert run.code == 4, run.stdout + run.stderr
    shown = run.stdout + run.stderr
    assert f"refused AssumeRoleWithWebIdentity for role {world.role.arn} (IRSA)" in shown
    assert "trust policy" in shown
    assert world.ecr.requests == []


def test_a_refusal_by_ecr_is_an_error_naming_the_identity_and_what_it_needs(
    ecr: Ecr, world: AwsWorld, token_file: Path, tmp_path: Path
) -> None:
    world.role.permissions = frozenset()
    run = ecr.check(tmp_path, world.irsa_env(token_file))
    assert run.code == 4, run.stdout + run.stderr
    shown = run.stdout + run.stderr
    assert "refused GetAuthorizationToken to the AWS identity arn:aws:sts::123456789012:" in shown
    assert "; it needs ecr:GetAuthorizationToken" in shown


def test_a_credential_the_registry_refuses_names_the_identity_and_what_pulling_needs(
    ecr: Ecr, world: AwsWorld, token_file: Path, tmp_path: Path
) -> None:
    issued, world.ecr.password = world.ecr.password, secrets.token_urlsafe(48)
    try:
        run = ecr.check(tmp_path, world.irsa_env(token_file))
    finally:
        world.ecr.password = issued
    assert run.code == 3, run.stdout + run.stderr
    shown = run.stdout + run.stderr
    assert "with credentials from the pod's AWS identity arn:aws:sts::123456789012:" in shown
    assert (
        "(IRSA), which needs ecr:BatchGetImage on the repositories of 123456789012 in us-east-1"
    ) in shown
