"""How the AWS source fails, against the stand-ins: every refusal of STS, the ECR APIs and the
Pod Identity agent is one ``CloudAuthError`` naming the endpoint and the identity (and what it
lacks), temporary exactly when a retry could help; a malformed, oversized or slow answer is
refused; and no token, key or password is ever in a message or a log line."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._aws import AwsSource
from imagecheck.authn.cloud._hosts import CloudRegistry
from imagecheck.errors import CloudAuthError, DeadlineExceeded
from tests.support.awscloud import (
    GET_TOKEN,
    REGISTRY,
    WEB_IDENTITY_TOKEN,
    AwsWorld,
    EcrStandIn,
    ecr_error,
    registry_of,
    running_aws_fixture,  # noqa: F401 (a fixture)
    sts_error,
    throttled,
    token_file_fixture,  # noqa: F401 (a fixture)
    world_fixture,  # noqa: F401 (a fixture)
)
from tests.support.cloudstandin import Fault, Reply

STS = "the AWS STS at https://127.0.0.1"
ECR = "the ECR API at https://127.0.0.1"


def registry(host: str = REGISTRY) -> CloudRegistry:
    return registry_of(host)


def fail(
    world: AwsWorld,
    env: dict[str, str],
    *,
    timeout: float = 10.0,
    deadline: float = 10.0,
    host: str = REGISTRY,
) -> CloudAuthError:
    http = world.http(timeout)
    source = AwsSource(env)
    with pytest.raises(CloudAuthError) as caught:
        asyncio.run(source.token(registry(host), http, Deadline.after(deadline)))
    message = str(caught.value)
    assert "\n" not in message
    for secret in secrets_of(world):
        assert secret not in message
    return caught.value


def secrets_of(world: AwsWorld) -> list[str]:
    found = [WEB_IDENTITY_TOKEN, world.ecr.password, world.public.password]
    for principal in world.iam.issued():
        found += [principal.secret_access_key, principal.session_token]
    return [s for s in found if s]


# --- STS ------------------------------------------------------------------------------------


def test_a_role_that_does_not_trust_the_token_names_the_role_and_its_trust_policy(
    world: AwsWorld, token_file: Path
) -> None:
    world.role.trusted.clear()
    error = fail(world, world.irsa_env(token_file))
    assert not error.temporary
    assert str(error).startswith(STS)
    assert str(error).endswith(
        f"refused AssumeRoleWithWebIdentity for role {world.role.arn} (IRSA): HTTP 403: "
        "AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity; the role's "
        "trust policy must allow sts:AssumeRoleWithWebIdentity to this ServiceAccount (the "
        "token's issuer and subject)"
    )
    assert world.ecr.requests == []


def test_an_expired_web_identity_token_names_the_file(world: AwsWorld, token_file: Path) -> None:
    world.role.expired.add(WEB_IDENTITY_TOKEN)
    error = fail(world, world.irsa_env(token_file))
    assert not error.temporary
    assert "HTTP 400: ExpiredTokenException: Token expired" in str(error)
    assert str(error).endswith(
        f"; the token in {token_file} (AWS_WEB_IDENTITY_TOKEN_FILE) was not taken"
    )


STS_FAULTS = [
    ("throttling", Fault(reply=sts_error(400, "Sender", "Throttling", "Rate exceeded")), True,
     "HTTP 400: Throttling: Rate exceeded"),
    ("idp unreachable", Fault(reply=sts_error(400, "Sender", "IDPCommunicationError",
                                              "Couldn't reach the issuer")), True,
     "HTTP 400: IDPCommunicationError: Couldn't reach the issuer"),
    ("server error page", Fault(reply=Reply(503, b"<html>Service Unavailable</html>")), True,
     "HTTP 503"),
    ("invalid token", Fault(reply=sts_error(400, "Sender", "InvalidIdentityToken",
                                            f"bad token {WEB_IDENTITY_TOKEN}")), False,
     "HTTP 400: InvalidIdentityToken: bad token [redacted]; the token in"),
]  # fmt: skip


@pytest.mark.parametrize(("fault", "temporary", "reason"), [f[1:] for f in STS_FAULTS],
                         ids=[f[0] for f in STS_FAULTS])  # fmt: skip
def test_sts_refusals_are_temporary_when_a_retry_could_help(
    world: AwsWorld, token_file: Path, fault: Fault, temporary: bool, reason: str
) -> None:
    world.sts.fail_next(fault)
    error = fail(world, world.irsa_env(token_file))
    assert error.temporary is temporary
    assert reason in str(error)


STS_ANSWERS = [
    ("not xml", Reply(200, b"{\"Credentials\": {}}"), "answered HTTP 200, not XML"),
    ("doctype", Reply(200, b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>'),
     "answered HTTP 200 with a DOCTYPE, not STS XML"),
    ("no result", Reply(200, b"<AssumeRoleWithWebIdentityResponse/>"),
     "answered no AssumeRoleWithWebIdentityResult"),
    ("no keys", Reply(200, b"<R><AssumeRoleWithWebIdentityResult><Credentials/>"
                           b"</AssumeRoleWithWebIdentityResult></R>"),
     "the access key id is empty"),
]  # fmt: skip


@pytest.mark.parametrize(("reply", "problem"), [a[1:] for a in STS_ANSWERS],
                         ids=[a[0] for a in STS_ANSWERS])  # fmt: skip
def test_an_sts_answer_that_is_not_credentials_is_refused(
    world: AwsWorld, token_file: Path, reply: Reply, problem: str
) -> None:
    world.sts.fail_next(Fault(reply=reply))
    error = fail(world, world.irsa_env(token_file))
    assert not error.temporary
    assert problem in str(error)
    assert world.ecr.requests == []


# --- the ECR APIs ---------------------------------------------------------------------------


def test_a_role_without_the_permission_is_named_with_what_it_needs(
    world: AwsWorld, token_file: Path
) -> None:
    world.role.permissions = frozenset()
    error = fail(world, world.irsa_env(token_file))
    issued = world.iam.issued()[-1]
    assert not error.temporary
    assert str(error).startswith(ECR)
    assert f"refused GetAuthorizationToken to the AWS identity {issued.arn} (IRSA): " in str(error)
    assert (
        f"HTTP 400: AccessDeniedException: User: {issued.arn} is not authorized to perform: "
        "ecr:GetAuthorizationToken on resource: *"
    ) in str(error)  # AWS's message, as far as a message is shown
    assert str(error).endswith("; it needs ecr:GetAuthorizationToken")


def test_ecr_public_says_what_it_needs(world: AwsWorld, token_file: Path) -> None:
    world.public.fail_next(Fault(reply=ecr_error(400, "AccessDeniedException", "denied")))
    error = fail(world, world.irsa_env(token_file), host="public.ecr.aws")
    assert str(error).startswith("the ECR Public API at https://127.0.0.1")
    assert str(error).endswith(
        "; it needs ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken"
    )


def test_a_credential_scoped_to_another_region_is_refused_as_aws_refuses_it(
    world: AwsWorld, token_file: Path
) -> None:
    """An ECR API of eu-west-1 behind the override: imagecheck signs for the registry's
    region, and the endpoint refuses the scope with ECR's own error."""
    with EcrStandIn(world.iam, world.tls.server_context(), region="eu-west-1") as elsewhere:
        env = {**world.irsa_env(token_file), "AWS_ENDPOINT_URL_ECR": elsewhere.url}
        error = fail(world, env)
    assert not error.temporary
    assert str(error).endswith(
        "HTTP 403: InvalidSignatureException: Credential should be scoped to a valid region.; "
        "it was signed for service ecr in us-east-1 and sent where AWS_ENDPOINT_URL_ECR says"
    )


