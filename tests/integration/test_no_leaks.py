"""No request goes where it must not, and no secret or forged line comes out (issue #10,
sections 3 and 4): the real CLI as a subprocess, against the real registry (behind a
:class:`FaultProxy` that plays the hostile registry) and the real token server.

Safe even when the guard is gone: every run has ``HTTP_PROXY``/``HTTPS_PROXY`` pointing at
:class:`Trap`, a recording proxy on 127.0.0.1, and ``NO_PROXY`` for loopback only. httpx sends
every non-loopback request (169.254.169.254, ``metadata.google.internal``, in any spelling) to
the trap, as ``GET http://host/...`` or ``CONNECT host:443``, so nothing leaves the machine and
no name is resolved here: the proxy would resolve it, and the trap never does. The trap
answers like a metadata service would, so a missing guard shows as a request in its log.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.clirun import Run, run_cli, tls_args
from tests.support.endpoint import RegistryEndpoint
from tests.support.faultproxy import FaultProxy, Respond
from tests.support.tokenserver import TokenServer

MANIFESTS = r"^/v2/.+/manifests/"
IMAGE = "sample/app:1.0.0"
METADATA_ANSWER = '{"token": "METADATA-CREDENTIAL", "access_token": "METADATA-CREDENTIAL"}'


class Trap:
    """An HTTP proxy on 127.0.0.1 that forwards nothing: it records each request line and
    answers as a metadata service would (200, a JSON "token")."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        lock = threading.Lock()
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                with lock:
                    seen.append(f"{self.command} {self.path}")

            def do_GET(self) -> None:
                self._record()
                body = METADATA_ANSWER.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Docker-Content-Digest", "sha256:" + "0" * 64)
                self.end_headers()
                self.wfile.write(body)

            def do_HEAD(self) -> None:
                self._record()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.send_header("Docker-Content-Digest", "sha256:" + "0" * 64)
                self.end_headers()

            def do_CONNECT(self) -> None:
                self._record()
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def env(self) -> dict[str, str]:
        """Every non-loopback request through the trap (both spellings: lower case wins)."""
        url = f"http://127.0.0.1:{self._server.server_address[1]}"
        env = {"NO_PROXY": "127.0.0.1,localhost,::1"}
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            env[name] = url
        return env | {k.lower(): v for k, v in env.items()}

    def __enter__(self) -> Trap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def trap() -> Iterator[Trap]:
    with Trap() as trap:
        yield trap


@pytest.fixture
def proxy(registry_plain: RegistryEndpoint) -> Iterator[FaultProxy]:
    with FaultProxy(registry_plain.url) as proxy:
        yield proxy
    assert proxy.errors == [], "the fault proxy itself failed"


def check(ref: str, home: Path, trap: Trap, *args: str, env: dict[str, str] | None = None) -> Run:
    log = home / "termination-log"
    log.write_text("")  # written only when it exists, as /dev/termination-log does in a pod
    return run_cli(
        ["check", "--termination-log", str(log), "--retries", "3", *args, ref],
        home,
        env=trap.env | (env or {}),
    )


def redirect(location: str) -> Respond:
    return Respond(302, {"Location": location})


