"""``imagecheck check --from-file FILE``: images listed one per line in a file or on standard
input (issue #14: 100,000 images are more than a command line holds), through ``CliRunner``
with real files; the FIFO case as a real process, which must end rather than block."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import respx
from click.testing import CliRunner, Result

from imagecheck.cli import cli
from imagecheck.cli._check import MAX_IMAGE_FILE, MAX_IMAGE_LINE

DIGEST = "sha256:" + "ab" * 32
LISTED = "# the release's images\n\nregistry.test/app:1.0\r\n  registry.test/app:2.0  \n#x:1\n"


def run(args: list[str], env: dict[str, str | None], stdin: str | bytes | None = None) -> Result:
    return CliRunner().invoke(cli, ["check", *args], env=env, input=stdin)


def fake_registry(network: respx.MockRouter) -> None:
    network.get("https://registry.test/v2/").respond(200)
    network.head(url__regex=r"/v2/app/manifests/(1\.0|0\.9)$").respond(
        200, headers={"Docker-Content-Digest": DIGEST, "Content-Length": "528"}
    )
    network.head("https://registry.test/v2/app/manifests/2.0").respond(404)


def answers(result: Result) -> list[tuple[str, str]]:
    return [(entry["image"], entry["status"]) for entry in json.loads(result.stdout)]


def test_images_from_a_file_after_the_arguments(
    network: respx.MockRouter, env: dict[str, str | None], tmp_path: Path
) -> None:
    fake_registry(network)
    listed = tmp_path / "images.txt"
    listed.write_text(LISTED, encoding="utf-8")
    result = run(["-o", "json", "registry.test/app:0.9", "--from-file", str(listed)], env)
    assert result.exit_code == 1, result.output
    assert answers(result) == [
        ("registry.test/app:0.9", "found"),
        ("registry.test/app:1.0", "found"),
        ("registry.test/app:2.0", "missing"),
    ]


def test_images_from_standard_input(network: respx.MockRouter, env: dict[str, str | None]) -> None:
    fake_registry(network)
    result = run(["-o", "json", "--from-file", "-"], env, LISTED)
    assert result.exit_code == 1, result.output
    assert answers(result) == [
        ("registry.test/app:1.0", "found"),
        ("registry.test/app:2.0", "missing"),
    ]


def test_an_invalid_listed_image_is_reported_and_nothing_is_sent(
    network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    result = run(["--from-file", "-"], env, "registry.test/app:1.0\nBad Image\n")
    assert result.exit_code == 2, result.output
    [line] = result.stdout.splitlines()
    assert line.startswith("invalid  'Bad Image'")
    assert network.calls.call_count == 0


# (id, file content, words in the one-line error)
BAD_CONTENT: list[tuple[str, bytes, str]] = [
    ("line-too-long", b"registry.test/app:1.0\n" + b"a" * (MAX_IMAGE_LINE + 1) + b"\n",
     f"line 2: longer than {MAX_IMAGE_LINE} bytes"),
    ("not-utf-8", b"registry.test/app:1.0\n\n\xff\xfe:1\n", "line 3: not UTF-8 text"),
    ("only-comments", b"# nothing yet\n\n", "no IMAGE to check"),
]  # fmt: skip


@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
@pytest.mark.parametrize(
    ("content", "words"), [c[1:] for c in BAD_CONTENT], ids=[c[0] for c in BAD_CONTENT]
)
def test_bad_content_is_one_usage_error(
    network: respx.MockRouter,
    env: dict[str, str | None],
    tmp_path: Path,
    content: bytes,
    words: str,
    stdin: bool,
) -> None:
    listed = tmp_path / "images.txt"
    listed.write_bytes(content)
    if stdin:
        result = run(["--from-file", "-"], env, content)
    else:
        result = run(["--from-file", str(listed)], env)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("imagecheck: error: ")
    assert words in line
    assert result.stdout == ""
    assert network.calls.call_count == 0


def unusable(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A path --from-file cannot use, and words of the error naming it."""
    path = tmp_path / kind
    if kind == "missing":
        return path, f"--from-file {path} does not exist"
    if kind == "directory":
        path.mkdir()
        return path, f"cannot use --from-file {path}: a directory, not a regular file"
    with path.open("wb") as sparse:  # no data written: a size, not 64 MiB of disk
        sparse.truncate(MAX_IMAGE_FILE + 1)
    return path, f"cannot use --from-file {path}: larger than 64 MiB"


@pytest.mark.parametrize("kind", ["missing", "directory", "too-large"])
def test_an_unusable_path_is_one_usage_error(
    network: respx.MockRouter, env: dict[str, str | None], tmp_path: Path, kind: str
) -> None:
    path, words = unusable(tmp_path, kind)
    result = run(["registry.test/app:1.0", "--from-file", str(path)], env)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"imagecheck: error: {words}\n"
    assert network.calls.call_count == 0


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "images"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "imagecheck", "check", "--from-file", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,  # a reader blocked on open would wait for a writer forever
        check=False,
    )
    assert done.returncode == 2
    assert (
        done.stderr
        == f"imagecheck: error: cannot use --from-file {fifo}: a FIFO, not a regular file\n"
    )
    assert done.stdout == ""


def test_standard_input_cannot_carry_both_images_and_the_password(
    network: respx.MockRouter, env: dict[str, str | None]
) -> None:
    args = ["--from-file", "-", "--username", "alice", "--password-stdin"]
    result = run(args, env, "registry.test/app:1.0\n")
    assert result.exit_code == 2
    assert "--from-file - and --password-stdin both read standard input" in result.stderr
    assert network.calls.call_count == 0


def test_help_names_the_option(env: dict[str, str | None]) -> None:
    text = run(["--help"], env).stdout
    assert "--from-file FILE" in text
    assert "one per line" in text


@pytest.mark.parametrize("output", ["json", "text"])
def test_many_images_are_written_whole_in_batches(
    network: respx.MockRouter, env: dict[str, str | None], tmp_path: Path, output: str
) -> None:
    network.get("https://registry.test/v2/").respond(200)
    network.head(url__regex=r"/v2/app/manifests/").respond(
        200, headers={"Docker-Content-Digest": DIGEST, "Content-Length": "528"}
    )
    images = [f"registry.test/app:{n}" for n in range(300)]  # more than a batch of output
    listed = tmp_path / "images.txt"
    listed.write_text("\n".join(images), encoding="utf-8")
    result = run(["-o", output, "--from-file", str(listed)], env)
    assert result.exit_code == 0, result.output
    if output == "json":
        document = json.loads(result.stdout)
        assert [entry["image"] for entry in document] == images
        assert result.stdout == json.dumps(document, indent=2) + "\n"  # the bytes json.dumps makes
    else:
        lines = result.stdout.split("\n")
        assert lines[-1] == ""  # one newline at the end, none doubled between batches
        assert [line.split()[1] for line in lines[:-1]] == images
