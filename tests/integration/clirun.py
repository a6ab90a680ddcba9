"""Running ``python -m imagecheck`` as a real subprocess, as users and pods do."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.conftest import RegistryEndpoint


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> list[dict[str, Any]]:
        data = json.loads(self.stdout)
        assert isinstance(data, list)
        return data


def run_cli(
    args: list[str],
    home: Path,
    *,
    stdin: str = "",
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> Run:
    """Run the CLI with a clean HOME and no DOCKER_*/IMAGECHECK_*/REGISTRY_AUTH_FILE/XDG
    variables from the outer environment, so only what the test sets is in play."""
    proc = subprocess.run(
        [sys.executable, "-m", "imagecheck", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_cli_env(home, env),
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def _cli_env(home: Path, env: dict[str, str] | None) -> dict[str, str]:
    dropped = ("DOCKER_", "IMAGECHECK_", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    full_env["HOME"] = str(home)
    full_env.update(env or {})
    return full_env


@dataclass(frozen=True)
class MeasuredRun(Run):
    """A run and the peak resident memory of the CLI process (and the children it waited
    for, such as credential helpers), in MiB."""

    peak_rss_mib: float


# Runs ``python -m imagecheck ARGS`` under an address-space limit set in the child itself
# (preexec_fn is unsafe in a test process with threads, such as the fault proxy's).
_LIMITED = (
    "import resource, runpy, sys; limit = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
    "runpy.run_module('imagecheck', run_name='__main__', alter_sys=True)"
)


def run_cli_measured(
    args: list[str],
    home: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    address_space_limit: int = 2 << 30,
) -> MeasuredRun:
    """:func:`run_cli`, measuring the process's peak RSS (``wait4``'s ``ru_maxrss``: this
    child's own, not the largest of every child the test process ever had).

    ``address_space_limit`` (RLIMIT_AS) only protects the machine from a run that would
    hold gigabytes: such a run fails with MemoryError, as it would fail the RSS assertion."""
    argv = [sys.executable, "-c", _LIMITED, str(address_space_limit), *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=_cli_env(home, env)
        )
        status, usage = _wait4(proc, timeout)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    code = os.waitstatus_to_exitcode(status)
    return MeasuredRun(code, stdout, stderr, usage.ru_maxrss / 1024)


def _wait4(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, resource.struct_rusage]:
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
            return status, usage
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.02)


def tls_args(endpoint: RegistryEndpoint) -> list[str]:
    return ["--ca-file", str(endpoint.ca_file)] if endpoint.ca_file else []