def test_expired_static_session_keys_say_so(world: AwsWorld) -> None:
    principal = world.iam.session("arn:aws:sts::123456789012:assumed-role/ci/s", {GET_TOKEN})
    principal.expires_at = 0.0
    env = {
        "AWS_ACCESS_KEY_ID": principal.access_key_id,
        "AWS_SECRET_ACCESS_KEY": principal.secret_access_key,
        "AWS_SESSION_TOKEN": principal.session_token,
        **world.endpoints(),
    }
    error = fail(world, env)
    assert str(error).endswith(
        "HTTP 400: ExpiredTokenException: The security token included in the request is "
        "expired; its session token has expired"
    )
    assert not error.temporary


def test_a_key_aws_does_not_know_and_a_wrong_secret(world: AwsWorld) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIAUNKNOWNEXAMPLE00", "AWS_SECRET_ACCESS_KEY": "x" * 40,
           **world.endpoints()}  # fmt: skip
    assert str(fail(world, env)).endswith(
        "UnrecognizedClientException: The security token included in the request is invalid.; "
        "AWS does not know its access key or session token"
    )
    principal = world.iam.static_key("arn:aws:iam::123456789012:user/ci", {GET_TOKEN})
    env["AWS_ACCESS_KEY_ID"] = principal.access_key_id
    assert "HTTP 403: InvalidSignatureException: The request signature we calculated" in str(
        fail(world, env)
    )


ECR_FAULTS = [
    ("throttling", throttled(), True, "HTTP 400: ThrottlingException: Rate exceeded"),
    ("server error", Fault(reply=ecr_error(500, "ServerException", "internal")), True,
     "HTTP 500: ServerException: internal"),
    ("too many requests", Fault(reply=Reply(429, b"")), True, "HTTP 429"),
    ("bad parameter", Fault(reply=ecr_error(400, "InvalidParameterException", "bad")), False,
     "HTTP 400: InvalidParameterException: bad"),
    ("type with a namespace", Fault(reply=Reply(400, json.dumps(
        {"__type": "com.amazonaws.ecr#ThrottlingException", "message": "slow down"}).encode())),
     True, "HTTP 400: ThrottlingException: slow down"),
    ("type in the header", Fault(reply=Reply(400, b"", {"x-amzn-ErrorType":
                                                        "ThrottlingException:http://x"})),
     True, "HTTP 400: ThrottlingException"),
]  # fmt: skip


@pytest.mark.parametrize(("fault", "temporary", "reason"), [f[1:] for f in ECR_FAULTS],
                         ids=[f[0] for f in ECR_FAULTS])  # fmt: skip
def test_ecr_refusals_are_temporary_when_a_retry_could_help(
    world: AwsWorld, token_file: Path, fault: Fault, temporary: bool, reason: str
) -> None:
    world.ecr.fail_next(fault)
    error = fail(world, world.irsa_env(token_file))
    assert error.temporary is temporary
    assert reason in str(error)


def _answer(data: object) -> Fault:
    return Fault(reply=Reply(200, json.dumps({"authorizationData": data}).encode()))


