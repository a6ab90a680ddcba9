"""Option parsing that needs no network: durations, mirrors, exit codes with --on-error."""

from __future__ import annotations

import click
import pytest

from imagecheck.cli import duration as _duration
from imagecheck.cli import exit_code
from imagecheck.cli import mirror_pair as _mirror
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
    with pytest.raises(click.BadParameter):
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
    assert exit_code(statuses(*values), errors_pass=True) == pass_code
