"""The options that shape a run, against the real registry: --mirror, --wait, --on-error,
--denied-as-missing, --termination-log, and how Ctrl-C and SIGTERM end it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.clirun import run_cli, tls_args
from tests.support.endpoint import RegistryEndpoint
from tests.support.images import push_image
from tests.support.registry import LocalRegistry

UNREACHABLE = "127.0.0.1:9"  # discard port: nothing listens there


@pytest.fixture
def empty_registry(registry_binary: str, tmp_path: Path) -> Iterator[LocalRegistry]:
    """A second real registry with nothing in it, to act as a mirror."""
    with LocalRegistry(tmp_path / "mirror", binary=registry_binary) as registry:
        yield registry


@dataclass(frozen=True)
class Silent:
    host: str
    connected: threading.Event  # set once a client has connected (and hangs there)


@pytest.fixture
def silent() -> Iterator[Silent]:
    """Accepts connections and never answers: a registry that hangs."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()
    connected = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)
            connected.set()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield Silent(f"127.0.0.1:{server.getsockname()[1]}", connected)
    stop.set()
    thread.join(timeout=2)
    for conn in accepted:
        conn.close()
    server.close()


@pytest.fixture
def silent_server(silent: Silent) -> str:
    return silent.host


# -- --mirror ----------------------------------------------------------------------------


