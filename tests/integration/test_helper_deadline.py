"""Credential helpers run once per registry, inside the deadline, and die with it (issue #10:
a 2 s helper over 15 repositories with ``--deadline 5`` took 30 s, asked once per repository,
one after another, before the deadline even started; a hanging helper outlived the run).

Against the real registry, with real helper processes (shell scripts on ``PATH``) that log
every call.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.clirun import Run, run_cli, tls_args
from tests.support.credentials import install_helper, write_json
from tests.support.endpoint import RegistryEndpoint

DEADLINE = 5.0
REPOSITORIES = 15

SLOW_OK = """\
echo "start $server $(date +%s.%N)" >> "$0.calls"
sleep 2
echo "end $server $(date +%s.%N)" >> "$0.calls"
printf '{"ServerURL":"%s","Username":"%s","Secret":"%s"}' "$server" "$USER_" "$PASS_"
"""
SLOW_NOTFOUND = """\
echo "start $server $(date +%s.%N)" >> "$0.calls"
sleep 2
echo "credentials not found in native keychain"
exit 1
"""
HANGS = """\
sleep 1000 &
echo "$$ $!" >> "$0.pids"
wait
"""


def run_with_helper(
    endpoints: list[RegistryEndpoint],
    tmp_path: Path,
    body: str,
    deadline: float,
    images: list[str],
) -> tuple[Run, float]:
    bin_dir = tmp_path / "bin"
    install_helper(bin_dir, "slow", body)
    write_json(tmp_path / "d" / "config.json", {"credHelpers": {e.host: "slow" for e in endpoints}})
    first = endpoints[0]
    assert first.username is not None and first.password is not None
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "DOCKER_CONFIG": str(tmp_path / "d"),
        "USER_": first.username,
        "PASS_": first.password,
    }
    started = time.monotonic()
    args = ["check", *tls_args(first), "--deadline", str(deadline), "-o", "json", *images]
    run = run_cli(args, tmp_path, env=env, timeout=60)
    return run, time.monotonic() - started


def calls(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "bin" / "docker-credential-slow.calls"
    return [line.split() for line in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("body", "status"), [(SLOW_OK, "missing"), (SLOW_NOTFOUND, "denied")], ids=["ok", "notfound"]
)
def test_a_slow_helper_is_asked_once_per_registry_inside_the_deadline(
    registry_basic: RegistryEndpoint, tmp_path: Path, body: str, status: str
) -> None:
    images = [registry_basic.ref(f"private/repo{i}:1") for i in range(REPOSITORIES)]
    run, elapsed = run_with_helper([registry_basic], tmp_path, body, DEADLINE, images)
    # Every check got the helper's answer (credentials: authenticated, so missing; none:
    # anonymous, so denied), and the run ended within its deadline (plus process start).
    assert [r["status"] for r in run.json()] == [status] * REPOSITORIES, run.stderr
    assert elapsed < DEADLINE + 2
    starts = [c for c in calls(tmp_path) if c[0] == "start"]
    assert [c[1] for c in starts] == [registry_basic.host]  # once, for the registry


def test_helpers_of_different_registries_run_at_the_same_time(
    registry_basic: RegistryEndpoint, registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    images = [registry_basic.ref("private/a:1"), registry_token.ref("private/b:1")]
    run, _ = run_with_helper([registry_basic, registry_token], tmp_path, SLOW_OK, 10, images)
    assert run.code in (1, 3), run.stdout + run.stderr
    times = {(c[0], c[1]): float(c[2]) for c in calls(tmp_path)}
    basic, token = registry_basic.host, registry_token.host
    assert len(times) == 4
    # Each started before the other ended: they overlapped, not one after the other.
    assert times[("start", basic)] < times[("end", token)]
    assert times[("start", token)] < times[("end", basic)]


def test_a_hanging_helper_is_killed_at_the_deadline_with_what_it_started(
    registry_basic: RegistryEndpoint, tmp_path: Path
) -> None:
    deadline = 3.0
    run, elapsed = run_with_helper(
        [registry_basic], tmp_path, HANGS, deadline, [registry_basic.ref("private/x:1")]
    )
    [line] = (tmp_path / "bin" / "docker-credential-slow.pids").read_text().splitlines()
    pids = [int(p) for p in line.split()]  # the helper and its sleep
    try:
        assert run.code == 4, run.stdout + run.stderr
        assert "deadline" in run.stdout
        assert elapsed < deadline + 2
        for pid in pids:
            assert wait_gone(pid), f"process {pid} outlived the run"
    finally:
        for pid in pids:  # a failing run must not leave a sleep 1000 behind either
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def wait_gone(pid: int, within: float = 3.0) -> bool:
    """Whether ``pid`` is gone (or a zombie nobody reaped: it runs no more)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


# A helper that prints more than a helper may (so the run kills it early, long before its
# deadline), then lives on until it is killed.
OVERFLOWS_THEN_WAITS = """\
echo $$ > "$0.pid"
head -c 100000 /dev/zero
exec sleep 1000
"""

# Runs ``python -m imagecheck ARGS`` as a loaded machine may: asyncio's child watcher (a thread
# per child, "asyncio-waitpid-N") reports a helper's exit only once the event loop has closed,
# or LATE seconds after the exit. And the process ends only once the watcher has reported,
# which it does on stderr ("Loop ... that handles pid N is closed") when the loop has closed.
LATE_REPORT = """\
import asyncio, os, runpy, sys, threading
LATE = float(sys.argv.pop(1))
closed = threading.Event()
close, waitpid, exit_ = asyncio.SelectorEventLoop.close, os.waitpid, os._exit

def close_and_tell(self):
    close(self)
    closed.set()

def late_waitpid(pid, options):
    found = waitpid(pid, options)
    if options == 0 and "waitpid-" in threading.current_thread().name:
        closed.wait(LATE)
    return found

def exit_once_reported(code):
    for thread in threading.enumerate():
        if "waitpid-" in thread.name:
            thread.join(LATE + 10)
    exit_(code)

asyncio.SelectorEventLoop.close = close_and_tell
os.waitpid, os._exit = late_waitpid, exit_once_reported
runpy.run_module("imagecheck", run_name="__main__", alter_sys=True)
"""


def test_a_helper_killed_late_is_reaped_before_the_run_ends(tmp_path: Path) -> None:
    """The run's end cancels every task, the one waiting for the killed helper's exit too: the
    helper must still be reaped before the event loop closes, or asyncio's child watcher
    prints "Loop ... that handles pid N is closed" on the user's stderr."""
    deadline, late = 1.0, 3.0  # the exit is reported after the deadline has ended the checks
    bin_dir = tmp_path / "bin"
    install_helper(bin_dir, "late", OVERFLOWS_THEN_WAITS)
    host = "127.0.0.1:9"  # never reached: the check waits for its helper until the deadline
    write_json(tmp_path / "d" / "config.json", {"credHelpers": {host: "late"}})
    dropped = ("DOCKER_", "IMAGECHECK_", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env |= {"HOME": str(tmp_path), "DOCKER_CONFIG": str(tmp_path / "d")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    argv = [sys.executable, "-c", LATE_REPORT, str(late), "check", "--deadline", str(deadline)]
    try:
        done = subprocess.run(
            [*argv, f"{host}/team/app:1"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            os.kill(int((bin_dir / "docker-credential-late.pid").read_text()), signal.SIGKILL)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "deadline" in done.stdout
    for line in done.stderr.splitlines():
        assert line.startswith("imagecheck:"), f"stray stderr line {line!r}"
