"""Running ``python -m imagecheck`` as a real subprocess, as users and pods do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.endpoint import RegistryEndpoint
from tests.support.peak import launched, peak_kib

# The cloud identities' variables (AWS_*, GOOGLE_*/GCE_*, AZURE_*, IMDS overrides): a test
# sets the ones it means, and none of the machine's leaks into a run.
CLOUD_ENV = ("AWS_", "GOOGLE_", "GCE_", "CLOUDSDK_", "AZURE_", "IDENTITY_", "MSI_", "IMDS_")


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
        env=cli_env(home, env),
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def cli_env(home: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment :func:`run_cli` gives the CLI: the outer one without credentials or
    registry settings, ``HOME`` at ``home``, then ``env``."""
    dropped = ("DOCKER_", "IMAGECHECK_", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", *CLOUD_ENV)
    kept = "IMAGECHECK_FASTPATH"  # the mode a test runs in (conftest's fastpath_mode)
    full_env = {k: v for k, v in os.environ.items() if k == kept or not k.startswith(dropped)}
    full_env["HOME"] = str(home)
    full_env.update(env or {})
    return full_env


def clean_env(home: Path) -> dict[str, str]:
    """As :func:`cli_env`, with loopback kept off any proxy: for long-running processes
    (``serve``, ``audit serve``) that the tests reach on 127.0.0.1."""
    return cli_env(home, {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})


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
    """:func:`run_cli`, measuring the CLI process's own peak RSS (see ``tests/support/peak.py`` for
    why a launcher measures it, not this process's ``wait4``).

    ``address_space_limit`` (RLIMIT_AS) only protects the machine from a run that would
    hold gigabytes: such a run fails with MemoryError, as it would fail the RSS assertion."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "peak"
        argv = launched(
            [sys.executable, "-m", "imagecheck", *args],
            address_space=address_space_limit,
            report=report,
        )
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env(home, env),
            start_new_session=True,  # the launcher and the CLI: killed together on timeout
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        peak = peak_kib(report)
    assert peak is not None, "the launcher did not report the CLI's peak RSS"
    return MeasuredRun(proc.returncode, stdout.decode(), stderr.decode(), peak / 1024)


def tls_args(endpoint: RegistryEndpoint) -> list[str]:
    return ["--ca-file", str(endpoint.ca_file)] if endpoint.ca_file else []