def test_mirror_found_answers_without_asking_the_source(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    image = f"{UNREACHABLE}/sample/app:1.0.0"
    run = run_cli(
        ["check", "-o", "json", "--mirror", f"{UNREACHABLE}={registry_plain.host}", image],
        tmp_path,
    )
    assert run.code == 0, run.stdout + run.stderr
    [result] = run.json()
    assert result["registry"] == registry_plain.host
    assert result["reference"] == image
    assert result["digest"] == registry_plain.images["sample/app:1.0.0"].digest


def test_mirror_missing_falls_through_to_the_source(
    registry_plain: RegistryEndpoint, empty_registry: LocalRegistry, tmp_path: Path
) -> None:
    image = registry_plain.ref("sample/app:1.0.0")
    mirror = f"{registry_plain.host}={empty_registry.host}"
    before = empty_registry.request_count()
    run = run_cli(["check", "-o", "json", "--mirror", mirror, image], tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    [result] = run.json()
    assert result["registry"] == registry_plain.host
    assert empty_registry.request_count() > before  # the mirror was asked first


def test_failing_mirror_is_not_the_final_word(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    image = registry_plain.ref("sample/app:9.9.9")
    args = [
        "check",
        "-o",
        "json",
        "--retries",
        "0",
        "--mirror",
        f"{registry_plain.host}={UNREACHABLE}",
    ]
    run = run_cli([*args, image], tmp_path)
    assert run.code == 1  # the source's answer (missing), not the mirror's error
    [result] = run.json()
    assert result["status"] == "missing"
    assert f"{UNREACHABLE}: error" in result["message"]


# -- --on-error / --denied-as-missing -----------------------------------------------------


def test_on_error_pass_lets_an_unreachable_registry_pass(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    down = f"{UNREACHABLE}/team/app:1.0"
    args = ["check", "--retries", "0", "--on-error", "pass"]
    run = run_cli([*args, down, registry_plain.ref("sample/app:1.0.0")], tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.startswith("error")
    assert f"warning: could not check {down}" in run.stderr
    # Missing images still fail.
    run = run_cli([*args, down, registry_plain.ref("sample/app:9.9.9")], tmp_path)
    assert run.code == 1


def test_on_error_fail_is_the_default(tmp_path: Path) -> None:
    run = run_cli(["check", "--retries", "0", f"{UNREACHABLE}/team/app:1.0"], tmp_path)
    assert run.code == 4
    assert "cannot talk to" in run.stdout


def test_denied_as_missing(registry_token: RegistryEndpoint, tmp_path: Path) -> None:
    base = ["check", *tls_args(registry_token), registry_token.ref("private/secret:1.0")]
    assert run_cli(base, tmp_path).code == 3
    run = run_cli([*base, "--denied-as-missing"], tmp_path)
    assert run.code == 1
    assert "counted as missing" in run.stdout
    # Credentials the token service refuses are still a denial, not a missing image.
    wrong = [*base, "--denied-as-missing", "-u", "alice", "--password-stdin"]
    assert run_cli(wrong, tmp_path, stdin="wrong\n").code == 3


# -- --wait ---------------------------------------------------------------------------------


def test_wait_sees_an_image_pushed_while_waiting(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    tag = f"pushed-later-{os.getpid()}-{time.monotonic_ns()}"

    def push_soon() -> None:
        time.sleep(1.5)
        with httpx.Client(trust_env=False) as client:
            push_image(client, registry_plain.url, "sample/late", tag)

    pusher = threading.Thread(target=push_soon)
    pusher.start()
    started = time.monotonic()
    run = run_cli(["check", "--wait", "30s", registry_plain.ref(f"sample/late:{tag}")], tmp_path)
    pusher.join()
    assert run.code == 0, run.stdout + run.stderr
    assert "waiting for 1 image(s)" in run.stderr
    assert time.monotonic() - started < 20


def test_wait_gives_up_on_an_image_never_pushed(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    started = time.monotonic()
    run = run_cli(["check", "--wait", "3s", registry_plain.ref("sample/app:never")], tmp_path)
    elapsed = time.monotonic() - started
    assert run.code == 1
    assert run.stderr.count("waiting for 1 image(s)") >= 1
    assert 2.0 <= elapsed < 10


# -- termination message --------------------------------------------------------------------


def test_termination_log_gets_one_line_on_failure(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    missing = registry_plain.ref("sample/app:9.9.9")
    args = ["check", "--termination-log", str(log), registry_plain.ref("sample/app:1.0.0"), missing]
    assert run_cli([*args], tmp_path).code == 1
    text = log.read_text()
    assert text.count("\n") == 1
    assert text.startswith(f"imagecheck: missing {missing} (tag '9.9.9' not found")
    assert "sample/app:1.0.0" not in text
    assert len(text.encode()) <= 4096


def test_termination_log_is_capped_at_4_kib(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    images = [registry_plain.ref(f"sample/app:missing-{i:03d}-{'x' * 60}") for i in range(100)]
    assert run_cli(["check", "--termination-log", str(log), *images], tmp_path).code == 1
    text = log.read_text()
    assert len(text.encode()) <= 4096
    assert text.rstrip("\n").endswith(" more")


def test_no_termination_log_when_found_or_when_the_file_is_absent(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    found = registry_plain.ref("sample/app:1.0.0")
    assert run_cli(["check", "--termination-log", str(log), found], tmp_path).code == 0
    assert log.read_text() == ""
    absent = tmp_path / "nope"
    missing = registry_plain.ref("sample/app:9.9.9")
    assert run_cli(["check", "--termination-log", str(absent), missing], tmp_path).code == 1
    assert not absent.exists()


# -- ending promptly --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_signals_end_a_hanging_check_promptly(
    silent: Silent, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "IMAGECHECK_"))}
    env["HOME"] = str(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "imagecheck", "check", "--timeout", "60", "--deadline", "120",
         f"{silent.host}/team/app:1.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip
    # Signalled once the check hangs on the registry, not after a fixed sleep: on a loaded
    # machine start-up alone can take longer than any sleep chosen here.
    assert silent.connected.wait(30), "the check never reached the registry"
    sent = time.monotonic()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == code
    assert time.monotonic() - sent < 2
    assert "Traceback" not in stderr


def test_hanging_registry_ends_by_the_deadline(silent_server: str, tmp_path: Path) -> None:
    started = time.monotonic()
    run = run_cli(
        ["check", "--timeout", "1", "--deadline", "3", f"{silent_server}/team/app:1.0"], tmp_path
    )
    elapsed = time.monotonic() - started
    assert run.code == 4
    assert elapsed < 3 + 1.5  # the deadline, plus interpreter start-up
    assert "Traceback" not in run.stderr
