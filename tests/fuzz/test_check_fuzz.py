"""``imagecheck check`` against a hostile registry: for any status, headers and body (and any
sequence of them, per request kind), the real process ends within ``--deadline`` + 1 s (plus
the start-up allowance), exits with a documented code that matches what it printed, prints
one clean line per image (or valid JSON), no traceback and no secret, stays under the memory
bound, never reaches off the machine and never sends credentials to another origin.

The same, in-process and with many more examples (no start-up to pay for): ``check()``
never raises, ends in time and returns a one-line, secret-free message.
"""

from __future__ import annotations

import asyncio
import json
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from imagecheck._deadline import Deadline
from imagecheck.authn import Credentials
from imagecheck.authn._credentials import StaticKeychain
from imagecheck.errors import CredentialsError
from imagecheck.reference import parse_reference
from imagecheck.registry import ClientOptions, ImageChecker, parse_platform
from imagecheck.result import CheckResult, Status
from tests.fuzz import judge
from tests.fuzz.proc import IMAGECHECK, child_env, run_bounded
from tests.fuzz.profiles import examples
from tests.fuzz.strategies import (
    CANARY,
    KNOWN_ATTACKS,
    b64,
    identifiers,
    repositories,
    scripts,
    secrets_with_canary,
)
from tests.support.standin import (
    Action,
    Endless,
    Exchange,
    GzipBomb,
    Reply,
    Script,
    StandIn,
    Trickle,
    statuses_sent,
)

DEADLINE = 2.0
TIMEOUT = 1.0
USER = "fuzz"
CREDENTIAL_SOURCES = ("--password-stdin", "config auth", "registrytoken", "identitytoken", "none")


@dataclass(frozen=True)
class Credential:
    """How the secret is given to the process."""

    source: str
    secret: str

    def secrets(self) -> list[str]:
        """What must never be printed: the canary, and the Basic header that carries it."""
        if self.source == "none":
            return [CANARY]
        return [CANARY, b64(f"{USER}:{self.secret}")]


credentials = st.builds(Credential, st.sampled_from(CREDENTIAL_SOURCES), secrets_with_canary)


def unsendable(source: str, secret: str) -> bool:
    """A secret HTTP cannot carry, which imagecheck refuses where it reads it (exit 2, before
    any request): a control character other than tab (RFC 9110 field values), and for a
    registry token, which goes into the header as it is, any whitespace too (RFC 6750)."""
    if source == "none":
        return False
    if source == "registrytoken":
        return any(unicodedata.category(c) == "Cc" or c.isspace() for c in secret)
    return any(unicodedata.category(c) == "Cc" and c != "\t" for c in secret)


def cli_args(
    standin: StandIn,
    home: Path,
    image: str,
    output: str,
    cred: Credential,
    insecure: bool,
    platform: str | None,
) -> tuple[list[str], bytes]:
    args = [IMAGECHECK, "check", image, "--deadline", str(DEADLINE), "--timeout", str(TIMEOUT)]
    args += ["-o", output, "--termination-log", str(home / "termination-log")]
    if platform:  # a GET, and the manifest (and config blob) parsed
        args += ["--platform", platform]
    if insecure:  # else credentials are withheld on plain HTTP, and never at risk
        args += ["--insecure-registry", standin.host]
    stdin = b""
    if cred.source == "--password-stdin":
        args += ["--username", USER, "--password-stdin"]
        stdin = cred.secret.encode() + b"\n"
    elif cred.source != "none":
        entry = {
            "config auth": {"auth": b64(f"{USER}:{cred.secret}")},
            "registrytoken": {"registrytoken": cred.secret},
            "identitytoken": {"identitytoken": cred.secret},
        }[cred.source]
        config = home / "config.json"
        config.write_text(json.dumps({"auths": {standin.host: entry}}), encoding="utf-8")
        args += ["--docker-config", str(config)]
    return args, stdin


def assert_no_credentials_elsewhere(exchanges: list[Exchange], cred: Credential) -> None:
    """Credentials go to the registry and its realm only: never to another origin that a
    redirect pointed at."""
    for e in exchanges:
        if e.listener != "elsewhere":
            continue
        sent = " ".join(value for _, value in e.headers)
        for secret in cred.secrets():
            assert secret not in sent, f"credentials sent to another origin: {e!r}"


def assert_answers_were_given(
    statuses: list[str], exchanges: list[Exchange], platform: str | None
) -> None:
    """found needs a 200 from the registry, missing a 404 (or, with --platform, a manifest
    for other platforms: a 200): never made up."""
    sent = statuses_sent(exchanges)
    if "found" in statuses:
        assert 200 in sent, f"found, yet the stand-in never answered 200: {exchanges!r}"
    if "missing" in statuses:
        expected = {404, 200} if platform else {404}
        assert sent & expected, f"missing, yet the stand-in never answered 404: {exchanges!r}"


PLATFORMS = (None, "linux/amd64")


def platform_for(attack: str) -> str | None:
    return "linux/amd64" if "platform" in attack else None


def known_attacks_cli(test: Callable[..., None]) -> Callable[..., None]:
    for name, script in reversed(KNOWN_ATTACKS.items()):
        test = example(
            script=script,
            repository="repo",
            identifier=":tag",
            output="text",
            cred=Credential("config auth", CANARY),
            insecure=True,
            platform=platform_for(name),
        ).via(name)(test)
    return test


