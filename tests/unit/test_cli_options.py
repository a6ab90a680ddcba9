"""Option parsing that needs no network: durations, mirrors, exit codes with --on-error."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from imagecheck import exit_code
from imagecheck.cli import check, cli
from imagecheck.cli import duration as _duration
from imagecheck.cli import mirror_pair as _mirror
from imagecheck.errors import UsageError
from imagecheck.result import CheckResult, Status


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("90s", 90), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("500ms", 0.5),
     ("2m30s", 150), ("1.5s", 1.5)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert _duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m", "-1s", "1 h", "s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(click.BadParameter, match="is not a duration"):
        _duration(text)


@pytest.mark.parametrize(
    ("text", "pair"),
    [
        ("docker.io=mirror.example.com:5000", ("docker.io", "mirror.example.com:5000")),
        ("index.docker.io=localhost:5000", ("docker.io", "localhost:5000")),
        ("ghcr.io=[::1]:5000", ("ghcr.io", "[::1]:5000")),
    ],
)
def test_mirrors(text: str, pair: tuple[str, str]) -> None:
    assert _mirror(text) == pair


@pytest.mark.parametrize(
    "text", ["docker.io", "docker.io=", "=x.io", "docker.io=mirror", "a.io=b.io/path", "A b=c.io"]
)
def test_bad_mirrors(text: str) -> None:
    with pytest.raises(UsageError):
        _mirror(text)


def statuses(*values: Status) -> list[CheckResult]:
    return [CheckResult("x", None, s) for s in values]


@pytest.mark.parametrize(
    ("values", "fail_code", "pass_code"),
    [
        ((Status.FOUND, Status.ERROR), 4, 0),
        ((Status.MISSING, Status.ERROR), 1, 1),
        ((Status.DENIED, Status.ERROR), 3, 3),
        ((Status.ERROR,), 4, 0),
    ],
)
def test_on_error_pass_drops_only_errors(
    values: tuple[Status, ...], fail_code: int, pass_code: int
) -> None:
    assert exit_code(statuses(*values)) == fail_code
    assert exit_code(statuses(*values), on_error="pass") == pass_code


# -- numeric options: nan, inf, negative, huge -> exit 2, one line naming the option ------------

# (command, option): every numeric option of every command (issue #10: --timeout nan crashed
# with a traceback, --deadline nan was taken and ended the run at once).
NUMERIC_OPTIONS = [
    ("check", "--timeout"), ("check", "--deadline"), ("check", "--wait"),
    ("check", "--concurrency"), ("check", "--retries"),
    ("scan", "--timeout"), ("scan", "--deadline"), ("scan", "--wait"),
    ("scan", "--concurrency"), ("scan", "--retries"),
    ("audit", "--timeout"), ("audit", "--deadline"), ("audit", "--concurrency"),
    ("audit", "--retries"), ("audit", "--interval"), ("audit", "--max-series"),
    ("reap", "--timeout"), ("reap", "--concurrency"), ("reap", "--retries"),
    ("reap", "--grace"), ("reap", "--resync"),
    ("kueue-check", "--timeout"), ("kueue-check", "--concurrency"),
    ("kueue-check", "--retries"), ("kueue-check", "--wait"), ("kueue-check", "--resync"),
    ("gate", "--timeout"), ("gate", "--concurrency"), ("gate", "--retries"),
    ("gate", "--resync"), ("gate", "--wait"), ("gate", "--max-gate-age"),
    ("serve", "--timeout"), ("serve", "--concurrency"), ("serve", "--retries"),
    ("serve", "--review-deadline"), ("serve", "--cache-ttl"), ("serve", "--missing-ttl"),
    ("serve", "--cert-reload-interval"), ("serve", "--read-timeout"),
    ("serve", "--max-connections"), ("serve", "--max-images-per-review"),
]  # fmt: skip
BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "-1", "1e308", "9" * 400, "99999999999h", "", "x"]


def test_every_numeric_option_is_covered() -> None:
    found = set()
    assert isinstance(cli, click.Group)
    for name, command in cli.commands.items():
        for param in command.params:
            if (
                isinstance(param, click.Option)
                and not param.is_flag
                and (
                    isinstance(param.type, click.types._NumberParamTypeBase)
                    or param.type.name in ("seconds", "integer")
                )
            ):
                found.add((name, param.opts[-1]))
    assert found == set(NUMERIC_OPTIONS)


@pytest.mark.parametrize("value", BAD_NUMBERS)
@pytest.mark.parametrize(("command", "option"), NUMERIC_OPTIONS)
def test_bad_numbers_exit_2_in_one_line(command: str, option: str, value: str) -> None:
    args = [command, f"{option}={value}"]
    args += {"check": ["example.test/app:1"], "scan": ["-"]}.get(command, [])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"imagecheck: error: {option}: ")
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    ("option", "value", "seconds"),
    [("--timeout", "2.5", 2.5), ("--timeout", "1m", 60.0), ("--deadline", "90s", 90.0),
     ("--wait", "1h30m", 5400.0), ("--wait", "0", 0.0)],
)  # fmt: skip
def test_seconds_take_numbers_and_durations(option: str, value: str, seconds: float) -> None:
    param = next(p for p in check.params if p.opts[-1] == option)
    assert param.type.convert(value, param, None) == seconds


@pytest.mark.parametrize("command", ["check", "scan", "serve", "audit", "reap", "kueue-check"])
@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(["--cloud-auth", "sometimes"], {}, id="flag"),
        pytest.param([], {"IMAGECHECK_CLOUD_AUTH": "never"}, id="env"),
    ],
)
def test_a_bad_cloud_auth_exits_2_in_one_line(
    command: str, args: list[str], env: dict[str, str]
) -> None:
    operands = {"check": ["example.test/app:1"], "scan": ["-"]}.get(command, [])
    result = CliRunner().invoke(cli, [command, *args, *operands], env=env)
    assert result.exit_code == 2, result.output
    # click's usage error, as for every choice: the usage, then one line that says it all
    [line] = [text for text in result.stderr.splitlines() if text.startswith("Error:")]
    assert "--cloud-auth" in line
    assert "'auto'" in line and "'off'" in line


@pytest.mark.parametrize(
    ("args", "env", "mode"),
    [
        pytest.param([], {}, "auto", id="default"),
        pytest.param(["--cloud-auth", "OFF"], {}, "off", id="flag-any-case"),
        pytest.param([], {"IMAGECHECK_CLOUD_AUTH": "off"}, "off", id="env"),
        pytest.param(
            ["--cloud-auth", "auto"], {"IMAGECHECK_CLOUD_AUTH": "off"}, "auto", id="flag-wins"
        ),
    ],
)
def test_cloud_auth_is_read_from_the_flag_then_the_environment(
    args: list[str], env: dict[str, str], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IMAGECHECK_CLOUD_AUTH", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ctx = check.make_context("check", [*args, "example.test/app:1"])
    assert ctx.params["cloud_auth"] == mode
