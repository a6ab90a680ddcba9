"""Local inputs that others write: Docker ``config.json``, podman ``auth.json``,
``DOCKER_AUTH_CONFIG``, mounted pull secrets, and the credential helpers they name.

Whatever their content (any JSON shape, deep nesting, huge numbers, invalid UTF-8, bad
base64, control characters in keys and secrets, helpers that print garbage, too much, or
nothing), reading them either works or is a one-line usage error (exit 2): never a
traceback, never a secret in the output, never past the time and memory bounds.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from imagecheck.authn import default_keychain
from imagecheck.errors import UsageError
from imagecheck.reference import parse_reference
from tests.fuzz import judge
from tests.fuzz.proc import IMAGECHECK, child_env, run_bounded
from tests.fuzz.profiles import examples
from tests.fuzz.recipes import Content, Repeat, render
from tests.fuzz.strategies import BEARER_PING, CANARY, b64, json_values
from tests.support.standin import SELF, Script, StandIn

DEADLINE = 2.0
HELPER = "fuzz"  # docker-credential-fuzz, a script in the example's PATH directory
SECRET_SUFFIXES = ("", "\x1b[31m", "\r\nX-Injected: 1", "\n", "\t", "\x00", "é", "\u202e")
WHERES = (
    "--docker-config",
    "--pull-secret",
    "pull secret directory",
    "legacy .dockercfg",
    "DOCKER_AUTH_CONFIG",
    "REGISTRY_AUTH_FILE",
)


@dataclass(frozen=True)
class Doc:
    """A credentials file's content (bytes, or a recipe for a large one)."""

    content: Content


secrets = st.sampled_from(SECRET_SUFFIXES).map(lambda suffix: CANARY + suffix)
_keys = st.one_of(
    st.sampled_from(
        [SELF, f"https://{SELF}/v2/", f"http://{SELF}", f"{SELF}/repo", "*.0.0.1", "", "a\nb"]
    ),
    st.text(max_size=20),
)
_auths_values = st.one_of(
    secrets.map(lambda s: b64(f"fuzz:{s}")),
    secrets.map(b64),  # no colon
    st.sampled_from(["!!!", "=", "YQ", "/w==", "A" * 5000]),
    st.text(max_size=30),
)
helper_names = st.one_of(
    st.just(HELPER),
    st.sampled_from(["fuzz-missing", "", "../../../bin/sh", "a b", "nul\x00byte", "x" * 300]),
)
entries = st.fixed_dictionaries(
    {},
    optional={
        "auth": st.one_of(_auths_values, json_values),
        "username": st.one_of(st.just("fuzz"), json_values),
        "password": st.one_of(secrets, json_values),
        "identitytoken": st.one_of(secrets, json_values),
        "registrytoken": st.one_of(secrets, json_values),
        "email": st.text(max_size=10),
    },
)
configs = st.fixed_dictionaries(
    {},
    optional={
        "auths": st.one_of(
            st.dictionaries(_keys, st.one_of(entries, json_values), max_size=3), json_values
        ),
        "credsStore": st.one_of(helper_names, json_values),
        "credHelpers": st.one_of(
            st.dictionaries(_keys, st.one_of(helper_names, json_values), max_size=2), json_values
        ),
    },
)


def _doc(value: Any) -> Doc:
    return Doc(json.dumps(value).encode())


CRAFTED_DOCS: list[Content] = [
    Repeat(b"[", 100000),
    Repeat(b"[", 5000, prefix=b'{"auths": '),
    Repeat(b"9", 5000, prefix=b'{"auths": {}, "n": ', suffix=b"}"),
    b"\xff\xfe\x00\x00",
    b"",
    b"{",
    Repeat(
        b"QQ==",
        50000,
        prefix=b'{"auths": {"' + SELF.encode() + b'": {"auth": "',
        suffix=b'"}}}',
    ),
]

