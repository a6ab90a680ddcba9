"""A hosts.toml directory that cannot be used: one-line errors naming the file and the line;
the bounds on what is read; what is read once, at load time."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from imagecheck.errors import ConfigFileError, UsageError
from imagecheck.reference import parse_reference
from imagecheck.routes import load_hosts_dir


def write(root: Path, directory: str, text: str | bytes) -> Path:
    (root / directory).mkdir(parents=True, exist_ok=True)
    file = root / directory / "hosts.toml"
    if isinstance(text, bytes):
        file.write_bytes(text)
    else:
        file.write_text(text, encoding="utf-8")
    return file


def refused(root: Path) -> ConfigFileError:
    with pytest.raises(ConfigFileError) as caught:
        load_hosts_dir(root)
    error = caught.value
    assert isinstance(error, UsageError)  # exit 2, as every bad option
    assert "\n" not in str(error)
    return error


BAD_FILES = [
    ('[host."https://m"\n', 1, "not TOML"),
    ('server = "https://s"\nserver = "x"\n[host]\n', 2, "not TOML"),
    ('[host."https://m"]\n  capabilities = ["pull", "fetch"]\n', 2, "unknown capability 'fetch'"),
    ('[host."https://m"]\n  capabilities = "pull"\n', 2, "capabilities must be a list"),
    ('[host."https://m"]\n  ca = 3\n', 2, "ca must be a path or a list"),
    ('[host."https://m"]\n  ca = ["a", 3]\n', 2, "ca must be a path or a list"),
    ('[host."https://m"]\n  client = [["a"]]\n', 2, "client pairs"),
    ('[host."https://m"]\n  client = [["a", "b", "c"]]\n', 2, "client pairs"),
    ('[host."https://m"]\n  client = 1\n', 2, "client must be"),
    ('[host."https://m"]\n  skip_verify = "yes"\n', 2, "skip_verify must be true or false"),
    ('[host."https://m"]\n  override_path = 1\n', 2, "override_path must be"),
    ('[host."https://m"]\n\n[host."https://m".header]\n  x = 1\n', 3, "header 'x' must be"),
    ('[host."https://m"]\n  header = { "a b" = "1" }\n', 2, "not a valid field name"),
    ('[host."https://m"]\n  header = { x = "1\\r\\nInjected: 1" }\n', 2, "line break"),
    ('[host."https://m"]\n  header = "x"\n', 2, "header must be a table"),
    ('server = 5\n[host]\n', 1, "server must be a string"),
    ('server = "ftp://s"\n[host]\n', 1, "scheme 'ftp' is not http or https"),
    ('server = "HTTP://s"\n[host]\n', 1, "scheme 'HTTP' is not http or https"),
    ('server = "http2://s"\n[host]\n', 1, "scheme 'http2' is not http or https"),
    ('server = "https://s:port"\n[host]\n', 1, "invalid port"),
    ('\n[host."https://a b"]\n', 2, "invalid character ' ' in host name"),
    ('[host."https://"]\n', 1, "no host"),
    ('[host."httpx"]\n', 1, "scheme '(none)'"),
    ('[host."https://m\\u0001"]\n', 1, "control character"),
    ('[host]\n  "https://m" = 1\n', None, "must be a table"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "reason"), BAD_FILES)
def test_bad_file_names_file_and_line(
    tmp_path: Path, text: str, line: int | None, reason: str
) -> None:
    file = write(tmp_path, "reg.local", text)
    error = refused(tmp_path)
    assert error.path == file
    assert error.line == line
    assert reason in error.reason
    assert str(error).startswith(f"{file}:{line}: " if line else f"{file}: ")


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    file = write(tmp_path, "reg.local", b'[host."https://m"]\n\n  ca = "\xff"\n')
    error = refused(tmp_path)
    assert (error.path, error.line, error.reason) == (file, 3, "not UTF-8 text")


def test_deep_nesting_is_an_error_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, "reg.local", "a = " + "[" * 20_000 + "]" * 20_000 + "\n[host]\n")
    assert "not TOML" in refused(tmp_path).reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("".join(f'[host."https://m{n}"]\n' for n in range(65)), "more than 64 [host] tables"),
        (
            '[host."https://m"]\n  header = {' + ", ".join(f'h{n} = "v"' for n in range(33)) + "}",
            "header must be a table of at most 32 names",
        ),
        ('[host."https://m"]\n  header = { h = "' + "v" * 4097 + '" }', "longer than 4096"),
        ('[host."https://m"]\n  header = { h = [' + '"v",' * 17 + "] }", "header 'h' must be"),
        ('[host."https://m"]\n  ca = [' + '"c",' * 33 + "]", "at most 32 strings"),
    ],
    ids=["hosts", "header-names", "header-length", "header-values", "ca-files"],
)
def test_bounds(tmp_path: Path, text: str, reason: str) -> None:
    write(tmp_path, "reg.local", text)
    assert reason in refused(tmp_path).reason


def test_hosts_toml_size_is_capped(tmp_path: Path) -> None:
    file = write(tmp_path, "reg.local", "[host]\n" + "#" * (64 * 1024))
    error = refused(tmp_path)
    assert (error.path, error.reason) == (file, "cannot use hosts.toml: larger than 64 KiB")


def test_number_of_host_directories_is_capped(tmp_path: Path) -> None:
    for number in range(257):
        (tmp_path / f"reg{number}.local").mkdir()
    error = refused(tmp_path)
    assert (error.path, error.reason) == (tmp_path, "more than 256 registry host directories")


def test_certificate_directory_size_is_capped(tmp_path: Path) -> None:
    directory = tmp_path / "reg.local"
    directory.mkdir()
    for number in range(257):
        (directory / f"{number}.crt").touch()
    assert refused(tmp_path).reason == "more than 256 files"


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_root_must_be_a_directory(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "certs.d"
    if kind == "file":
        root.write_text("", encoding="utf-8")
    error = refused(root)
    assert error.path == root
    assert error.reason == ("no such directory" if kind == "missing" else "not a directory")


def test_hosts_toml_that_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "reg.local" / "hosts.toml").mkdir(parents=True)
    assert "not a regular file" in refused(tmp_path).reason
    shutil.rmtree(tmp_path / "reg.local")
    (tmp_path / "reg.local").mkdir()
    os.mkfifo(tmp_path / "reg.local" / "hosts.toml")  # never blocks the reader
    assert "a FIFO, not a regular file" in refused(tmp_path).reason


def test_symlinks_are_followed_dangling_ones_are_absent(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, "reg", '[host."https://mirror.local"]\n')
    root = tmp_path / "certs.d"
    root.mkdir()
    (root / "reg.local").symlink_to(elsewhere / "reg")
    (root / "other.local").symlink_to(tmp_path / "nowhere")
    router = load_hosts_dir(root)
    mirror, _ = router.route(parse_reference("reg.local/a:1"), "reg.local/a:1").endpoints
    assert mirror.host == "mirror.local"
    (endpoint,) = router.route(parse_reference("other.local/a:1"), "other.local/a:1").endpoints
    assert (endpoint.host, endpoint.origin) == ("other.local", "")


def test_a_file_where_a_directory_belongs_blocks_that_registry(tmp_path: Path) -> None:
    """containerd finds the entry, cannot read <entry>/hosts.toml, and fails every pull from
    that registry; other registries are not affected."""
    (tmp_path / "reg.local").write_text("", encoding="utf-8")
    router = load_hosts_dir(tmp_path)
    route = router.route(parse_reference("reg.local/a:1"), "reg.local/a:1")
    assert route.endpoints == ()
    assert route.blocked is not None and str(tmp_path / "reg.local") in route.blocked
    assert router.route(parse_reference("quay.io/a:1"), "quay.io/a:1").blocked is None


def test_everything_is_read_at_load_time(tmp_path: Path) -> None:
    """A long-lived server reads the directory once: routes do not change, and need no file,
    after the directory is gone."""
    write(tmp_path / "certs.d", "reg.local", '[host."https://mirror.local"]\n')
    router = load_hosts_dir(tmp_path / "certs.d")
    ref = parse_reference("reg.local/a:1")
    before = router.route(ref, "reg.local/a:1")
    shutil.rmtree(tmp_path / "certs.d")
    assert router.route(ref, "reg.local/a:1") == before


def test_a_broken_file_for_any_registry_refuses_the_whole_directory(tmp_path: Path) -> None:
    """Read at load time, a bad file is reported before any image is checked, whichever
    registry it configures."""
    write(tmp_path, "reg.local", '[host."https://m"]\n')
    write(tmp_path, "unused.local", "[host\n")
    assert refused(tmp_path).path == tmp_path / "unused.local" / "hosts.toml"
