"""Run a real CNCF Distribution registry (``docker-registry``) on 127.0.0.1 for tests and demos.

One :class:`LocalRegistry` is one ``docker-registry`` process with its own config, port and
log files under ``workdir``. Several instances may share one storage root directory: seed
it once through a no-auth instance, then serve the same content with Basic or token auth.

Two files are written in ``workdir``:

* ``registry.log`` (:attr:`LocalRegistry.log_path`): the registry's own log (stderr), level
  info, text formatter. It names errors such as a bad config or a port already in use.
* ``access.log`` (:attr:`LocalRegistry.access_log_path`): stdout, where Distribution writes
  one Apache "combined" line per HTTP request (gorilla ``CombinedLoggingHandler``), whatever
  the status. :meth:`LocalRegistry.request_count` counts those lines. The app log's
  ``msg="response completed"`` is *not* one line per request: Distribution 2.8 writes it
  only for 2xx/3xx answers, so 401s and 404s would go uncounted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import httpx

from tests.support.net import free_port

__all__ = [
    "LocalRegistry",
    "TLSFiles",
    "TokenAuthSettings",
    "find_registry_binary",
]

BINARY_ENV = "IMAGECHECK_REGISTRY_BINARY"
"""Environment variable that names the registry binary, overriding the ``PATH`` look-up."""

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0
_PORT_ATTEMPTS = 5
_ADDRESS_IN_USE = "address already in use"

# An Apache combined log line: `127.0.0.1 - - [02/Dec/2025:08:50:00 +0000] "GET /v2/ HTTP/1.1" ...`
_ACCESS_LINE = re.compile(r'^\S+ \S+ \S+ \[[^\]]+\] "[A-Z]+ \S+ HTTP/[0-9.]+" \d{3} ')


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for ``http.tls``: the server certificate (chain) and its private key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class TokenAuthSettings:
    """The ``auth.token`` section: where clients get tokens and how the registry checks them."""

    realm: str
    service: str
    issuer: str
    rootcertbundle: Path


def find_registry_binary() -> str | None:
    """Return the path of the Distribution binary, or ``None`` if it is not installed."""
    override = os.environ.get(BINARY_ENV)
    if override:
        return shutil.which(override)
    return shutil.which("docker-registry")


class LocalRegistry:
    """A ``docker-registry`` process on a free 127.0.0.1 port; use it as a context manager."""

    def __init__(
        self,
        workdir: Path,
        *,
        storage: Path | None = None,
        tls: TLSFiles | None = None,
        htpasswd: Path | None = None,
        token: TokenAuthSettings | None = None,
        binary: str = "docker-registry",
    ) -> None:
        if htpasswd is not None and token is not None:
            raise ValueError("Distribution takes one auth provider: htpasswd or token, not both")
        self.workdir = workdir
        self.storage = storage if storage is not None else workdir / "storage"
        self.tls = tls
        self.htpasswd = htpasswd
        self.token = token
        self.binary = binary
        self.log_path = workdir / "registry.log"
        self.access_log_path = workdir / "access.log"
        self.config_path = workdir / "config.yml"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log_files: list[IO[bytes]] = []

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: the registry part of an image reference."""
        self._require_started()
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The base URL, ``http://`` or ``https://`` by whether TLS is on."""
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self.host}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

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

    def start(self) -> None:
        """Start the registry and wait until ``GET /v2/`` answers 200 or 401.

        The port comes from binding port 0 and closing it, so another process may take it
        before the registry binds; then the registry exits with "address already in use"
        and we try again on a new port.
        """
        if self._process is not None:
            raise RuntimeError("registry already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage.mkdir(parents=True, exist_ok=True)
        for _ in range(_PORT_ATTEMPTS):
            self.port = free_port()
            self._write_config()
            try:
                self._spawn()
            except OSError as exc:
                self.stop()
                raise RuntimeError(f"cannot run {self.binary!r}: {exc}") from exc
            if self._wait_until_ready():
                return
            log = self._log_tail()
            self.stop()
            if _ADDRESS_IN_USE not in log:
                raise RuntimeError(f"docker-registry did not start; end of {self.log_path}:\n{log}")
        raise RuntimeError(f"no free port for docker-registry after {_PORT_ATTEMPTS} attempts")

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and close the log files; safe to repeat."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=_STOP_TIMEOUT)
        for handle in self._log_files:
            handle.close()
        self._log_files = []

    def request_count(self) -> int:
        """Count the HTTP requests the registry has answered, from its access log.

        A line is written after the handler returns, so a count read the instant a client
        gets its last response may be one short; read again until two reads agree.
        """
        previous = -1
        count = self._count_access_lines()
        while count != previous:
            time.sleep(0.02)
            previous, count = count, self._count_access_lines()
        return count

    def _count_access_lines(self) -> int:
        try:
            text = self.access_log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return 0
        return sum(1 for line in text.splitlines() if _ACCESS_LINE.match(line))

    def _require_started(self) -> None:
        if self.port == 0:
            raise RuntimeError("registry not started: call start() first")

    def _write_config(self) -> None:
        self.config_path.write_text(
            render_config(
                port=self.port,
                storage=self.storage,
                tls=self.tls,
                htpasswd=self.htpasswd,
                token=self.token,
            ),
            encoding="utf-8",
        )

    def _spawn(self) -> None:
        # Append, so that a retry after "address already in use" keeps the earlier attempt's log.
        stderr = self.log_path.open("ab")
        stdout = self.access_log_path.open("ab")
        self._log_files = [stderr, stdout]
        self._process = subprocess.Popen(
            [self.binary, "serve", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=self.workdir,
        )

    def _wait_until_ready(self) -> bool:
        deadline = time.monotonic() + _START_TIMEOUT
        # This probe only asks whether the process listens; trust is the caller's business.
        with httpx.Client(verify=False, timeout=1.0, trust_env=False) as probe:
            while time.monotonic() < deadline:
                if not self.running:
                    return False
                with contextlib.suppress(httpx.TransportError):
                    if probe.get(f"{self.url}/v2/").status_code in (200, 401):
                        return True
                time.sleep(0.05)
        return False

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self.port}" if self.port else "not started"
        return f"<LocalRegistry {where} workdir={str(self.workdir)!r}>"


def render_config(
    *,
    port: int,
    storage: Path,
    tls: TLSFiles | None = None,
    htpasswd: Path | None = None,
    token: TokenAuthSettings | None = None,
    secret: str | None = None,
) -> str:
    """Render a Distribution 2.x config as YAML (strings JSON-quoted, which YAML accepts)."""
    q = json.dumps
    lines = [
        "version: 0.1",
        "log:",
        "  level: info",
        "  formatter: text",
        "  accesslog:",
        "    disabled: false",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {q(str(storage))}",
        "  delete:",
        "    enabled: true",
        # Instances share one root: none of them may purge uploads another has in flight.
        "  maintenance:",
        "    uploadpurging:",
        "      enabled: false",
        "http:",
        f"  addr: {q(f'127.0.0.1:{port}')}",
        f"  secret: {q(secret or secrets.token_hex(16))}",
    ]
    if tls is not None:
        lines += [
            "  tls:",
            f"    certificate: {q(str(tls.cert))}",
            f"    key: {q(str(tls.key))}",
        ]
    lines += ["health:", "  storagedriver:", "    enabled: false"]
    if htpasswd is not None:
        lines += [
            "auth:",
            "  htpasswd:",
            f"    realm: {q('imagecheck-test')}",
            f"    path: {q(str(htpasswd))}",
        ]
    if token is not None:
        lines += [
            "auth:",
            "  token:",
            f"    realm: {q(token.realm)}",
            f"    service: {q(token.service)}",
            f"    issuer: {q(token.issuer)}",
            f"    rootcertbundle: {q(str(token.rootcertbundle))}",
        ]
    return "\n".join(lines) + "\n"


def bcrypt_line(username: str, password: str) -> str:
    """An htpasswd line for ``username``: Distribution reads only bcrypt entries."""
    result = subprocess.run(
        ["htpasswd", "-Bbn", username, password],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return result.stdout.strip() + "\n"
