"""Files users and pods name, given as a FIFO, /dev/zero or something huge: the CLI, as a real
process, ends at once with exit 2 and one line (issue #10: a FIFO as a pull secret hung the
run, /dev/zero as --docker-config read until memory ran out).

Every run has a subprocess timeout far below the test timeout: a regression is a failing
test (``TimeoutExpired``), not a hung suite. Nothing here reaches a registry: every failure
comes before the first request, and the references point at a closed port.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.clirun import Run, run_cli

IMAGE = "127.0.0.1:9/app:1"
TIMEOUT = 20


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def secret_dir_with_fifo(tmp: Path, fifo: Path) -> Path:
    secret = tmp / "regcred"
    secret.mkdir()
    os.mkfifo(secret / ".dockerconfigjson")
    return secret


def docker_config_dir_with_fifo(tmp: Path, fifo: Path) -> Path:
    config = tmp / "docker"
    config.mkdir()
    os.mkfifo(config / "config.json")
    return config


def kubernetes_dir(tmp: Path, fifo_name: str) -> Path:
    sa = tmp / "serviceaccount"
    sa.mkdir()
    for name in ("token", "namespace", "ca.crt"):
        if name == fifo_name:
            os.mkfifo(sa / name)
        else:
            (sa / name).write_text("x" if name != "ca.crt" else "")
    return sa


def from_pod_env(sa: Path) -> dict[str, str]:
    return {
        "IMAGECHECK_SERVICEACCOUNT_DIR": str(sa),
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "9",
        "POD_NAME": "me",
        "POD_NAMESPACE": "default",
    }


# (id, how to set it up: (tmp, fifo) -> (arguments, environment), words in the error)
Setup = Callable[[Path, Path], tuple[list[str], dict[str, str]]]
CASES: list[tuple[str, Setup, str]] = [
    ("docker-config-fifo", lambda t, f: (["--docker-config", str(f)], {}),
     "cannot use docker config {fifo}: a FIFO, not a regular file"),
    ("docker-config-dev-zero", lambda t, f: (["--docker-config", "/dev/zero"], {}),
     "cannot use docker config /dev/zero: a device, not a regular file"),
    ("DOCKER_CONFIG-dir-holding-a-fifo",
     lambda t, f: ([], {"DOCKER_CONFIG": str(docker_config_dir_with_fifo(t, f))}),
     "config.json: a FIFO, not a regular file"),
    ("REGISTRY_AUTH_FILE-fifo", lambda t, f: ([], {"REGISTRY_AUTH_FILE": str(f)}),
     "cannot use auth.json {fifo}: a FIFO"),
    ("pull-secret-fifo", lambda t, f: (["--pull-secret", str(f)], {}),
     "cannot use pull secret {fifo}: a FIFO, not a regular file"),
    ("pull-secret-dev-zero", lambda t, f: (["--pull-secret", "/dev/zero"], {}),
     "cannot use pull secret /dev/zero: a device"),
    ("pull-secret-dir-holding-a-fifo",
     lambda t, f: (["--pull-secret", str(secret_dir_with_fifo(t, f))], {}),
     ".dockerconfigjson: a FIFO, not a regular file"),
    ("IMAGECHECK_PULL_SECRETS-fifo", lambda t, f: ([], {"IMAGECHECK_PULL_SECRETS": str(f)}),
     "cannot use pull secret {fifo}: a FIFO"),
    ("ca-file-fifo", lambda t, f: (["--ca-file", str(f)], {}),
     "cannot use CA file {fifo}: a FIFO, not a regular file"),
    ("ca-file-dev-zero", lambda t, f: (["--ca-file", "/dev/zero"], {}),
     "cannot use CA file /dev/zero: a device"),
    ("service-account-token-fifo",
     lambda t, f: (["--from-pod"], from_pod_env(kubernetes_dir(t, "token"))),
     "token: a FIFO, not a regular file"),
    ("service-account-ca-fifo",
     lambda t, f: (["--from-pod"], from_pod_env(kubernetes_dir(t, "ca.crt"))),
     "ca.crt: a FIFO, not a regular file"),
]  # fmt: skip


@pytest.mark.parametrize(("setup", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_special_files_exit_2_at_once(tmp_path: Path, fifo: Path, setup: Setup, words: str) -> None:
    args, env = setup(tmp_path, fifo)
    run = run_cli(["check", *args, IMAGE], tmp_path, env=env, timeout=TIMEOUT)
    assert_one_line_usage_error(run, words.format(fifo=fifo))


@pytest.mark.parametrize("option", ["--docker-config", "--pull-secret"])
def test_oversized_credentials_exit_2(tmp_path: Path, option: str) -> None:
    # Valid JSON, just too much of it: 1 MiB and a bit.
    path = tmp_path / "big.json"
    path.write_text('{"auths": {}, "padding": "' + "x" * (1024 * 1024) + '"}')
    run = run_cli(["check", option, str(path), IMAGE], tmp_path, timeout=TIMEOUT)
    assert_one_line_usage_error(run, f"{path}: larger than 1 MiB")


def test_password_stdin_from_dev_zero_exits_2(tmp_path: Path) -> None:
    """A password read from an endless stream stops at 64 KiB."""
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run(
            [sys.executable, "-m", "imagecheck", "check", "-u", "alice", "--password-stdin", IMAGE],
            stdin=zero,
            capture_output=True,
            text=True,
            env={**clean_env(), "HOME": str(tmp_path)},
            timeout=TIMEOUT,
            check=False,
        )
    assert_one_line_usage_error(
        Run(proc.returncode, proc.stdout, proc.stderr), "the password is longer than 64 KiB"
    )


def test_termination_log_fifo_is_refused_with_a_warning(tmp_path: Path, fifo: Path) -> None:
    """A FIFO as --termination-log would block the exit until someone reads it; the run
    warns and ends with its own exit code (2 here: an invalid reference)."""
    run = run_cli(
        ["check", "--termination-log", str(fifo), "Not-A-Reference"], tmp_path, timeout=TIMEOUT
    )
    assert run.code == 2
    assert f"imagecheck: warning: cannot use --termination-log {fifo}: a FIFO" in run.stderr
    assert "Traceback" not in run.stderr


def test_termination_log_regular_file_is_written(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    run = run_cli(
        ["check", "--termination-log", str(log), "Not-A-Reference"], tmp_path, timeout=TIMEOUT
    )
    assert run.code == 2
    assert "Not-A-Reference" in log.read_text()


def assert_one_line_usage_error(run: Run, words: str) -> None:
    assert run.code == 2, run.stdout + run.stderr
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith("imagecheck: error: ")
    assert words in line


def clean_env() -> dict[str, str]:
    dropped = ("DOCKER_", "IMAGECHECK_", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR")
    return {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
