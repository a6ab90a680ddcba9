"""``imagecheck serve`` as a real process on a free 127.0.0.1 port over TLS
(:func:`start_webhook`, :func:`running`), a client for it (:class:`Webhook`), and its
``/metrics`` page read into numbers (:func:`parse_metrics`, :func:`metric`)."""

from __future__ import annotations

import contextlib
import json
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.admission import ADMISSION_V1, admission_review
from tests.support.clirun import clean_env
from tests.support.net import free_port
from tests.support.pki import TLSMaterial
from tests.support.registry import TLSFiles

# A short review deadline so that the registry-down cases end quickly.
DEADLINE = 2.0
# Python start-up is not in play (the server is already up), but a busy CI runner is.
SLACK = 1.0
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0


Metrics = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Webhook:
    """A running ``imagecheck serve`` and an HTTPS client that trusts its certificate."""

    def __init__(
        self, process: subprocess.Popen[bytes], port: int, stderr: Path, trust: Path
    ) -> None:
        self.process = process
        self.port = port
        self.stderr = stderr
        self.client = self.new_client(trust)

    def new_client(self, trust: Path) -> httpx.Client:
        """A client (keep-alive) that trusts the CA in ``trust``."""
        return httpx.Client(
            base_url=f"https://127.0.0.1:{self.port}",
            verify=ssl.create_default_context(cafile=str(trust)),
            timeout=DEADLINE + 10,
            trust_env=False,
        )

    def post(self, content: bytes) -> httpx.Response:
        return self.client.post(
            "/validate", content=content, headers={"Content-Type": "application/json"}
        )

    def review(self, obj: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
        """Send one AdmissionReview about ``obj``; return its ``response`` after checking the
        envelope (HTTP 200, v1 AdmissionReview, ``uid`` echoed)."""
        body = admission_review(obj, **fields)
        answer = self.post(json.dumps(body).encode())
        assert answer.status_code == 200, answer.text
        return response_of(answer, body["request"]["uid"])

    def metrics(self) -> Metrics:
        page = self.client.get("/metrics")
        assert page.status_code == 200
        return parse_metrics(page.text)

    def log_lines(self) -> list[str]:
        return self.stderr.read_text(encoding="utf-8").splitlines()

    def logs(self) -> list[dict[str, Any]]:
        """Every stderr line, each parsed as JSON (a line that is not fails the test)."""
        entries = []
        for line in self.log_lines():
            try:
                entry = json.loads(line)
            except ValueError:
                pytest.fail(f"stderr line is not JSON: {line!r}")
            assert isinstance(entry, dict), line
            entries.append(entry)
        return entries

    def terminate(self) -> tuple[int, float]:
        """SIGTERM; the exit code and the seconds it took to exit."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)
            pytest.fail(f"imagecheck serve did not exit within {STOP_TIMEOUT}s of SIGTERM")
        return code, time.monotonic() - started

    def close(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.terminate()


def response_of(answer: httpx.Response, uid: str) -> dict[str, Any]:
    data = answer.json()
    assert data["apiVersion"] == ADMISSION_V1
    assert data["kind"] == "AdmissionReview"
    response: dict[str, Any] = data["response"]
    assert response["uid"] == uid
    return response


def start_webhook(
    workdir: Path, tls: TLSMaterial, *args: str, cert: TLSFiles | None = None
) -> Webhook:
    """``imagecheck serve`` on a free 127.0.0.1 port over TLS, once ``/readyz`` says 200.

    The port is picked by binding 0 and closing it, so another process may take it first;
    then the server exits with "address already in use" and we try a new port.
    """
    cert = cert or tls.server
    workdir.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        port = free_port()
        stderr = workdir / f"serve-{port}.log"
        argv = [
            sys.executable, "-m", "imagecheck", "serve",
            "--listen", f"127.0.0.1:{port}",
            "--tls-cert", str(cert.cert), "--tls-key", str(cert.key),
            "--ca-file", str(tls.ca_file),
            *args,
        ]  # fmt: skip
        with stderr.open("wb") as log:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=clean_env(workdir)
            )
        hook = Webhook(process, port, stderr, trust=tls.ca_file)
        if wait_ready(hook):
            return hook
        hook.close()
        if "address already in use" not in stderr.read_text(encoding="utf-8").lower():
            pytest.fail(f"imagecheck serve did not start:\n{stderr.read_text(encoding='utf-8')}")
    pytest.fail("no free port for imagecheck serve after 3 attempts")


def wait_ready(hook: Webhook) -> bool:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and hook.process.poll() is None:
        with contextlib.suppress(httpx.TransportError):
            if hook.client.get("/readyz").status_code == 200:
                return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def running(workdir: Path, tls: TLSMaterial, *args: str) -> Iterator[Webhook]:
    hook = start_webhook(workdir, tls, *args)
    try:
        yield hook
    finally:
        hook.close()


def parse_metrics(text: str) -> Metrics:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.get((name, frozenset(labels.items())), 0.0)
