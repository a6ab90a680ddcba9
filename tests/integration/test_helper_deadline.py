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
