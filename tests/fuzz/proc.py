"""Running imagecheck as a real process under the bounds the properties judge: an address-space
limit, a wall-clock limit, the network guard, and its peak memory measured.

* **Memory**: ``RLIMIT_AS`` (:data:`ADDRESS_SPACE_LIMIT`) is set by a tiny ``python -S``
  launcher (``preexec_fn`` is not safe with the stand-in's threads running in this process).
  It is the safety net that keeps a gzip bomb from taking the machine down; the property
  itself is on the command's own peak resident set (:data:`RSS_LIMIT_MIB`), which the
  launcher measures (``tests/support/peak.py``: this process's ``wait4`` would report at least this
  test process's own peak). A normal ``check`` peaks near 35 MiB.
* **Time**: the process is killed (its whole session: credential helpers too) at
  ``kill_after`` seconds; the property compares the elapsed time with its own bound.
* **Network**: ``tests/fuzz/site`` on ``PYTHONPATH`` installs :mod:`tests.fuzz.netguard`.
* **Environment**: no credentials, proxies or Docker settings from outside; ``HOME`` is the
  example's own directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.fuzz import netguard
from tests.support.peak import launched, peak_kib

FUZZ_DIR = Path(__file__).resolve().parent
SITE_DIR = FUZZ_DIR / "site"
# The console script next to this interpreter: .venv/bin/imagecheck, as installed.
IMAGECHECK = str(Path(sys.executable).with_name("imagecheck"))
ADDRESS_SPACE_LIMIT = 1024 * 1024 * 1024
RSS_LIMIT_MIB = 150
# What is kept of each output stream for the assertions (the rest is counted): scan's JSON for
# 20,000 occurrences of one image (a generated manifest) is some 14 MB, and must parse whole.
_KEEP = 32 * 1024 * 1024

_LIMIT_AND_EXEC = (
    "import os,resource,sys;"
    "n=int(sys.argv[1]);resource.setrlimit(resource.RLIMIT_AS,(n,n));"
    "os.execv(sys.argv[2],sys.argv[2:])"
)
_DROPPED_PREFIXES = ("DOCKER_", "IMAGECHECK_", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "PYTHON")
_PROXY_NAMES = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy"})


@dataclass(frozen=True)
class Finished:
    """How a process ended. ``code`` is None when it had to be killed."""

    code: int | None
    stdout: bytes
    stderr: bytes
    stdout_size: int
    stderr_size: int
    elapsed: float
    max_rss_mib: float
    ended: float  # time.monotonic() when it was reaped

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return (
            f"Finished(code={self.code}, elapsed={self.elapsed:.2f}s, "
            f"max_rss={self.max_rss_mib:.0f}MiB,\n  stdout={self.out[:2000]!r},\n"
            f"  stderr={self.err[-3000:]!r})"
        )


def child_env(home: Path, netlog: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_DROPPED_PREFIXES) and k.lower() not in _PROXY_NAMES
    }
    env["HOME"] = str(home)
    env["PYTHONPATH"] = str(SITE_DIR)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env[netguard.ENV] = str(netlog)
    env.update(extra or {})
    return env


def under_limit(argv: Sequence[str]) -> list[str]:
    """``argv``, to be started under :data:`ADDRESS_SPACE_LIMIT`."""
    return [sys.executable, "-S", "-c", _LIMIT_AND_EXEC, str(ADDRESS_SPACE_LIMIT), *argv]


def run_bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    kill_after: float,
    stdin: bytes = b"",
    cwd: Path | None = None,
) -> Finished:
    """Run ``argv`` under the address-space limit; kill it at ``kill_after`` seconds."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        report = Path(scratch) / "peak"
        wrapper = launched(argv, address_space=ADDRESS_SPACE_LIMIT, report=report)
        started = time.monotonic()
        proc = subprocess.Popen(
            wrapper,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        status, killed = _wait(proc, started + kill_after)
        rss_kib = peak_kib(report) or 0  # none when killed: the time property fails then
        ended = time.monotonic()
        elapsed = ended - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        _kill_session(proc.pid)  # helpers it left behind
        stdout, stdout_size = _read(out)
        stderr, stderr_size = _read(err)
    return Finished(
        None if killed else proc.returncode,
        stdout,
        stderr,
        stdout_size,
        stderr_size,
        elapsed,
        rss_kib / 1024,
        ended,
    )


def _wait(proc: subprocess.Popen[bytes], kill_at: float) -> tuple[int, bool]:
    """Reap ``proc``; kill its session at ``kill_at``."""
    killed = False
    delay = 0.002
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            return status, killed
        if not killed and time.monotonic() >= kill_at:
            killed = True
            _kill_session(proc.pid)
        time.sleep(delay)
        delay = min(0.02, delay * 2)


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read(stream: IO[bytes]) -> tuple[bytes, int]:
    stream.seek(0, os.SEEK_END)
    size = int(stream.tell())
    stream.seek(0)
    data: bytes = stream.read(_KEEP)
    return data, size
