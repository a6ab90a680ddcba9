"""The properties every imagecheck process must keep, whatever it was fed. One assertion per
line, so that hypothesis tells the failures apart and shrinks each to its own example."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.fuzz.proc import RSS_LIMIT_MIB, Finished

EXIT_CODES = {0, 1, 2, 3, 4}
STATUS_EXIT = {"found": 0, "missing": 1, "invalid": 2, "denied": 3, "error": 4}
JSON_FIELDS = {
    "image",
    "reference",
    "status",
    "digest",
    "media_type",
    "size",
    "registry",
    "message",
    "elapsed_ms",
}
TERMINATION_LOG_LIMIT = 4096


def control_characters(text: str) -> list[str]:
    """Characters that must not reach a terminal (newline aside): C0/C1 controls, ESC,
    format characters (bidi overrides), line and paragraph separators."""
    return [
        ch
        for ch in text
        if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


def assert_process_bounds(done: Finished, *, time_bound: float, netlog: Path) -> None:
    """Ended by itself, in time, in memory, without a traceback, on this machine."""
    assert done.code is not None, f"killed: still running after {done.elapsed:.1f}s\n{done!r}"
    assert "Traceback (most recent call last)" not in done.err, f"traceback\n{done!r}"
    assert done.elapsed <= time_bound, f"took {done.elapsed:.2f}s > {time_bound:.2f}s\n{done!r}"
    assert done.max_rss_mib <= RSS_LIMIT_MIB, (
        f"peak RSS {done.max_rss_mib:.0f} MiB > {RSS_LIMIT_MIB} MiB\n{done!r}"
    )
    off_machine = netlog.read_text(encoding="utf-8")
    assert off_machine == "", f"tried to leave the machine: {off_machine}\n{done!r}"


def assert_deadline(done: Finished, first_contact: float | None, deadline: float) -> None:
    """Over by ``deadline`` + 1 s after it first contacted the registry (the run's deadline
    starts about then; start-up before it is the time bound's allowance)."""
    if first_contact is None:
        return
    late = done.ended - first_contact
    assert late <= deadline + 1, f"ended {late:.2f}s after its first request\n{done!r}"


def assert_no_secret(secrets: Iterable[str], *texts: str) -> None:
    for secret in secrets:
        for text in texts:
            assert secret not in text, f"secret {secret!r} in output: {text[:3000]!r}"


def assert_exit_code(done: Finished) -> None:
    assert done.code in EXIT_CODES, f"undocumented exit code {done.code}\n{done!r}"


def assert_stderr_lines(done: Finished) -> None:
    """stderr: imagecheck's own one-line messages, nothing a registry can format."""
    bad = control_characters(done.err)
    assert not bad, f"control characters {bad!r} in stderr\n{done!r}"
    for line in done.err.splitlines():
        assert line.startswith("imagecheck:"), f"stray stderr line {line!r}\n{done!r}"


def assert_text_results(done: Finished, images: int) -> list[str]:
    """One line per image, no control characters; each line starts with its status."""
    bad = control_characters(done.out)
    assert not bad, f"control characters {bad!r} in stdout\n{done!r}"
    lines = done.out.splitlines()
    assert len(lines) == images, f"{len(lines)} stdout lines for {images} image(s)\n{done!r}"
    statuses = [line.split(" ", 1)[0] for line in lines]
    assert all(s in STATUS_EXIT for s in statuses), f"lines without a status\n{done!r}"
    return statuses


def assert_json_results(done: Finished, images: int) -> list[str]:
    try:
        data: Any = json.loads(done.out)
    except ValueError:
        raise AssertionError(f"stdout is not JSON\n{done!r}") from None
    assert isinstance(data, list) and len(data) == images, f"not {images} result(s)\n{done!r}"
    for item in data:
        assert isinstance(item, dict) and set(item) == JSON_FIELDS, f"fields\n{done!r}"
        assert item["status"] in STATUS_EXIT, f"status {item['status']!r}\n{done!r}"
        assert isinstance(item["message"], str), f"message\n{done!r}"
    return [item["status"] for item in data]


def assert_exit_matches(done: Finished, statuses: list[str], *, errors_pass: bool = False) -> None:
    """The one exit code for the statuses shown: 2 > 1 > 3 > 4 (README, Exit codes)."""
    shown = {s for s in statuses if not (errors_pass and s == "error")}
    expected = next(
        (STATUS_EXIT[s] for s in ("invalid", "missing", "denied", "error") if s in shown), 0
    )
    assert done.code == expected, f"exit {done.code} for statuses {statuses}\n{done!r}"


def assert_termination_log(path: Path, secrets: Iterable[str]) -> None:
    data = path.read_bytes()
    assert len(data) <= TERMINATION_LOG_LIMIT + 1, f"termination log of {len(data)} bytes"
    text = data.decode("utf-8", "replace")
    assert text.count("\n") <= 1 and not control_characters(text), (
        f"termination log is not one clean line: {text[:3000]!r}"
    )
    assert_no_secret(secrets, text)
