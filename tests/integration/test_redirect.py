"""Credentials go to the registry and nowhere else: a registry front that redirects a manifest
request to another local host (as registries redirect to blob stores and CDNs) must not see
``Authorization`` arrive at that other host."""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.clirun import run_cli

# Over the fast paths and over stock httpx (conftest.fastpath_mode).
pytestmark = pytest.mark.usefixtures("fastpath_mode")

DIGEST = "sha256:" + "ab" * 32
USER, PASSWORD = "bob", "front-door-password"


@dataclass
class Recorder:
    """Headers of every request a server received, by path."""

    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, method: str, path: str, headers: dict[str, str]) -> None:
        with self.lock:
            self.seen.append((method, path, headers))


@contextlib.contextmanager
def serve(host: str, handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def cdn() -> Iterator[tuple[str, Recorder]]:
    """The "other host": 127.0.0.2, answering any manifest request with 200."""
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            recorder.add("HEAD", self.path, {k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("Docker-Content-Digest", DIGEST)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Content-Length", "321")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serve("127.0.0.2", Handler) as server:
        yield f"127.0.0.2:{server.server_address[1]}", recorder


@pytest.fixture
def front(cdn: tuple[str, Recorder]) -> Iterator[tuple[str, Recorder]]:
    """The registry: Basic auth, and every manifest request redirected to the CDN."""
    cdn_host, _ = cdn
    recorder = Recorder()
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self, method: str) -> None:
            recorder.add(method, self.path, {k.lower(): v for k, v in self.headers.items()})
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="front"')
                self.send_header("Content-Length", "0")
            elif self.path == "/v2/":
                self.send_response(200)
                self.send_header("Content-Length", "0")
            else:
                self.send_response(307)
                self.send_header("Location", f"http://{cdn_host}/cdn{self.path}")
                self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self._handle("GET")

        def do_HEAD(self) -> None:
            self._handle("HEAD")

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serve("127.0.0.1", Handler) as server:
        yield f"127.0.0.1:{server.server_address[1]}", recorder


def test_authorization_is_not_forwarded_to_another_host(
    front: tuple[str, Recorder], cdn: tuple[str, Recorder], tmp_path: Path
) -> None:
    front_host, front_seen = front
    _, cdn_seen = cdn
    args = ["check", "--insecure-registry", front_host, "--username", USER, "--password-stdin"]
    run = run_cli([*args, f"{front_host}/team/app:1.0"], tmp_path, stdin=PASSWORD + "\n")
    assert run.code == 0, run.stdout + run.stderr
    assert DIGEST in run.stdout
    # The registry got the credentials on the manifest request ...
    manifest = [h for m, p, h in front_seen.seen if p.startswith("/v2/team/app/manifests/")]
    assert manifest
    assert manifest[-1]["authorization"].startswith("Basic ")
    # ... and the other host got the request, without them.
    assert [(m, p) for m, p, _ in cdn_seen.seen] == [("HEAD", "/cdn/v2/team/app/manifests/1.0")]
    assert all("authorization" not in h for _, _, h in cdn_seen.seen)
    assert PASSWORD not in run.stdout + run.stderr


def test_credentials_withheld_over_plain_http_unless_insecure(
    front: tuple[str, Recorder], tmp_path: Path
) -> None:
    """Loopback falls back to plain HTTP, but credentials need --insecure-registry to follow."""
    front_host, front_seen = front
    args = ["check", "--username", USER, "--password-stdin", f"{front_host}/team/app:1.0"]
    run = run_cli(args, tmp_path, stdin=PASSWORD + "\n")
    assert run.code == 3
    assert f"add --insecure-registry {front_host}" in run.stdout
    assert all("authorization" not in h for _, _, h in front_seen.seen)
