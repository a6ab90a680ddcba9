"""The cloud keychain's own rules, whatever the cloud: which references it answers, when it
asks a source, how long it keeps an answer, and what it does when a renewal fails. The
sources here are fakes that count their flows; each cloud's real flow has its own tests."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn import (
    CloudKeychain,
    Credentials,
    SharedSources,
    default_keychain,
    resolve_credentials,
)
from imagecheck.authn._default import shared_sources
from imagecheck.authn.cloud._hosts import Cloud, CloudRegistry
from imagecheck.authn.cloud._http import CloudHTTP
from imagecheck.authn.cloud._keychain import CloudToken
from imagecheck.errors import CloudAuthError
from imagecheck.reference import parse_reference

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
ECR_WEST = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
SECRET = "cloud-secret-value"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeSource:
    """A cloud source that answers ``lifetime``-second tokens, or raises ``error``."""

    who: str | None = "role/test"
    lifetime: float = 3600.0
    error: CloudAuthError | None = None
    gate: asyncio.Event | None = None
    flows: list[str] = field(default_factory=list)

    def identity(self, registry: CloudRegistry) -> str | None:
        return self.who

    def cache_key(self, registry: CloudRegistry) -> str:
        return registry.host

    async def token(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> CloudToken:
        self.flows.append(registry.address)
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        password = f"{SECRET}-{len(self.flows)}"
        return CloudToken(Credentials("AWS", password, source=f"test {self.who}"), self.lifetime)


def keychain(source: FakeSource, clock: Clock | None = None, **kwargs: object) -> CloudKeychain:
    return CloudKeychain({}, sources={Cloud.AWS: source}, clock=clock or Clock(), **kwargs)  # type: ignore[arg-type]


def ask(chain: CloudKeychain, image: str) -> tuple[Credentials, ...]:
    return tuple(asyncio.run(chain.aresolve(parse_reference(image), Deadline.after(10))))


@pytest.mark.parametrize(
    "image",
    [
        pytest.param("docker.io/library/nginx:1", id="docker-hub"),
        pytest.param("registry.example.com/app:1", id="private"),
        pytest.param("123456789012.dkr.ecr.us-east-1.attacker.test/app:1", id="look-alike"),
        pytest.param("127.0.0.1:5000/app:1", id="loopback"),
    ],
)
def test_a_registry_of_no_cloud_gets_nothing_and_asks_nothing(image: str) -> None:
    source = FakeSource()
    assert ask(keychain(source), image) == ()
    assert source.flows == []


def test_no_plausible_identity_gets_nothing_and_asks_nothing() -> None:
    source = FakeSource(who=None)
    assert ask(keychain(source), f"{ECR}/app:1") == ()
    assert source.flows == []


def test_an_answer_is_kept_for_the_registry_until_renewal() -> None:
    clock, source = Clock(), FakeSource(lifetime=3600)
    chain = keychain(source, clock)
    (first,) = ask(chain, f"{ECR}/app:1")
    (again,) = ask(chain, f"{ECR}/other/app:2")
    assert first is again
    assert source.flows == [ECR]
    ask(chain, f"{ECR_WEST}/app:1")  # another registry: its own flow
    assert source.flows == [ECR, ECR_WEST]
    assert chain.resolve(parse_reference(f"{ECR}/app:1")) == (first,)  # sync: the cache


def test_a_token_is_renewed_once_three_quarters_of_its_life_passed() -> None:
    clock, source = Clock(), FakeSource(lifetime=4000)
    chain = keychain(source, clock)
    (first,) = ask(chain, f"{ECR}/app:1")
    usable = 4000 - 60  # the expiry margin: no check starts with a token about to expire
    clock.now += usable * 0.75 - 1
    assert ask(chain, f"{ECR}/app:1") == (first,)
    clock.now += 2
    (renewed,) = ask(chain, f"{ECR}/app:1")
    assert renewed.password != first.password
    assert len(source.flows) == 2


def test_a_failed_renewal_keeps_the_token_that_still_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, source = Clock(), FakeSource(lifetime=4000)
    chain = keychain(source, clock)
    (first,) = ask(chain, f"{ECR}/app:1")
    clock.now += 3500
    source.error = CloudAuthError("STS at https://sts.test refused: throttled", temporary=True)
    with caplog.at_level(logging.WARNING):
        assert ask(chain, f"{ECR}/app:1") == (first,)
    assert "throttled" in caplog.text
    assert SECRET not in caplog.text
    clock.now += 500  # now past its life: nothing to fall back on
    with pytest.raises(CloudAuthError, match="throttled"):
        ask(chain, f"{ECR}/app:1")


def test_a_first_failure_is_raised() -> None:
    source = FakeSource(error=CloudAuthError("ECR at https://api.ecr.test refused: denied"))
    with pytest.raises(CloudAuthError, match="denied"):
        ask(keychain(source), f"{ECR}/app:1")


@pytest.mark.parametrize("lifetime", [0.0, -5.0])
def test_a_token_with_no_life_left_is_used_once_and_not_kept(lifetime: float) -> None:
    source = FakeSource(lifetime=lifetime)
    chain = keychain(source)
    assert len(ask(chain, f"{ECR}/app:1")) == 1
    assert len(ask(chain, f"{ECR}/app:1")) == 1
    assert len(source.flows) == 2


def test_overlapping_checks_share_one_flow_and_a_cancelled_one_does_not_end_it() -> None:
    async def main() -> list[tuple[Credentials, ...]]:
        source = FakeSource(gate=asyncio.Event())
        chain = keychain(source)
        ref = parse_reference(f"{ECR}/app:1")
        tasks = [asyncio.ensure_future(chain.aresolve(ref, Deadline.after(10))) for _ in range(8)]
        await asyncio.sleep(0)
        tasks[0].cancel()  # one check hits its deadline
        await asyncio.sleep(0)
        assert source.gate is not None
        source.gate.set()
        answers = [tuple(await t) for t in tasks[1:]]
        assert source.flows == [ECR]
        return answers

    answers = asyncio.run(main())
    assert len({a[0].password for a in answers}) == 1


def test_the_cache_is_bounded() -> None:
    source = FakeSource()
    chain = keychain(source, max_cached=2)
    hosts = [f"12345678901{i}.dkr.ecr.us-east-1.amazonaws.com" for i in range(3)]
    for host in hosts:
        ask(chain, f"{host}/app:1")
    ask(chain, f"{hosts[0]}/app:1")  # dropped when the third came: asked again
    assert source.flows == [*hosts, hosts[0]]


def test_an_explicit_credential_wins_and_the_cloud_is_not_asked(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"auths": {ECR: {"auth": "dXNlcjpwYXNz"}}}), encoding="utf-8")
    source = FakeSource()
    shared = SharedSources(cloud=keychain(source))
    chain = default_keychain(docker_config=str(config), env={}, shared=shared)

    def first(image: str) -> Credentials:
        ref = parse_reference(image)
        (creds,) = asyncio.run(resolve_credentials(chain, ref, Deadline.after(10)))
        return creds

    assert first(f"{ECR}/app:1").username == "user"
    assert source.flows == []
    assert first(f"{ECR_WEST}/app:1").username == "AWS"


def test_off_leaves_the_cloud_out() -> None:
    assert shared_sources(cloud_auth="off", env={}).cloud is None
    assert isinstance(shared_sources(cloud_auth="auto", env={}).cloud, CloudKeychain)


def test_a_check_of_another_registry_imports_no_cloud_source() -> None:
    """The cloud modules are imported when a host of their cloud is met, not before."""
    code = (
        "import asyncio, sys\n"
        "from imagecheck._deadline import Deadline\n"
        "from imagecheck.authn import CloudKeychain\n"
        "from imagecheck.reference import parse_reference\n"
        "chain = CloudKeychain({})\n"
        "for image in ('docker.io/library/nginx:1', 'evilgcr.io/p/app:1'):\n"
        "    asyncio.run(chain.aresolve(parse_reference(image), Deadline.after(5)))\n"
        "print(sorted(m for m in sys.modules if m.startswith('imagecheck.authn._')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout
    for module in ("_aws", "_google", "_azure", "_sigv4"):
        assert f"imagecheck.authn.{module}'" not in loaded


def test_it_says_why_it_had_nothing_only_for_a_cloud_registry_with_no_identity() -> None:
    ecr = parse_reference(f"{ECR}/app:1")
    reason = keychain(FakeSource(who=None)).unanswered(ecr)
    assert reason is not None
    assert reason.startswith(f"no AWS identity in this process to ask {ECR} with")
    assert keychain(FakeSource()).unanswered(ecr) is None  # it had one: a real denial
    assert keychain(FakeSource(who=None)).unanswered(parse_reference("docker.io/x:1")) is None


def test_ecr_public_is_asked_anonymously_when_the_flow_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every ECR Public repository is public, and the kubelet pulls them anonymously."""
    source = FakeSource(error=CloudAuthError("ECR Public refused: AccessDenied"))
    with caplog.at_level(logging.WARNING):
        assert ask(keychain(source), "public.ecr.aws/nginx/nginx:1") == ()
    assert "asking it anonymously: ECR Public refused" in caplog.text
    no_identity = keychain(FakeSource(who=None))
    assert no_identity.unanswered(parse_reference("public.ecr.aws/nginx/nginx:1")) is None