documents = st.one_of(
    configs.map(_doc),
    st.dictionaries(_keys, entries, max_size=2).map(_doc),  # .dockercfg: no "auths"
    json_values.map(_doc),
    st.sampled_from(CRAFTED_DOCS).map(Doc),
    st.binary(max_size=100).map(Doc),
)


@dataclass(frozen=True)
class Helper:
    """What ``docker-credential-fuzz get`` does: prints ``stdout`` (or ``big`` bytes),
    ``stderr``, sleeps ``sleep`` seconds, exits ``code``."""

    stdout: Content = b""
    stderr: bytes = b""
    code: int = 0
    sleep: float = 0.0
    big: int = 0


helpers = st.builds(
    Helper,
    st.one_of(
        st.just(json.dumps({"Username": "fuzz", "Secret": CANARY}).encode()),
        st.just(json.dumps({"Username": "<token>", "Secret": CANARY}).encode()),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.sampled_from([Repeat(b"[", 100000), Repeat(b"9", 5000)]),
        st.sampled_from([b"\xff\xfe", b"", b"credentials not found"]),
        st.binary(max_size=60),
    ),
    st.one_of(
        st.just(b""),
        st.sampled_from([b"credentials not found in native keychain", b"\x1b[2Jboom\nline2"]),
        st.binary(max_size=60),
    ),
    st.sampled_from([0, 0, 1, 255]),
    st.just(0.0),
    st.sampled_from([0, 0, 0, 64 * 1024 * 1024]),
)

_HELPER_SCRIPT = """#!/bin/sh
d=$(dirname "$0")
cat >/dev/null
sleep "$(cat "$d/sleep")"
if [ "$(cat "$d/big")" != 0 ]; then head -c "$(cat "$d/big")" /dev/zero; fi
cat "$d/out.bin"
cat "$d/err.bin" >&2
exit "$(cat "$d/code")"
"""


def install_helper(bindir: Path, helper: Helper) -> None:
    bindir.mkdir(exist_ok=True)
    script = bindir / f"docker-credential-{HELPER}"
    script.write_text(_HELPER_SCRIPT, encoding="ascii")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (bindir / "out.bin").write_bytes(render(helper.stdout))
    (bindir / "err.bin").write_bytes(helper.stderr)
    (bindir / "code").write_text(str(helper.code))
    (bindir / "sleep").write_text(str(helper.sleep))
    (bindir / "big").write_text(str(helper.big))


