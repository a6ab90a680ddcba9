"""The progress counter of ``scan`` and ``check`` (issue #13), run as real processes: with
stderr on a pseudo-terminal it is drawn and then erased; on a pipe, or in CI, never."""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from imagecheck.cli._progress import MIN_FILES, MIN_IMAGES, Counter

ERASE = "\r\x1b[K"
POD = "kind: Pod\nspec:\n  containers: [{{image: {}}}]\n"


def run(args: list[str], *, tty: bool, ci: bool = False) -> tuple[int, str, str]:
    """``python -m imagecheck ARGS``: exit code, stdout, and stderr (a terminal if ``tty``)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGECHECK_", "CI"))}
    environ["TERM"] = "xterm"
    if ci:
        environ["CI"] = "true"
    command = [sys.executable, "-m", "imagecheck", *args]
    if not tty:
        done = subprocess.run(
            command, capture_output=True, text=True, env=environ, timeout=60, check=False
        )
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=environ) as proc:
        os.close(follower)  # the child's copy is the only one: EOF (EIO) when it exits
        stderr = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            stderr += chunk
        stdout = proc.stdout.read() if proc.stdout else b""
        code = proc.wait(timeout=60)
    os.close(leader)
    return code, stdout.decode(), stderr.decode()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file more than a counter is drawn for."""
    root = tmp_path_factory.mktemp("tree")
    for n in range(MIN_FILES + 1):
        (root / f"pod{n:03}.yaml").write_text(POD.format(f"app:{n}"))
    return root


def test_a_large_scan_counts_files_on_a_terminal_and_erases_the_count(tree: Path) -> None:
    code, stdout, stderr = run(["scan", "--list", "-o", "json", str(tree)], tty=True)
    assert code == 0
    total = MIN_FILES + 1
    assert stderr.startswith(f"{ERASE}imagecheck: scanned 1/{total} files")
    assert stderr.endswith(ERASE)  # nothing left on the line the output follows
    assert stdout.startswith("{") and "scanned" not in stdout


@pytest.mark.parametrize(("tty", "ci"), [(False, False), (True, True)], ids=["pipe", "ci"])
def test_no_counter_on_a_pipe_or_in_ci(tree: Path, tty: bool, ci: bool) -> None:
    code, _, stderr = run(["scan", "--list", str(tree)], tty=tty, ci=ci)
    assert (code, stderr) == (0, "")


def test_a_large_check_counts_images_on_a_terminal() -> None:
    with socket.socket() as closed:  # bound, never listening: every connection is refused
        closed.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{closed.getsockname()[1]}"
        images = [f"{host}/app:{n}" for n in range(MIN_IMAGES + 1)]
        args = ["check", "--insecure-registry", host, "--retries", "0", *images]
        code, stdout, stderr = run(args, tty=True)
        assert code == 4  # every one an error
        assert stderr.startswith(f"{ERASE}imagecheck: checked 1/{MIN_IMAGES + 1} images")
        assert stderr.endswith(ERASE)
        assert len(stdout.splitlines()) == MIN_IMAGES + 1
        assert run(args, tty=False)[2] == ""
        # Few images: no counter even on a terminal.
        assert run([*args[:-1]], tty=True)[2] == ""


class Stream:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_counter_redraws_at_most_every_tenth_of_a_second_and_erases_at_the_end() -> None:
    now, stream = [0.0], Stream()
    count = Counter("checked", "images", 2, stream, lambda: now[0])  # type: ignore[arg-type]
    count(1, 2)
    assert stream.text == ""  # not more than the minimum
    for done, at in [(1, 0.0), (2, 0.05), (3, 0.1), (4, 0.3)]:
        now[0] = at
        count(done, 5)
    count(5, 5)
    assert stream.text.split(ERASE) == [
        "", "imagecheck: checked 1/5 images", "imagecheck: checked 3/5 images",
        "imagecheck: checked 4/5 images", "",
    ]  # fmt: skip
    count.close()  # already erased: nothing more
    assert stream.text.endswith("images" + ERASE)
