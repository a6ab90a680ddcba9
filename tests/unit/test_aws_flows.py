"""The AWS source's flows against the stand-ins over HTTPS (``tests/support/awscloud.py``):
static keys, IRSA and EKS Pod Identity to ECR and ECR Public, what each endpoint received
(the STS form, a SigV4 signature the ECR stand-in recomputes), the credential and its
lifetime, and the token file read again at every flow."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn import CloudKeychain
from imagecheck.authn.cloud._aws import AwsSource
from imagecheck.authn.cloud._hosts import CloudRegistry
from imagecheck.authn.cloud._keychain import CloudToken
from imagecheck.reference import parse_reference
from tests.support.awscloud import (
    ACCOUNT,
    GET_TOKEN,
    REGISTRY,
    WEB_IDENTITY_TOKEN,
    AwsWorld,
    registry_of,
    running_aws_fixture,  # noqa: F401 (a fixture)
    token_file_fixture,  # noqa: F401 (a fixture)
    world_fixture,  # noqa: F401 (a fixture)
)

PUBLIC = "public.ecr.aws"


def registry(host: str = REGISTRY) -> CloudRegistry:
    return registry_of(host)


def flow(world: AwsWorld, env: dict[str, str], host: str = REGISTRY) -> CloudToken:
    source = AwsSource(env)
    return asyncio.run(source.token(registry(host), world.http(), Deadline.after(10)))


def static_env(world: AwsWorld, *, session: bool = False, **extra: str) -> dict[str, str]:
    if session:
        principal = world.iam.session("arn:aws:sts::123456789012:assumed-role/ci/s", {GET_TOKEN})
    else:
        principal = world.iam.static_key("arn:aws:iam::123456789012:user/ci", {GET_TOKEN})
    env = {
        "AWS_ACCESS_KEY_ID": principal.access_key_id,
        "AWS_SECRET_ACCESS_KEY": principal.secret_access_key,
        **world.endpoints(),
        **extra,
    }
    if principal.session_token:
        env["AWS_SESSION_TOKEN"] = principal.session_token
    return env


def test_static_keys_sign_for_the_registrys_region_whatever_aws_region_says(
    world: AwsWorld,
) -> None:
    env = static_env(world, AWS_REGION="eu-west-1")
    token = flow(world, env)
    assert (token.credentials.username, token.credentials.password) == ("AWS", world.ecr.password)
    assert 12 * 3600 - 60 < token.lifetime <= 12 * 3600
    [signed] = world.ecr.signed
    assert (signed.access_key_id, signed.region, signed.service) == (
        env["AWS_ACCESS_KEY_ID"], "us-east-1", "ecr",
    )  # fmt: skip
    assert signed.signed_headers == ("content-type", "host", "x-amz-date", "x-amz-target")
    [request] = world.ecr.requests
    assert request.body == b'{"registryIds":["123456789012"]}'
    assert request.headers["x-amz-target"] == (
        "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"
    )
    assert world.sts.requests == [] and world.agent.requests == []
    assert token.credentials.source == (
        f"the pod's AWS identity access key ...{env['AWS_ACCESS_KEY_ID'][-4:]} from "
        "AWS_ACCESS_KEY_ID (static keys), which needs ecr:BatchGetImage on the repositories of "
        "123456789012 in us-east-1"
    )


def test_a_session_token_is_sent_and_signed(world: AwsWorld) -> None:
    flow(world, static_env(world, session=True))
    [signed] = world.ecr.signed
    assert "x-amz-security-token" in signed.signed_headers


def test_irsa_exchanges_the_token_at_sts_then_signs_with_the_role(
    world: AwsWorld, token_file: Path
) -> None:
    token = flow(world, world.irsa_env(token_file))
    [asked] = world.sts.requests
    assert (asked.method, asked.path) == ("POST", "/")
    assert asked.headers["content-type"] == "application/x-www-form-urlencoded; charset=utf-8"
    assert "authorization" not in asked.headers  # AssumeRoleWithWebIdentity is unsigned
    form = asked.form
    assert form["Action"] == "AssumeRoleWithWebIdentity" and form["Version"] == "2011-06-15"
    assert form["RoleArn"] == world.role.arn
    assert form["WebIdentityToken"] == WEB_IDENTITY_TOKEN  # the file's, without its newline
    assert form["RoleSessionName"].startswith("imagecheck-")
    assert asked.body.startswith(
        b"Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A"
    )
    issued = world.iam.issued()[-1]
    [signed] = world.ecr.signed
    assert signed.access_key_id == issued.access_key_id
    assert "x-amz-security-token" in signed.signed_headers
    assert token.credentials.password == world.ecr.password
    assert 3500 < token.lifetime <= 3600  # the role session's hour, not ECR's twelve
    assert token.credentials.source == (
        f"the pod's AWS identity {issued.arn} (IRSA), which needs ecr:BatchGetImage on the "
        "repositories of 123456789012 in us-east-1"
    )
    assert issued.arn.startswith("arn:aws:sts::123456789012:assumed-role/image-puller/imagecheck-")


def test_irsa_takes_the_session_name_from_the_environment(
    world: AwsWorld, token_file: Path
) -> None:
    flow(world, {**world.irsa_env(token_file), "AWS_ROLE_SESSION_NAME": "ns@pod=1,x.y_z+w-v"})
    assert world.sts.requests[0].form["RoleSessionName"] == "ns@pod=1,x.y_z+w-v"
    assert b"RoleSessionName=ns%40pod%3D1%2Cx.y_z%2Bw-v&" in world.sts.requests[0].body


def test_pod_identity_asks_the_agent_with_the_token_file(world: AwsWorld, token_file: Path) -> None:
    token = flow(world, world.pod_identity_env(token_file))
    [asked] = world.agent.requests
    assert (asked.method, asked.path) == ("GET", "/v1/credentials")
    assert asked.headers["authorization"] == WEB_IDENTITY_TOKEN
    issued = world.iam.issued()[-1]
    assert world.ecr.signed[0].access_key_id == issued.access_key_id
    assert token.credentials.password == world.ecr.password
    assert 6 * 3600 - 60 < token.lifetime <= 6 * 3600
    assert token.credentials.source.startswith(
        "the pod's AWS identity account 123456789012 (container credentials), which needs "
        "ecr:BatchGetImage"
    )
    assert world.sts.requests == []


def test_ecr_public_is_asked_in_us_east_1_with_its_own_target(
    world: AwsWorld, token_file: Path
) -> None:
    token = flow(world, {**world.irsa_env(token_file), "AWS_REGION": "eu-west-1"}, PUBLIC)
    [asked] = world.public.requests
    assert asked.headers["x-amz-target"] == "SpencerFrontendService.GetAuthorizationToken"
    assert asked.body == b"{}"
    [signed] = world.public.signed
    assert (signed.region, signed.service) == ("us-east-1", "ecr-public")
    assert world.ecr.requests == []
    assert token.credentials.password == world.public.password
    assert token.credentials.source.endswith("(IRSA), through ECR Public")


def test_another_accounts_registry_says_its_policy_must_allow_it(
    world: AwsWorld, token_file: Path
) -> None:
    token = flow(world, world.irsa_env(token_file), "210987654321.dkr.ecr.us-east-1.amazonaws.com")
    assert token.credentials.source.endswith(
        "repositories of 210987654321 in us-east-1 (from account 123456789012: their "
        "repository policy must allow it too)"
    )
    assert world.ecr.requests[0].body == b'{"registryIds":["210987654321"]}'


def test_the_keychain_reads_the_token_file_again_at_each_flow(
    world: AwsWorld, token_file: Path
) -> None:
    """The kubelet rotates the projected token: a renewal an hour later sends the new one."""
    now = [1000.0]
    keychain = CloudKeychain(world.irsa_env(token_file), http=world.http(), clock=lambda: now[0])
    image = parse_reference(f"{REGISTRY}/team/app:1")
    first = asyncio.run(keychain.aresolve(image, Deadline.after(10)))
    assert asyncio.run(keychain.aresolve(image, Deadline.after(10))) == first  # cached
    assert len(world.sts.requests) == 1
    rotated = "eyJhbGciOiJSUzI1NiJ9.the-rotated-token.c2ln"
    world.role.trusted.add(rotated)
    token_file.write_text(rotated)
    now[0] += 3600  # past the renewal point of the session's hour
    second = asyncio.run(keychain.aresolve(image, Deadline.after(10)))
    assert [r.form["WebIdentityToken"] for r in world.sts.requests] == [
        WEB_IDENTITY_TOKEN, rotated,
    ]  # fmt: skip
    assert second[0].password == world.ecr.password
    assert len(world.ecr.requests) == 2


def test_one_credential_per_registry_host(world: AwsWorld, token_file: Path) -> None:
    keychain = CloudKeychain(world.irsa_env(token_file), http=world.http())
    for image in (f"{REGISTRY}/a:1", f"{REGISTRY}/b:2", f"{REGISTRY}:443/c:3", f"{PUBLIC}/d:4"):
        assert asyncio.run(keychain.aresolve(parse_reference(image), Deadline.after(10)))
    assert len(world.ecr.requests) == 2  # the host, and the host with a port
    assert len(world.public.requests) == 1
    assert len(world.sts.requests) == 3


@pytest.mark.parametrize(
    "image",
    [f"{REGISTRY}.attacker.example/a:1", f"evil{REGISTRY}/a:1", "ecr.aws/a:1",
     f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com.cn/a:1", "public.ecr.aws.evil.test/a:1",
     f"{ACCOUNT}.DKR.ECR.us-east-1.amazonaws.com/a:1"],
)  # fmt: skip
def test_look_alike_hosts_get_nothing_and_send_nothing(
    world: AwsWorld, token_file: Path, image: str
) -> None:
    keychain = CloudKeychain(world.irsa_env(token_file), http=world.http())
    assert asyncio.run(keychain.aresolve(parse_reference(image), Deadline.after(10))) == ()
    assert world.sts.requests == [] and world.ecr.requests == [] and world.public.requests == []


def test_without_an_identity_nothing_is_sent(world: AwsWorld) -> None:
    env = {**world.endpoints(), "AWS_REGION": "us-east-1", "AWS_ROLE_ARN": "arn:aws:iam::1:role/x"}
    keychain = CloudKeychain(env, http=world.http())
    image = parse_reference(f"{REGISTRY}/team/app:1")
    assert asyncio.run(keychain.aresolve(image, Deadline.after(10))) == ()
    assert keychain.resolve(image) == ()
    assert world.sts.requests == [] and world.ecr.requests == [] and world.agent.requests == []