def place(doc: bytes, where: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """Put the document where ``where`` says; the CLI arguments and environment for it."""
    if where == "--docker-config":
        (home / "config.json").write_bytes(doc)
        return ["--docker-config", str(home / "config.json")], {}
    if where == "--pull-secret":
        (home / "secret.json").write_bytes(doc)
        return ["--pull-secret", str(home / "secret.json")], {}
    if where in ("pull secret directory", "legacy .dockercfg"):
        directory = home / "regcred"
        directory.mkdir(exist_ok=True)
        for name in (".dockerconfigjson", ".dockercfg"):
            (directory / name).unlink(missing_ok=True)
        name = ".dockerconfigjson" if where == "pull secret directory" else ".dockercfg"
        (directory / name).write_bytes(doc)
        return ["--pull-secret", str(directory)], {}
    if where == "DOCKER_AUTH_CONFIG":
        text = os.fsdecode(doc.replace(b"\x00", b""))
        return [], {"DOCKER_AUTH_CONFIG": text}
    (home / "auth.json").write_bytes(doc)
    return [], {"REGISTRY_AUTH_FILE": str(home / "auth.json")}


# -- in-process: reading the sources ------------------------------------------------------------


@settings(max_examples=examples(300))
@given(doc=documents, where=st.sampled_from(WHERES))
def test_reading_credentials_works_or_is_one_usage_error(
    standin: StandIn, tmp_path_factory: pytest.TempPathFactory, doc: Doc, where: str
) -> None:
    home = tmp_path_factory.mktemp("creds", numbered=True)
    data = render(doc.content).replace(SELF.encode(), standin.host.encode())
    args, env = place(data, where, home)
    options = dict(zip(args[::2], args[1::2], strict=True))
    # No default config from this machine; no helper on PATH (the process test runs them).
    env = {**env, "DOCKER_CONFIG": str(home / "no-docker"), "PATH": str(home)}
    try:
        keychain = default_keychain(
            docker_config=options.get("--docker-config"),
            pull_secrets=[options["--pull-secret"]] if "--pull-secret" in options else [],
            env=env,
        )
        keychain.resolve(parse_reference(standin.ref("repo:tag")))
    except UsageError as exc:
        message = str(exc)
        assert not judge.control_characters(message), f"control characters: {message!r}"
        judge.assert_no_secret([CANARY], message)


# -- the process ----------------------------------------------------------------------------


@settings(max_examples=examples(20))
@given(doc=documents, where=st.sampled_from(WHERES), helper=helpers)
@example(
    doc=_doc({"credHelpers": {SELF: HELPER}}),
    where="--docker-config",
    helper=Helper(sleep=12.0),
).via("a credential helper that hangs past the deadline")
@example(
    doc=_doc({"credHelpers": {SELF: HELPER}}),
    where="--docker-config",
    helper=Helper(big=64 * 1024 * 1024),
).via("a credential helper that prints 64 MiB")
@example(
    doc=_doc({"credHelpers": {SELF: HELPER}}),
    where="--docker-config",
    helper=Helper(stdout=b"\xff\xfe"),
).via("a credential helper that prints invalid UTF-8")
@example(doc=Doc(Repeat(b"[", 100000)), where="--docker-config", helper=Helper())
@example(
    doc=Doc(Repeat(b"9", 5000, prefix=b'{"n": ', suffix=b"}")),
    where="--pull-secret",
    helper=Helper(),
)
@example(
    doc=_doc({"auths": {SELF: {"registrytoken": CANARY + "\r\nX-Injected: 1"}}}),
    where="--docker-config",
    helper=Helper(),
).via("a registry token that would inject a header")
@example(
    doc=_doc({"auths": {"a\n\x1b[2Jforged line": {"auth": "!!!"}}}),
    where="--docker-config",
    helper=Helper(),
).via("control characters in a key named by the error")
def test_check_process_with_hostile_credentials(
    standin: StandIn,
    workdir: Path,
    netlog: Path,
    allowance: float,
    doc: Doc,
    where: str,
    helper: Helper,
) -> None:
    home = workdir / "local"
    home.mkdir(exist_ok=True)
    bindir = home / "bin"
    install_helper(bindir, helper)
    termination_log = home / "termination-log"
    termination_log.write_bytes(b"")
    netlog.write_text("")
    # The registry asks for a token (Basic credentials or a registry token), and finds the
    # image with or without them.
    standin.configure(Script({"ping": (BEARER_PING,)}))
    data = render(doc.content).replace(SELF.encode(), standin.host.encode())
    args, env = place(data, where, home)
    argv = [IMAGECHECK, "check", standin.ref("repo:tag"), "--deadline", str(DEADLINE)]
    argv += ["--insecure-registry", standin.host, "--termination-log", str(termination_log)]
    env = {**env, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}

    done = run_bounded(
        [*argv, *args], env=child_env(home, netlog, env), kill_after=DEADLINE + 4 + allowance
    )

    judge.assert_process_bounds(done, time_bound=DEADLINE + 1 + allowance, netlog=netlog)
    judge.assert_no_secret([CANARY], done.out, done.err)
    judge.assert_termination_log(termination_log, [CANARY])
    judge.assert_exit_code(done)
    judge.assert_stderr_lines(done)
    if done.code == 2:
        assert done.out == "" and len(done.err.splitlines()) == 1, f"not one error line\n{done!r}"
    else:
        judge.assert_exit_matches(done, judge.assert_text_results(done, 1))