@settings(max_examples=examples(30))
@given(
    script=scripts(),
    repository=repositories,
    identifier=identifiers,
    output=st.sampled_from(["text", "json"]),
    cred=credentials,
    insecure=st.booleans(),
    platform=st.sampled_from(PLATFORMS),
)
@known_attacks_cli
def test_check_process_against_a_hostile_registry(
    standin: StandIn,
    workdir: Path,
    netlog: Path,
    allowance: float,
    script: Script,
    repository: str,
    identifier: str,
    output: str,
    cred: Credential,
    insecure: bool,
    platform: str | None,
) -> None:
    home = workdir / "check"
    home.mkdir(exist_ok=True)
    termination_log = home / "termination-log"
    termination_log.write_bytes(b"")
    netlog.write_text("")
    standin.configure(script)
    image = standin.ref(repository + identifier)
    args, stdin = cli_args(standin, home, image, output, cred, insecure, platform)

    done = run_bounded(
        args, env=child_env(home, netlog), stdin=stdin, kill_after=DEADLINE + 4 + allowance
    )

    judge.assert_process_bounds(done, time_bound=DEADLINE + 1 + allowance, netlog=netlog)
    judge.assert_deadline(done, standin.first_contact(), DEADLINE)
    judge.assert_no_secret(cred.secrets(), done.out, done.err)
    judge.assert_termination_log(termination_log, cred.secrets())
    assert_no_credentials_elsewhere(standin.exchanges(), cred)
    judge.assert_exit_code(done)
    judge.assert_stderr_lines(done)
    if unsendable(cred.source, cred.secret):
        assert done.code == 2, f"an unsendable secret must be refused at its source\n{done!r}"
        assert done.out == "", done
        assert standin.exchanges() == [], "nothing is sent when a secret is refused"
        return
    if output == "text":
        statuses = judge.assert_text_results(done, 1)
    else:
        statuses = judge.assert_json_results(done, 1)
    judge.assert_exit_matches(done, statuses)
    assert_answers_were_given(statuses, standin.exchanges(), platform)


# -- in-process ----------------------------------------------------------------------------------

IN_PROCESS_DEADLINE = 0.75
_TAME_BODY = 256 * 1024


def tame(script: Script) -> Script:
    """The script without what would bloat or stall the pytest process itself (endless
    bodies, gzip bombs, slow trickles): those are the process properties' business."""

    def small(action: Action) -> Action:
        if isinstance(action, Trickle) and action.reply is not None:
            return action.reply
        if isinstance(action, Reply):
            if isinstance(action.body, Endless) and action.body.size > _TAME_BODY:
                return replace(action, body=replace(action.body, size=_TAME_BODY))
            if isinstance(action.body, GzipBomb):
                return replace(action, body=GzipBomb(_TAME_BODY))
        return action

    return Script({role: tuple(map(small, acts)) for role, acts in script.actions.items()})


async def check_in_process(image: str, secret: str, host: str, platform: str | None) -> CheckResult:
    options = ClientOptions(
        timeout=IN_PROCESS_DEADLINE / 2,
        retries=2,
        insecure_registries=frozenset({host}),
        platform=parse_platform(platform) if platform else None,
    )
    keychain = StaticKeychain(Credentials(username=USER, password=secret, source="fuzz"))
    async with ImageChecker(options, keychain) as checker:
        return await checker.check(parse_reference(image), Deadline.after(IN_PROCESS_DEADLINE))


def known_attacks_in_process(test: Callable[..., None]) -> Callable[..., None]:
    for name, script in reversed(KNOWN_ATTACKS.items()):
        test = example(
            script=script,
            repository="repo",
            identifier=":tag",
            secret=CANARY,
            platform=platform_for(name),
        ).via(name)(test)
    return test


@settings(max_examples=examples(100))
@given(
    script=scripts(),
    repository=repositories,
    identifier=identifiers,
    secret=secrets_with_canary,
    platform=st.sampled_from(PLATFORMS),
)
@known_attacks_in_process
def test_check_in_process_never_raises(
    standin: StandIn,
    guarded_here: Path,
    script: Script,
    repository: str,
    identifier: str,
    secret: str,
    platform: str | None,
) -> None:
    guarded_here.write_text("")
    standin.configure(tame(script))
    image = standin.ref(repository + identifier)
    started = time.monotonic()
    if unsendable("--password-stdin", secret):
        with pytest.raises(CredentialsError) as refused:
            Credentials(username=USER, password=secret, source="fuzz")
        assert not judge.control_characters(str(refused.value))
        judge.assert_no_secret([CANARY], str(refused.value))
        return

    result = asyncio.run(
        asyncio.wait_for(
            check_in_process(image, secret, standin.host, platform), IN_PROCESS_DEADLINE + 5
        )
    )

    elapsed = time.monotonic() - started
    assert elapsed <= IN_PROCESS_DEADLINE + 1, f"took {elapsed:.2f}s: {result!r}"
    assert result.status is not Status.INVALID
    shown = " ".join(str(v) for v in (result.message, result.digest, result.media_type))
    assert not judge.control_characters(shown), f"control characters in {result!r}"
    judge.assert_no_secret([CANARY, b64(f"{USER}:{secret}")], shown)
    assert guarded_here.read_text() == "", f"tried to leave the machine: {guarded_here.read_text()}"
