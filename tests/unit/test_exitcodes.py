"""Tests for imagecheck.exitcodes: the one map from results and errors to exit codes, and the
README's table that documents it. (Result precedence: tests/unit/test_cli.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from imagecheck.errors import (
    AuthenticationError,
    CredentialsError,
    DeadlineExceeded,
    ImagecheckError,
    InvalidReferenceError,
    InvalidReferencesError,
    NotTLSError,
    RegistryError,
    TransientError,
    UsageError,
)
from imagecheck.exitcodes import ExitCode, OnError, error_exit_code, exit_code
from imagecheck.result import CheckResult, Status

README = Path(__file__).resolve().parents[2] / "README.md"

# (id, error, exit code)
ERRORS: list[tuple[str, ImagecheckError, int]] = [
    ("usage", UsageError("--listen 'x': expected HOST:PORT"), 2),
    ("invalid-reference", InvalidReferenceError("Busybox", "uppercase"), 2),
    ("invalid-references", InvalidReferencesError([InvalidReferenceError("A", "uppercase")]), 2),
    ("credentials", CredentialsError("config.json: not valid JSON"), 2),
    ("registry", RegistryError("the Kubernetes API answered 403"), 4),
    ("transient", TransientError("connection refused"), 4),
    ("authentication", AuthenticationError("token refused"), 4),
    ("not-tls", NotTLSError("plain HTTP"), 4),
    ("deadline", DeadlineExceeded("deadline exceeded"), 4),
    ("base", ImagecheckError("anything else of ours"), 4),
]  # fmt: skip


@pytest.mark.parametrize(("error", "code"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_error_exit_codes(error: ImagecheckError, code: int) -> None:
    assert error_exit_code(error) == code


def result(status: Status) -> CheckResult:
    return CheckResult("x", None, status)


# (id, statuses, invalid_input, on_error, exit code)
RUNS: list[tuple[str, list[Status], bool, OnError, int]] = [
    ("unreadable-file-alone", [], True, "fail", 2),
    ("unreadable-file-beats-missing", [Status.MISSING, Status.FOUND], True, "fail", 2),
    ("unreadable-file-with-passed-error", [Status.ERROR], True, "pass", 2),
    ("all-found", [Status.FOUND], False, "fail", 0),
    ("error-passed", [Status.ERROR, Status.FOUND], False, "pass", 0),
    ("denied-not-passed", [Status.DENIED, Status.ERROR], False, "pass", 3),
]  # fmt: skip


@pytest.mark.parametrize(
    ("statuses", "invalid_input", "on_error", "code"),
    [c[1:] for c in RUNS],
    ids=[c[0] for c in RUNS],
)
def test_run_exit_codes(
    statuses: list[Status], invalid_input: bool, on_error: OnError, code: int
) -> None:
    results = [result(s) for s in statuses]
    assert exit_code(results, invalid_input=invalid_input, on_error=on_error) == code


def test_the_readme_table_lists_every_code() -> None:
    section = README.read_text(encoding="utf-8").split("\n## Exit codes\n", 1)[1]
    table = section.strip().split("\n\n", 1)[0]
    rows = re.findall(r"^\| ([0-9][0-9 /]*) \|", table, re.MULTILINE)
    assert {int(code) for row in rows for code in row.split("/")} == set(ExitCode)