def _token(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


ECR_ANSWERS = [
    ("not json", Fault(reply=Reply(200, b"<html/>")), "is not valid JSON"),
    ("no data", _answer([]), "holds no authorizationData"),
    ("an object", _answer({"authorizationToken": _token("AWS:x"), "expiresAt": 1}),
     "holds no authorizationData"),
    ("no expiry", _answer([{"authorizationToken": _token("AWS:x")}]),
     "holds no authorizationToken and expiresAt"),
    ("expiry as text", _answer([{"authorizationToken": _token("AWS:x"), "expiresAt": "soon"}]),
     "holds no authorizationToken and expiresAt"),
    ("not base64", _answer([{"authorizationToken": "AWS:x", "expiresAt": 1}]),
     "holds an authorizationToken that is not user:password"),
    ("no password", _answer([{"authorizationToken": _token("AWS"), "expiresAt": 1}]),
     "holds an authorizationToken that is not user:password"),
    ("a newline", _answer([{"authorizationToken": _token("AWS:pw\n"), "expiresAt": 1}]),
     "answered an unusable password"),
    ("oversized", Fault(size=200_000), "is larger than 65536 bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("fault", "problem"), [a[1:] for a in ECR_ANSWERS],
                         ids=[a[0] for a in ECR_ANSWERS])  # fmt: skip
def test_an_ecr_answer_that_is_not_a_credential_is_refused(
    world: AwsWorld, token_file: Path, fault: Fault, problem: str
) -> None:
    world.ecr.fail_next(fault)
    error = fail(world, world.irsa_env(token_file))
    assert not error.temporary
    assert problem in str(error)


def test_a_slow_endpoint_is_temporary_and_the_deadline_ends_it(
    world: AwsWorld, token_file: Path
) -> None:
    world.ecr.fail_next(Fault(delay=1.5))
    error = fail(world, world.irsa_env(token_file), timeout=0.5)
    assert error.temporary
    assert str(error).startswith(ECR) and str(error).endswith("did not answer within 0.5s")
    world.sts.fail_next(Fault(delay=1.5))
    with pytest.raises(DeadlineExceeded):
        fail(world, world.irsa_env(token_file), deadline=0.5)


def test_an_endpoint_nobody_answers_is_temporary(world: AwsWorld, token_file: Path) -> None:
    env = {**world.irsa_env(token_file), "AWS_ENDPOINT_URL_STS": "https://127.0.0.1:9"}
    error = fail(world, env)
    assert error.temporary
    assert str(error).startswith("cannot reach the AWS STS at https://127.0.0.1:9")


# --- the Pod Identity agent -----------------------------------------------------------------

AGENT_FAULTS = [
    ("expired token", None, 401, False, "HTTP 401: ExpiredToken: Token is expired"),
    ("untrusted token", None, 403, False, "HTTP 403: AccessDenied: Token is not trusted"),
    ("agent error", Fault(reply=Reply(500, b"oops")), 500, True, "HTTP 500"),
    ("agent not json", Fault(reply=Reply(200, b"nope")), 200, False, "is not valid JSON"),
    ("no keys", Fault(reply=Reply(200, b'{"AccessKeyId": "ASIA"}')), 200, False,
     "the secret access key is empty"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "status", "temporary", "reason"),
    [f[1:] for f in AGENT_FAULTS],
    ids=[f[0] for f in AGENT_FAULTS],
)
def test_agent_refusals_name_the_token_file(
    world: AwsWorld, token_file: Path, fault: Fault | None, status: int, temporary: bool,
    reason: str,
) -> None:  # fmt: skip
    if status == 401:
        world.role.expired.add(WEB_IDENTITY_TOKEN)
    elif status == 403:
        world.role.trusted.clear()
    if fault is not None:
        world.agent.fail_next(fault)
    error = fail(world, world.pod_identity_env(token_file))
    assert error.temporary is temporary
    assert reason in str(error)
    if status in (401, 403):
        assert str(error).startswith(
            f"the credentials agent at {world.agent.url}/v1/credentials refused the container "
            "credentials agent"
        )
        assert str(error).endswith(
            f"; it did not take the token in {token_file} (AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE)"
        )
    assert world.ecr.requests == []


def test_nothing_secret_reaches_the_log(
    world: AwsWorld, token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for fault in (throttled(), Fault(reply=ecr_error(400, "AccessDeniedException", "no"))):
        world.ecr.fail_next(fault)
        fail(world, world.irsa_env(token_file))
    world.sts.fail_next(Fault(reply=sts_error(400, "Sender", "InvalidIdentityToken", "no")))
    fail(world, world.irsa_env(token_file))
    assert caplog.records  # httpx logs its requests: they are looked at, not absent
    for secret in secrets_of(world):
        assert secret not in caplog.text
