"""imagecheck.localfiles: regular files only, capped, and links kept inside a root (issue #10).

Each special file is opened for real: a FIFO without a writer would block the test (the suite's
timeout ends it) if it were opened without O_NONBLOCK; /dev/zero would fill memory if read to
its end.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from imagecheck.errors import UsageError
from imagecheck.localfiles import FileTooLarge, LocalFileError, read_regular_file


def test_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_bytes(b"kind: Pod\n")
    assert read_regular_file(tmp_path / "a.yaml", 10) == b"kind: Pod\n"


def test_a_file_over_the_limit_is_too_large(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_bytes(b"x" * 11)
    with pytest.raises(FileTooLarge) as caught:
        read_regular_file(tmp_path / "a.yaml", 10)
    assert caught.value.reason == "larger than 10 bytes"
    assert caught.value.limit == 10
    assert isinstance(caught.value, UsageError)


def test_a_proc_file_that_says_it_is_empty_is_capped_too() -> None:
    """/proc files are regular and report size 0: only reading says how long they are."""
    with pytest.raises(FileTooLarge):
        read_regular_file("/proc/self/maps", 16)


@pytest.mark.parametrize(
    ("special", "kind"),
    [("/dev/zero", "character device"), ("/dev/null", "character device")],
)
def test_a_device_is_not_read(special: str, kind: str) -> None:
    with pytest.raises(LocalFileError) as caught:
        read_regular_file(special, 1024)
    assert caught.value.reason == f"not a regular file ({kind})"
    assert caught.value.errno is None


def test_a_link_to_a_device_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    with pytest.raises(LocalFileError, match="not a regular file"):
        read_regular_file(tmp_path / "zero.yaml", 1024)


def test_a_fifo_is_neither_opened_blocking_nor_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.yaml")
    with pytest.raises(LocalFileError) as caught:
        read_regular_file(tmp_path / "fifo.yaml", 1024)
    assert caught.value.reason == "not a regular file (FIFO)"


def test_a_directory_is_not_read(tmp_path: Path) -> None:
    with pytest.raises(LocalFileError, match=r"not a regular file \(directory\)"):
        read_regular_file(tmp_path, 1024)


def test_a_missing_file_says_so_with_its_errno(tmp_path: Path) -> None:
    with pytest.raises(LocalFileError) as caught:
        read_regular_file(tmp_path / "none.yaml", 1024)
    assert caught.value.errno == errno.ENOENT
    assert caught.value.reason == "No such file or directory"
    assert str(caught.value) == f"{tmp_path / 'none.yaml'}: No such file or directory"


def test_a_link_inside_the_root_is_followed(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "real.yaml").write_bytes(b"inside")
    (tmp_path / "link.yaml").symlink_to("sub/real.yaml")
    assert read_regular_file(tmp_path / "link.yaml", 100, root=str(tmp_path)) == b"inside"


@pytest.mark.parametrize("target", ["/etc/shadow", "/proc/self/environ", "../outside/s.yaml"])
def test_a_link_out_of_the_root_is_not_read(tmp_path: Path, target: str) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "s.yaml").write_bytes(b"SECRET")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "link.yaml").symlink_to(target)
    root = str(tmp_path / "repo")
    with pytest.raises(LocalFileError) as caught:
        read_regular_file(tmp_path / "repo" / "link.yaml", 100, root=root)
    assert caught.value.reason == f"a symbolic link to outside {root}"
    assert "SECRET" not in str(caught.value)


def test_a_root_reached_through_a_link_keeps_its_own_files(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.yaml").write_bytes(b"a")
    (tmp_path / "alias").symlink_to("real", target_is_directory=True)
    root = str(tmp_path / "alias")
    assert read_regular_file(tmp_path / "alias" / "a.yaml", 10, root=root) == b"a"


def test_a_sibling_with_the_root_as_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo-secrets").mkdir()
    (tmp_path / "repo-secrets" / "s.yaml").write_bytes(b"s")
    (tmp_path / "repo" / "s.yaml").symlink_to("../repo-secrets/s.yaml")
    with pytest.raises(LocalFileError, match="a symbolic link to outside"):
        read_regular_file(tmp_path / "repo" / "s.yaml", 10, root=str(tmp_path / "repo"))


def test_a_link_cycle_is_an_error_not_a_loop(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").symlink_to("b.yaml")
    (tmp_path / "b.yaml").symlink_to("a.yaml")
    with pytest.raises(LocalFileError) as caught:
        read_regular_file(tmp_path / "a.yaml", 10, root=str(tmp_path))
    assert caught.value.errno == errno.ELOOP
