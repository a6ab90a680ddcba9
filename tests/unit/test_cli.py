"""Tests for imagecheck.cli through ``click.testing.CliRunner``, table-driven.

Nothing is patched inside imagecheck: the network is faked at the transport with
``respx.mock`` (no route for anything unexpected, so a stray request fails the test), and the
environment is isolated so no real credential source is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import respx
from click.testing import CliRunner, Result

from imagecheck import exit_code
from imagecheck.cli import cli
from imagecheck.reference import parse_reference
from imagecheck.result import CheckResult, Status

DIGEST = "sha256:" + "ab" * 32
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def run(args: list[str], env: dict[str, str | None], stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, args, env=env, input=stdin)


# -- invalid references: exit 2, nothing sent --------------------------------------------------

# (id, arguments, expected invalid lines as (image, words in the reason))
INVALID: list[tuple[str, list[str], list[tuple[str, str]]]] = [
    ("uppercase", ["Busybox"], [("Busybox", "uppercase letters are not allowed")]),
    ("whitespace", ["bus box"], [("bus box", "whitespace is not allowed")]),
    ("scheme", ["https://ghcr.io/a/b"], [("https://ghcr.io/a/b", "a scheme such as https://")]),
    ("empty-tag", ["busybox:"], [("busybox:", "empty tag")]),
    ("bad-digest", ["busybox@sha256:abc"], [("busybox@sha256:abc", "sha256 digests are 64")]),
    ("valid-ones-not-checked", ["busybox", "registry.test/app:1", "Busybox"],
     [("Busybox", "uppercase letters are not allowed")]),
    ("every-invalid-listed", ["a//b", "busybox", "x:"],
     [("a//b", "empty path component"), ("x:", "empty tag")]),
]  # fmt: skip


@pytest.mark.parametrize(("args", "lines"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_reference_exits_2_before_any_request(
    network: respx.MockRouter,
    env: dict[str, str | None],
    args: list[str],
    lines: list[tuple[str, str]],
) -> None:
    result = run(["check", *args], env)
    assert result.exit_code == 2, result.output
    out = result.stdout.splitlines()
    assert len(out) == len(lines)
    for line, (image, words) in zip(out, lines, strict=True):
        assert line.startswith("invalid ")
        assert image in line
        assert words in line
    assert network.calls.call_count == 0


def test_invalid_reference_json(network: respx.MockRouter, env: dict[str, str | None]) -> None:
    result = run(["check", "-o", "json", "Busybox", "busybox"], env)
    assert result.exit_code == 2
    [entry] = json.loads(result.stdout)
    assert entry["image"] == "Busybox"
    assert entry["reference"] is None
    assert entry["status"] == "invalid"
    assert "uppercase" in entry["message"]
    assert network.calls.call_count == 0


def test_invalid_reference_wins_over_broken_credentials(
    network: respx.MockRouter, env: dict[str, str | None], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    result = run(["check", "--docker-config", str(bad), "Busybox"], env)
    assert result.exit_code == 2
    assert "uppercase" in result.stdout
    assert network.calls.call_count == 0


# -- usage errors: exit 2, one line on stderr --------------------------------------------------

# (id, extra arguments, extra env, stdin, words in the error)
USAGE: list[tuple[str, list[str], dict[str, str], str | None, str]] = [
    ("password-stdin-without-username", ["--password-stdin"], {}, "pw\n",
     "--password-stdin needs --username"),
    ("password-stdin-empty", ["--username", "alice", "--password-stdin"], {}, "",
     "nothing was read from standard input"),
    ("username-without-password", ["--username", "alice"], {}, None,
     "--username needs a password"),
    ("username-env-without-password", [], {"IMAGECHECK_USERNAME": "alice"}, None,
     "--username needs a password"),
    ("docker-config-missing", ["--docker-config", "/nonexistent/imagecheck/config.json"], {},
     None, "/nonexistent/imagecheck/config.json does not exist"),
    # A path with a newline and an escape still makes one line, not a forged second one.
    ("path-with-control-characters", ["--docker-config", "/nonexistent/a\nfound\x1b[0m"], {},
     None, "/nonexistent/a?found?[0m does not exist"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "extra_env", "stdin", "words"), [c[1:] for c in USAGE], ids=[c[0] for c in USAGE]
)
def test_usage_error_exits_2(
    network: respx.MockRouter,
    env: dict[str, str | None],
    args: list[str],
    extra_env: dict[str, str],
    stdin: str | None,
    words: str,
) -> None:
    result = run(["check", *args, "registry.test/app:1"], {**env, **extra_env}, stdin)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("imagecheck: error: ")
    assert words in line
    assert result.stdout == ""
    assert network.calls.call_count == 0


# (id, config.json content, words in the error)
BAD_CONFIGS: list[tuple[str, str, str]] = [
    ("invalid-json", "{not json", "not valid JSON"),
    ("not-an-object", "[]", "not a JSON object"),
    ("bad-base64", '{"auths": {"registry.test": {"auth": "%%%"}}}', "not valid base64"),
]


@pytest.mark.parametrize(
    ("content", "words"), [c[1:] for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS]
)
def test_bad_docker_config_exits_2_naming_the_file(
    network: respx.MockRouter,
    env: dict[str, str | None],
    tmp_path: Path,
    content: str,
    words: str,
) -> None:
    config = tmp_path / "config.json"
    config.write_text(content, encoding="utf-8")
    result = run(["check", "--docker-config", str(config), "registry.test/app:1"], env)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert str(config) in line
    assert words in line
    assert network.calls.call_count == 0


# -- exit codes --------------------------------------------------------------------------------


def results(*statuses: Status) -> list[CheckResult]:
    ref = parse_reference("registry.test/app:1")
    return [CheckResult("registry.test/app:1", ref, status) for status in statuses]


F, M, D, E, INV = Status.FOUND, Status.MISSING, Status.DENIED, Status.ERROR, Status.INVALID

# (id, statuses, exit code)
EXIT_CODES: list[tuple[str, list[Status], int]] = [
    ("nothing", [], 0),
    ("all-found", [F, F], 0),
    ("missing", [F, M], 1),
    ("invalid", [INV], 2),
    ("denied", [F, D], 3),
    ("error", [F, E], 4),
    ("invalid-beats-all", [E, D, M, INV, F], 2),
    ("missing-beats-denied-and-error", [E, D, M, F], 1),
    ("denied-beats-error", [E, D, F], 3),
    ("order-does-not-matter", [D, E], 3),
]


@pytest.mark.parametrize(
    ("statuses", "code"), [c[1:] for c in EXIT_CODES], ids=[c[0] for c in EXIT_CODES]
)
def test_exit_code_precedence(statuses: list[Status], code: int) -> None:
    assert exit_code(results(*statuses)) == code


def test_help_lists_exit_codes(env: dict[str, str | None]) -> None:
    result = run(["check", "--help"], env)
    assert result.exit_code == 0
    text = result.stdout
    assert "Exit codes:" in text
    for code, meaning in [
        ("0", "every image was found"),
        ("1", "at least one image is missing"),
        ("2", "usage error or invalid reference"),
        ("3", "access denied"),
        ("4", "registry unreachable"),
        ("130", "interrupted"),
    ]:
        assert any(line.split()[:1] == [code] and meaning in line for line in text.splitlines())
    assert "When several apply: 2, then 1, then 3, then 4." in text


# -- checking against a faked registry ---------------------------------------------------------


def fake_registry(network: respx.MockRouter) -> None:
    network.get("https://registry.test/v2/").respond(200)
    network.head("https://registry.test/v2/app/manifests/1.0").respond(
        200,
        headers={
            "Docker-Content-Digest": DIGEST,
            "Content-Type": OCI_MANIFEST,
            "Content-Length": "528",
        },
    )
    network.head("https://registry.test/v2/app/manifests/2.0").respond(404)
    network.head("https://registry.test/v2/private/manifests/latest").respond(403)


def test_json_output(network: respx.MockRouter, env: dict[str, str | None]) -> None:
    fake_registry(network)
    result = run(
        ["check", "--output", "json", "registry.test/app:1.0", "registry.test/app:2.0"], env
    )
    assert result.exit_code == 1, result.output
    found, missing = json.loads(result.stdout)
    fields = {"image", "reference", "status", "digest", "media_type", "message", "elapsed_ms"}
    assert fields <= set(found)
    assert set(found) == set(missing)
    assert found["image"] == "registry.test/app:1.0"
    assert found["reference"] == "registry.test/app:1.0"
    assert found["status"] == "found"
    assert found["digest"] == DIGEST
    assert found["media_type"] == OCI_MANIFEST
    assert found["size"] == 528
    assert isinstance(found["elapsed_ms"], int | float)
    assert found["elapsed_ms"] >= 0
    assert missing["image"] == "registry.test/app:2.0"
    assert missing["status"] == "missing"
    assert missing["digest"] is None
    assert missing["media_type"] is None
    assert "not found" in missing["message"]
    assert network.calls.call_count == 3  # ping and two HEADs: the fake sees every request


def test_json_keeps_the_text_as_given(
    network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    fake_registry(network)
    result = run(["check", "-o", "json", "registry.test/private"], env)
    assert result.exit_code == 3
    [entry] = json.loads(result.stdout)
    assert entry["image"] == "registry.test/private"
    assert entry["reference"] == "registry.test/private:latest"
    assert entry["status"] == "denied"


# (id, images, exit code, expected stdout lines as (status, shown, detail))
TEXT: list[tuple[str, list[str], int, list[tuple[str, str, str]]]] = [
    ("found", ["registry.test/app:1.0"], 0, [("found", "registry.test/app:1.0", DIGEST)]),
    ("found-and-missing", ["registry.test/app:1.0", "registry.test/app:2.0"], 1,
     [("found", "registry.test/app:1.0", DIGEST),
      ("missing", "registry.test/app:2.0", "not found in registry.test/app")]),
    ("denied", ["registry.test/private"], 3,
     [("denied", "registry.test/private:latest", "does not exist or requires authorization")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("images", "code", "lines"), [c[1:] for c in TEXT], ids=[c[0] for c in TEXT]
)
def test_text_output(
    network: respx.MockRouter,
    env: dict[str, str | None],
    images: list[str],
    code: int,
    lines: list[tuple[str, str, str]],
) -> None:
    fake_registry(network)
    result = run(["check", *images], env)
    assert result.exit_code == code, result.output
    out = result.stdout.splitlines()
    assert len(out) == len(lines)
    for line, (status, shown, detail) in zip(out, lines, strict=True):
        words = line.split()
        assert words[:2] == [status, shown]
        assert detail in line


def test_unreachable_registry_exits_4(
    network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    network.get("https://registry.test/v2/").mock(side_effect=httpx.ConnectError)
    result = run(["check", "--retries", "0", "registry.test/app:1.0"], env)
    assert result.exit_code == 4
    assert result.stdout.startswith("error")
    assert "cannot talk to registry.test" in result.stdout


def test_password_stdin_credentials_are_sent(
    network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    network.get("https://registry.test/v2/").respond(
        401, headers={"WWW-Authenticate": 'Basic realm="r"'}
    )
    head = network.head("https://registry.test/v2/app/manifests/1.0").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    result = run(
        ["check", "--username", "alice", "--password-stdin", "registry.test/app:1.0"],
        env,
        stdin="s3cret\n",
    )
    assert result.exit_code == 0, result.output
    assert head.calls.last.request.headers["Authorization"] == "Basic YWxpY2U6czNjcmV0"
    assert "s3cret" not in result.output


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "IMAGECHECK_DEBUG"])
def test_an_escaped_exception_is_one_line_and_exit_4_not_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], debug: bool
) -> None:
    """Python ends an uncaught exception with exit 1, which means "missing": never that."""
    import imagecheck.cli as cli_module  # noqa: PLC0415 - the package, not the group

    def broken(**_: object) -> None:
        raise TypeError("'int' object is not iterable\n\x1b[32mfound")

    exits: list[int] = []
    monkeypatch.setattr(cli_module, "cli", broken)
    monkeypatch.setattr("imagecheck.cli.os._exit", exits.append)
    if debug:
        monkeypatch.setenv("IMAGECHECK_DEBUG", "1")
    else:
        monkeypatch.delenv("IMAGECHECK_DEBUG", raising=False)
    cli_module.main()
    err = capsys.readouterr().err
    assert exits == [4]
    last = err.strip().splitlines()[-1]
    assert last == (
        "imagecheck: internal error (TypeError: 'int' object is not iterable??[32mfound); "
        "this is a bug, please report it"
    )
    assert ("Traceback" in err) is debug