def bearer_challenge(proxy: FaultProxy, realm: str) -> None:
    proxy.on(
        "GET",
        r"^/v2/$",
        Respond(401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="registry"'}),
    )


def assert_refused(run: Run, trap: Trap, words: str = "refusing to send a request to") -> None:
    assert run.code == 4, run.stdout + run.stderr
    assert words in run.stdout
    assert trap.seen == []  # nothing was sent anywhere but the registry
    assert "METADATA-CREDENTIAL" not in run.stdout + run.stderr


# -- section 3: every hop is checked -----------------------------------------------------------

METADATA_URLS = [
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://[::ffff:169.254.169.254]/latest/meta-data/",
    "http://0xa9fea9fe/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/instance/",
]
METADATA_IDS = ["imds", "mapped-ipv6", "hex", "gcp-name"]


@pytest.mark.parametrize("location", METADATA_URLS, ids=METADATA_IDS)
def test_manifest_redirect_to_metadata_is_refused(
    proxy: FaultProxy, trap: Trap, tmp_path: Path, location: str
) -> None:
    proxy.on("HEAD", MANIFESTS, redirect(location))
    run = check(proxy.ref(IMAGE), tmp_path, trap)
    assert_refused(run, trap)
    assert proxy.count("HEAD", MANIFESTS) == 1  # refused once, not retried


@pytest.mark.parametrize("location", METADATA_URLS[:2], ids=METADATA_IDS[:2])
def test_ping_redirect_to_metadata_is_refused(
    proxy: FaultProxy, trap: Trap, tmp_path: Path, location: str
) -> None:
    proxy.on("GET", r"^/v2/$", redirect(location))
    assert_refused(check(proxy.ref(IMAGE), tmp_path, trap), trap)


@pytest.mark.parametrize("location", METADATA_URLS, ids=METADATA_IDS)
def test_token_realm_redirect_to_metadata_is_refused(
    proxy: FaultProxy, trap: Trap, tmp_path: Path, location: str
) -> None:
    """The realm is the registry's own host; its answer is a redirect to the metadata
    service, whose JSON would otherwise come back as the Bearer token."""
    bearer_challenge(proxy, f"{proxy.url}/token")
    proxy.on("GET", r"^/token$", redirect(location))
    run = check(proxy.ref(IMAGE), tmp_path, trap)
    assert_refused(run, trap)
    assert proxy.count("GET", r"^/token$") == 1
    assert proxy.count("HEAD", MANIFESTS) == 0


def test_realm_on_a_metadata_name_is_refused_unresolved(
    proxy: FaultProxy, trap: Trap, tmp_path: Path
) -> None:
    realm = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/x/token"
    bearer_challenge(proxy, realm)
    run = check(proxy.ref(IMAGE), tmp_path, trap)
    assert_refused(run, trap, "refusing token realm")
    assert "a cloud metadata service name" in run.stdout


def test_redirect_to_a_file_url_is_a_protocol_error_not_retried(
    proxy: FaultProxy, trap: Trap, tmp_path: Path
) -> None:
    proxy.on("HEAD", MANIFESTS, redirect("file:///etc/passwd"))
    run = check(proxy.ref(IMAGE), tmp_path, trap)
    assert_refused(run, trap, "refusing to follow a file: URL")
    assert proxy.count("HEAD", MANIFESTS) == 1  # a protocol error: no retry
    assert "root:" not in run.stdout


# -- section 4: no secret in any output --------------------------------------------------------


def outputs(run: Run, home: Path) -> str:
    return run.stdout + run.stderr + (home / "termination-log").read_text()


@pytest.mark.parametrize("output", ["text", "json"])
def test_token_ending_in_newline_is_refused_and_never_printed(
    registry_token: RegistryEndpoint,
    token_server: TokenServer,
    trap: Trap,
    tmp_path: Path,
    output: str,
) -> None:
    token_server.configure(token_suffix="\n")
    args = [*tls_args(registry_token), "--output", output]
    run = check(registry_token.ref(IMAGE), tmp_path, trap, *args)
    assert run.code == 4, run.stdout + run.stderr
    everything = outputs(run, tmp_path)
    assert "token service answered a token that contains whitespace" in everything
    assert "eyJ" not in everything  # no part of the JWT
    assert "Illegal header" not in everything
    assert len(token_server.requests) == 1  # a protocol error: not retried
    if output == "json":
        [result] = run.json()
        assert result["status"] == "error"
    else:
        assert len(run.stdout.splitlines()) == 1
    assert (tmp_path / "termination-log").read_text().count("\n") == 1


def test_registrytoken_with_a_newline_is_a_usage_error_never_printed(
    registry_token: RegistryEndpoint, trap: Trap, tmp_path: Path
) -> None:
    secret = "REGISTRY-TOKEN-SECRET"
    config = tmp_path / "docker" / "config.json"
    config.parent.mkdir()
    config.write_text(
        json.dumps({"auths": {registry_token.host: {"registrytoken": secret + "\n"}}})
    )
    before = registry_token.registry.request_count()
    run = check(
        registry_token.ref(IMAGE),
        tmp_path,
        trap,
        *tls_args(registry_token),
        env={"DOCKER_CONFIG": str(config.parent)},
    )
    assert run.code == 2, run.stdout + run.stderr
    [line] = run.stderr.splitlines()
    assert line == (
        f"imagecheck: error: {config} (auths.{registry_token.host}): the registrytoken "
        "contains whitespace or a control character (a trailing newline?)"
    )
    assert secret not in outputs(run, tmp_path)
    assert registry_token.registry.request_count() == before  # nothing was sent


def test_password_with_a_newline_from_the_environment_is_a_usage_error(
    registry_basic: RegistryEndpoint, trap: Trap, tmp_path: Path
) -> None:
    assert registry_basic.username is not None and registry_basic.password is not None
    env = {
        "IMAGECHECK_USERNAME": registry_basic.username,
        "IMAGECHECK_PASSWORD": registry_basic.password + "\n",
    }
    run = check(registry_basic.ref(IMAGE), tmp_path, trap, *tls_args(registry_basic), env=env)
    assert run.code == 2, run.stdout + run.stderr
    assert run.stderr == (
        "imagecheck: error: --username: the password contains a control character "
        "(a trailing newline?)\n"
    )


FORGED = "denied\n\x1b[32mfound    docker.io/library/evil:1  sha256:" + "0" * 64 + "\x1b[0m"


@pytest.mark.parametrize("output", ["text", "json"])
def test_registry_error_text_cannot_forge_an_output_line(
    proxy: FaultProxy, trap: Trap, tmp_path: Path, output: str
) -> None:
    proxy.on("HEAD", MANIFESTS, Respond(405))
    proxy.on("GET", MANIFESTS, Respond.oci(409, "DENIED", FORGED))
    run = check(proxy.ref(IMAGE), tmp_path, trap, "--output", output)
    assert run.code == 4, run.stdout + run.stderr
    log = (tmp_path / "termination-log").read_text()
    assert log.count("\n") == 1 and log.endswith("\n")
    for text in (run.stdout.rstrip("\n"), log.rstrip("\n")):
        assert "\x1b" not in text and "\r" not in text
    assert "denied??[32mfound    docker.io/library/evil:1" in log
    if output == "json":
        [result] = run.json()  # valid JSON, the message one printable line
        assert result["message"].endswith(
            "(DENIED: denied??[32mfound    docker.io/library/evil:1  sha256:" + "0" * 64 + "?[0m)"
        )
    else:
        [line] = run.stdout.splitlines()
        assert line.startswith(f"error    {proxy.ref(IMAGE)}  ")
