"""A private containerd daemon for the tests: Debian's ``containerd`` with its own config,
root, state and socket under a temporary directory, the CRI plugin off, driven by ``ctr``.

The differential suite pulls through it (tests/integration/differential/oracle.py); the image
tests run containers with it (tests/support/runc.py). The content store is ``isolated``
(``content_sharing_policy``): a namespace sees only the blobs that were pulled or imported into
it, so one test's content never answers another's, and what a namespace holds is what it was
given.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

START_TIMEOUT = 30.0
CTR_TIMEOUT = 120.0

_CONFIG = """\
version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.metadata.v1.bolt"]
  content_sharing_policy = "isolated"
"""


class CtrError(RuntimeError):
    """A ``ctr`` command failed; the message names it and carries its error output."""


class ContainerdDaemon:
    """A private containerd daemon; a context manager. :meth:`run_ctr` runs ``ctr`` against it."""

    def __init__(self, workdir: Path, *, containerd: str = "containerd", ctr: str = "ctr") -> None:
        # A unix socket path is limited to 108 bytes; pytest's tmp paths can be longer.
        self.workdir = workdir
        self._sockdir = Path(tempfile.mkdtemp(prefix="ctrd-", dir="/tmp"))
        self.socket = self._sockdir / "containerd.sock"
        self.containerd = containerd
        self.ctr = ctr
        self._process: subprocess.Popen[bytes] | None = None
        self._log = workdir / "containerd.log"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def root(self) -> Path:
        return self.workdir / "root"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.toml"
        config.write_text(
            _CONFIG.format(root=self.root, state=self._sockdir / "state", socket=self.socket),
            encoding="utf-8",
        )
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                [self.containerd, "--config", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"containerd exited at start: {self.log_tail()}")
            if self.run_ctr("version", timeout=10).returncode == 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"containerd did not start in {START_TIMEOUT:.0f} s: {self.log_tail()}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        shutil.rmtree(self._sockdir, ignore_errors=True)

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def run_ctr(
        self, *args: str, namespace: str | None = None, timeout: float = CTR_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        """``ctr ARGS`` against this daemon (in ``namespace``), to its end; never raises on
        its exit code."""
        scope = ["--namespace", namespace] if namespace is not None else []
        return subprocess.run(
            [self.ctr, "--address", str(self.socket), *scope, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ctr_ok(self, *args: str, namespace: str | None = None) -> str:
        """``ctr ARGS``; its standard output, or :class:`CtrError` when it fails."""
        done = self.run_ctr(*args, namespace=namespace)
        if done.returncode != 0:
            raise CtrError(f"ctr {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout
