"""Tests for imagecheck._files: regular files only, capped, never blocking on a FIFO.

A FIFO nobody writes to is the regression to fear: a plain ``open`` blocks forever. Each
FIFO test has a short pytest-timeout, so a regression fails here instead of hanging the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagecheck._files import read_regular_file, size_text, write_regular_file
from imagecheck.errors import CredentialsError, UsageError

LIMIT = 1024


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def read(path: Path) -> bytes:
    return read_regular_file(path, limit=LIMIT, what="pull secret", error=CredentialsError)


def test_reads_a_regular_file_through_a_symlink(tmp_path: Path) -> None:
    # Kubernetes mounts secrets as ..data/ symlinks: they are followed.
    (tmp_path / "..data").mkdir()
    (tmp_path / "..data" / ".dockerconfigjson").write_bytes(b"{}")
    (tmp_path / ".dockerconfigjson").symlink_to("..data/.dockerconfigjson")
    assert read(tmp_path / ".dockerconfigjson") == b"{}"


def test_reads_exactly_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * LIMIT)
    assert read(path) == b"x" * LIMIT


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("make", "words"),
    [
        ("fifo", "a FIFO, not a regular file"),
        ("fifo-symlink", "a FIFO, not a regular file"),
        ("dev-zero", "a device, not a regular file"),
        ("directory", "a directory, not a regular file"),
        ("too-large", "larger than 1 KiB"),
        ("missing", "does not exist"),
    ],
)
def test_refuses_in_one_line(tmp_path: Path, fifo: Path, make: str, words: str) -> None:
    path = {
        "fifo": fifo,
        "fifo-symlink": tmp_path / "link",
        "dev-zero": Path("/dev/zero"),
        "directory": tmp_path,
        "too-large": tmp_path / "big",
        "missing": tmp_path / "nowhere",
    }[make]
    if make == "fifo-symlink":
        path.symlink_to(fifo)
    if make == "too-large":
        path.write_bytes(b"x" * (LIMIT + 1))
    with pytest.raises(CredentialsError) as info:
        read(path)
    message = str(info.value)
    assert words in message
    assert str(path) in message
    assert "pull secret" in message
    assert "\n" not in message


def test_a_proc_file_reporting_size_zero_is_still_capped() -> None:
    # /proc files say st_size 0; the cap holds on what is read, not on what fstat says.
    path = Path("/proc/self/maps")
    assert len(read_regular_file(path, limit=1 << 20, what="x", error=UsageError)) > 0
    with pytest.raises(UsageError, match="larger than 10 bytes"):
        read_regular_file(path, limit=10, what="x", error=UsageError)


def test_write_replaces_an_existing_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "termination-log"
    path.write_bytes(b"an older and longer message\n")
    write_regular_file(path, b"new\n", what="--termination-log", error=UsageError)
    assert path.read_bytes() == b"new\n"


@pytest.mark.timeout(10)
def test_write_refuses_a_fifo_without_blocking(fifo: Path) -> None:
    with pytest.raises(UsageError, match="not a regular file"):
        write_regular_file(fifo, b"x", what="--termination-log", error=UsageError)


@pytest.mark.timeout(10)
def test_write_refuses_a_fifo_that_has_a_reader(fifo: Path) -> None:
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(UsageError, match="a FIFO, not a regular file"):
            write_regular_file(fifo, b"x", what="--termination-log", error=UsageError)
    finally:
        os.close(reader)


def test_write_never_creates(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        write_regular_file(tmp_path / "nope", b"x", what="--termination-log", error=UsageError)
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize(
    ("limit", "text"), [(1 << 20, "1 MiB"), (64 * 1024, "64 KiB"), (1000, "1000 bytes")]
)
def test_size_text(limit: int, text: str) -> None:
    assert size_text(limit) == text
