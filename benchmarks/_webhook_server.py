"""The webhook benchmark's server side: ``imagecheck serve`` over TLS, and what it and the
registry count (``webhook_load.py``, issue #14).

:class:`Server`, ``python -m imagecheck serve`` as a subprocess on a free port (under cProfile
when asked; its certificate from ``tests.support.pki``), ``--cache-ttl 5m --missing-ttl 5m``
so that nothing expires during a run; :func:`server_samples`, its
``/metrics`` (manifest requests made, time in the review handler); :class:`ManifestWindow`,
the manifest requests the registry logs in a window. The benchmark's error and exit codes are
here too (``webhook_soak.py`` shares them).
"""

from __future__ import annotations

import os
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.net import free_port
from tests.support.pki import TLSMaterial
from tests.support.registry import LocalRegistry

START_TIMEOUT = 15.0
MANIFEST_LINE = re.compile(r'"(?:HEAD|GET) /v2/\S+/manifests/\S+ HTTP/')

EXIT_WRONG = 1
EXIT_UNAVAILABLE = 2


class BenchmarkError(Exception):
    def __init__(self, reason: str, exit_code: int) -> None:
        super().__init__(reason)
        self.exit_code = exit_code


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ``python -m imagecheck`` ends with ``os._exit`` (no teardown): cProfile would never write.
PROFILED = """\
import cProfile, sys
from imagecheck.cli import cli
profile = cProfile.Profile()
try:
    profile.runcall(cli, sys.argv[1:], prog_name="imagecheck", standalone_mode=False)
finally:
    profile.dump_stats({out!r})
"""


class Server:
    """``python -m imagecheck serve`` on a free port, over TLS."""

    def __init__(
        self,
        workdir: Path,
        tls: TLSMaterial,
        name: str,
        profile: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "IMAGECHECK_"))}
        env["HOME"] = str(workdir)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        env.update(extra_env or {})  # e.g. IMAGECHECK_FASTPATH=0, after the scrub above
        argv = [
            sys.executable, *(["-c", PROFILED.format(out=str(profile))] if profile else
                              ["-m", "imagecheck"]),
            "serve",
            "--listen", f"127.0.0.1:{self.port}",
            "--tls-cert", str(tls.server.cert), "--tls-key", str(tls.server.key),
            "--cache-ttl", "5m", "--missing-ttl", "5m",
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
            )

    def wait_ready(self, verify: ssl.SSLContext) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(verify=verify, timeout=1.0, trust_env=False) as probe:
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if probe.get(f"{self.url}/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        tail = self.log.read_text(encoding="utf-8", errors="replace")[-500:]
        self.stop()
        raise BenchmarkError(f"imagecheck serve did not start: {tail}", EXIT_UNAVAILABLE)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


# -- counting manifest requests --------------------------------------------------------------


class ManifestWindow:
    """Manifest requests the registry logs between ``open()`` and ``close()``."""

    def __init__(self, registry: LocalRegistry) -> None:
        self.registry = registry
        self.offset = 0

    def open(self) -> None:
        self.registry.request_count()  # returns once the access log is still
        self.offset = self.registry.access_log_path.stat().st_size

    def close(self) -> int:
        self.registry.request_count()
        with self.registry.access_log_path.open("rb") as log:
            log.seek(self.offset)
            added = log.read().decode("utf-8", errors="replace")
        return sum(1 for line in added.splitlines() if MANIFEST_LINE.search(line))


def server_samples(url: str, verify: ssl.SSLContext) -> dict[str, float]:
    """The server's ``/metrics``: the manifest requests it made
    (``imagecheck_registry_requests_total{kind="manifest"}``) and the sum and count of its
    review durations (time in the handler, from the body read to the answer)."""
    with httpx.Client(verify=verify, timeout=10.0, trust_env=False) as client:
        text = client.get(f"{url}/metrics").text
    figures = {"manifests": 0.0, "review_seconds": 0.0, "reviews": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "imagecheck_registry_requests_total":
                figures["manifests"] += sample.value if sample.labels["kind"] == "manifest" else 0
            elif sample.name == "imagecheck_review_duration_seconds_sum":
                figures["review_seconds"] = sample.value
            elif sample.name == "imagecheck_review_duration_seconds_count":
                figures["reviews"] = sample.value
    return figures
