"""Faults between imagecheck and a real registry: ``python -m imagecheck check`` as a
subprocess, against ``registry_plain`` behind a :class:`FaultProxy` that answers 5xx/429,
hangs, trickles, resets connections and strips headers on cue.

Each test asserts the exit code and JSON a user sees, and what the proxy *received*: how many
manifest requests (so how many tries), with which method, how far apart. Timing bounds are
generous (CI machines are slow) but each still separates "waited as asked" or "gave up at
once" from the opposite.
"""

from __future__ import annotations

import hashlib
import re
import socket
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.clirun import Run, run_cli
from tests.support.endpoint import RegistryEndpoint
from tests.support.faultproxy import (
    HTML_502_PAGE,
    FaultProxy,
    Forward,
    Handle,
    Hang,
    RandomFailures,
    Replace,
    Request,
    Reset,
    Respond,
    StripHeaders,
    Trickle,
    http_date,
)
from tests.support.images import push_image

# Over the fast paths and over stock httpx (conftest.fastpath_mode).
pytestmark = pytest.mark.usefixtures("fastpath_mode")

MANIFESTS = r"^/v2/.+/manifests/"
PING = r"^/v2/$"
APP = "sample/app:1.0.0"
MISSING = "sample/app:no-such-tag"
# Startup of a Python subprocess (imports, click) on a slow CI runner, on top of the deadline.
STARTUP_SLACK = 1.0


@dataclass(frozen=True)
class Timed:
    run: Run
    elapsed: float

    @property
    def code(self) -> int:
        return self.run.code

    def only(self) -> dict[str, Any]:
        [result] = self.run.json()
        return result


@pytest.fixture
def proxy(registry_plain: RegistryEndpoint) -> Iterator[FaultProxy]:
    with FaultProxy(registry_plain.url) as proxy:
        yield proxy
    assert proxy.errors == [], "the fault proxy itself failed"


def check(proxy: FaultProxy, home: Path, *names: str, args: tuple[str, ...] = ()) -> Timed:
    started = time.monotonic()
    run = run_cli(["check", "--output", "json", *args, *(proxy.ref(n) for n in names)], home)
    return Timed(run, time.monotonic() - started)


def assert_readable(message: str) -> None:
    """One line of prose: no markup, no JSON, no traceback."""
    assert message
    assert "\n" not in message
    assert not re.search(r"[<>{}]", message), message
    assert "Traceback" not in message
    assert len(message) < 400, message


def answer_get_with(proxy: FaultProxy, answer: Respond) -> None:
    """HEAD answers 405 and GET ``answer``: error bodies only travel on GET (a HEAD answer
    has none), so this is how a client gets to read one."""
    proxy.on("HEAD", MANIFESTS, Respond(405))
    proxy.on("GET", MANIFESTS, answer)


def journalled(proxy: FaultProxy, path: str) -> list[int | None]:
    """The statuses of ``path``'s exchanges, once the last is journalled: the proxy journals
    an answer's status after sending it, and the client may have read it and exited first."""
    deadline = time.monotonic() + 5
    while proxy.exchanges(path=path)[-1].status is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return [e.status for e in proxy.exchanges(path=path)]


# -- transient answers are retried ---------------------------------------------------------


@pytest.mark.parametrize("failures", [1, 3])
def test_503s_then_success_is_found(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path, failures: int
) -> None:
    unavailable = Respond.oci(503, "UNAVAILABLE", "service unavailable")
    proxy.on("HEAD", MANIFESTS, unavailable, times=failures)

    timed = check(proxy, tmp_path, APP, args=("--retries", "3"))

    assert timed.code == 0, timed.run.stderr
    result = timed.only()
    assert result["status"] == "found"
    assert result["digest"] == registry_plain.images[APP].digest
    assert proxy.count(path=MANIFESTS) == failures + 1
    assert journalled(proxy, MANIFESTS) == [503] * failures + [200]
    assert proxy.count(path=PING) == 1


def test_more_503s_than_retries_is_error(proxy: FaultProxy, tmp_path: Path) -> None:
    proxy.on("HEAD", MANIFESTS, Respond.oci(503, "UNAVAILABLE", "service unavailable"))

    timed = check(proxy, tmp_path, APP, args=("--retries", "2"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    assert result["status"] == "error"
    assert "503" in result["message"]
    assert proxy.count(path=MANIFESTS) == 3  # one try and two retries, no more


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_waited_for(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path, status: int
) -> None:
    limited = Respond.oci(status, "TOOMANYREQUESTS", "slow down", **{"Retry-After": "1"})
    proxy.on("HEAD", MANIFESTS, limited, times=1)

    timed = check(proxy, tmp_path, APP)

    assert timed.code == 0, timed.run.stderr
    assert timed.only()["digest"] == registry_plain.images[APP].digest
    first, second = proxy.exchanges(path=MANIFESTS)
    assert (first.status, second.status) == (status, 200)
    # Retry-After (1 s) is longer than the first backoff (0.25-0.5 s), so it rules.
    assert 1.0 <= second.at - first.at < 3.0
    assert timed.elapsed >= 1.0


@pytest.mark.parametrize("form", ["delay-seconds", "http-date"])
def test_retry_after_past_deadline_fails_at_once(
    proxy: FaultProxy, tmp_path: Path, form: str
) -> None:
    value = "120" if form == "delay-seconds" else http_date(120)
    proxy.on("HEAD", MANIFESTS, Respond(429, {"Retry-After": value}))

    timed = check(proxy, tmp_path, APP, args=("--deadline", "5"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    # At once, not at the 5 s deadline (nor after sleeping 120 s).
    assert result["elapsed_ms"] < 1500
    assert timed.elapsed < 1.5 + STARTUP_SLACK
    message = result["message"]
    assert result["status"] == "error"
    # Names the wait the registry asked for (an HTTP-date counts down while we start up).
    asked = re.search(r"\b(\d+)s\b", message)
    assert asked is not None, message
    assert 110 <= int(asked.group(1)) <= 120, message
    assert "deadline" in message
    assert "429" in message
    assert proxy.count(path=MANIFESTS) == 1


def test_ping_503_is_retried(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    proxy.on("GET", PING, Respond(503), times=2)

    timed = check(proxy, tmp_path, APP)

    assert timed.code == 0, timed.run.stdout
    assert timed.only()["digest"] == registry_plain.images[APP].digest
    assert [e.status for e in proxy.exchanges(path=PING)] == [503, 503, 200]
    assert proxy.count(path=MANIFESTS) == 1


# -- no answer, slow answers, broken answers ------------------------------------------------


def test_hang_times_out_within_deadline(proxy: FaultProxy, tmp_path: Path) -> None:
    proxy.on("HEAD", MANIFESTS, Hang())

    timed = check(proxy, tmp_path, APP, args=("--timeout", "1", "--deadline", "3"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    assert result["elapsed_ms"] <= (3 + 1) * 1000
    assert timed.elapsed <= 3 + 1 + STARTUP_SLACK
    assert result["status"] == "error"
    # Either the last try's own timeout, or the deadline that cut the last try short.
    message = result["message"]
    assert re.search(r"timed out|did not answer within|deadline exceeded", message), message
    assert_readable(result["message"])
    assert proxy.count(path=MANIFESTS) >= 2  # a timeout is retried


def test_trickled_answer_is_bounded_by_timeout(proxy: FaultProxy, tmp_path: Path) -> None:
    # One byte every 0.2 s: no single read waits long enough for a read timeout, so only a
    # per-attempt timeout stops it (the whole answer would take ~1 min).
    proxy.on("HEAD", MANIFESTS, Trickle(interval=0.2, chunk=1))

    timed = check(proxy, tmp_path, APP, args=("--timeout", "1", "--deadline", "3"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    assert result["elapsed_ms"] <= (3 + 1) * 1000
    assert timed.elapsed <= 3 + 1 + STARTUP_SLACK
    assert result["status"] == "error"
    message = result["message"]
    assert re.search(r"timed out|did not answer within|deadline exceeded", message), message
    assert_readable(message)


def test_slow_but_timely_answer_is_found(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    # ~300 bytes in 16-byte pieces every 20 ms: about 0.4 s, well inside --timeout 5.
    proxy.on("HEAD", MANIFESTS, Trickle(interval=0.02, chunk=16))

    timed = check(proxy, tmp_path, APP, args=("--timeout", "5"))

    assert timed.code == 0, timed.run.stdout
    assert timed.only()["digest"] == registry_plain.images[APP].digest
    assert journalled(proxy, MANIFESTS) == [200]


RESETS = {
    "rst-before-status": Reset(b""),
    "rst-mid-status-line": Reset(b"HTTP/1.1 20"),
    "rst-mid-headers": Reset(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci"),
    "fin-mid-headers": Reset(b"HTTP/1.1 200 OK\r\nDocker-Content-", rst=False),
}


@pytest.mark.parametrize("reset", RESETS.values(), ids=RESETS.keys())
def test_reset_once_is_retried(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path, reset: Reset
) -> None:
    proxy.on("HEAD", MANIFESTS, reset, times=1)

    timed = check(proxy, tmp_path, APP)

    assert timed.code == 0, timed.run.stdout
    assert timed.only()["digest"] == registry_plain.images[APP].digest
    assert [e.action for e in proxy.exchanges(path=MANIFESTS)] == [
        "reset" if reset.rst else "close",
        "forward",
    ]


def test_reset_mid_body_is_retried(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    """A GET whose manifest body is cut short: never a found with a truncated digest."""
    pushed = registry_plain.images[APP]
    truncated = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {pushed.media_type}\r\n"
        f'Content-Length: {pushed.size}\r\n\r\n{{"schemaVersion": 2,'
    ).encode()
    proxy.on("HEAD", MANIFESTS, Respond(405))
    proxy.on("GET", MANIFESTS, Reset(truncated), times=1)

    timed = check(proxy, tmp_path, APP)

    assert timed.code == 0, timed.run.stdout
    assert timed.only()["digest"] == pushed.digest
    assert [e.method for e in proxy.exchanges(path=MANIFESTS)] == ["HEAD", "GET", "HEAD", "GET"]


def test_reset_always_is_error(proxy: FaultProxy, tmp_path: Path) -> None:
    proxy.on("HEAD", MANIFESTS, Reset())

    timed = check(proxy, tmp_path, APP, args=("--retries", "2"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    assert result["status"] == "error"
    assert proxy.host in result["message"]  # names the registry
    assert_readable(result["message"])
    assert proxy.count(path=MANIFESTS) == 3


def test_html_502_page_is_not_dumped(proxy: FaultProxy, tmp_path: Path) -> None:
    page = Respond(502, {"Content-Type": "text/html"}, HTML_502_PAGE)
    answer_get_with(proxy, page)

    timed = check(proxy, tmp_path, APP, args=("--retries", "1"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    assert result["status"] == "error"
    assert "502" in result["message"]
    assert "nginx" not in result["message"]
    assert_readable(result["message"])
    assert [e.method for e in proxy.exchanges(path=MANIFESTS)] == ["HEAD", "GET"] * 2


UNREADABLE_500 = {
    "empty": b"",
    "json-without-errors": b'{"message": "internal error", "status": 500}',
    "errors-not-a-list": b'{"errors": "database is down"}',
    "errors-empty": b'{"errors": []}',
    "plain-text": b"upstream connect error or disconnect/reset before headers\n",
}


@pytest.mark.parametrize("body", UNREADABLE_500.values(), ids=UNREADABLE_500.keys())
def test_500_without_oci_errors_is_readable(proxy: FaultProxy, tmp_path: Path, body: bytes) -> None:
    answer_get_with(proxy, Respond(500, {"Content-Type": "application/json"}, body))

    timed = check(proxy, tmp_path, APP, args=("--retries", "1"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    assert result["status"] == "error"
    assert "500" in result["message"]
    assert_readable(result["message"])
    assert [e.method for e in proxy.exchanges(path=MANIFESTS)] == ["HEAD", "GET"] * 2


def test_500_with_oci_errors_gives_their_message(proxy: FaultProxy, tmp_path: Path) -> None:
    answer_get_with(proxy, Respond.oci(500, "UNKNOWN", "storage backend unreachable"))

    timed = check(proxy, tmp_path, APP, args=("--retries", "0"))

    assert timed.code == 4, timed.run.stdout
    message = timed.only()["message"]
    assert "500" in message
    assert "storage backend unreachable" in message
    assert_readable(message)


def test_json_output_for_an_error(proxy: FaultProxy, tmp_path: Path) -> None:
    proxy.on(None, MANIFESTS, Respond(503))

    timed = check(proxy, tmp_path, APP, args=("--retries", "0"))

    assert timed.code == 4
    result = timed.only()
    assert result["status"] == "error"
    assert isinstance(result["message"], str)
    assert result["message"]
    assert result["image"] == proxy.ref(APP)
    assert result["digest"] is None


# -- HEAD quirks ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sample/app:1.0.0", "sample/app:docker", "sample/app:multi"])
def test_head_405_falls_back_to_get(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path, name: str
) -> None:
    proxy.on("HEAD", MANIFESTS, Respond(405))

    timed = check(proxy, tmp_path, name)

    assert timed.code == 0, timed.run.stdout
    result = timed.only()
    pushed = registry_plain.images[name]
    assert (result["digest"], result["media_type"]) == (pushed.digest, pushed.media_type)
    assert [(e.method, e.status) for e in proxy.exchanges(path=MANIFESTS)] == [
        ("HEAD", 405),
        ("GET", 200),
    ]


def test_head_without_digest_header_tag_is_found(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    proxy.on("HEAD", MANIFESTS, StripHeaders(("Docker-Content-Digest",)))

    timed = check(proxy, tmp_path, APP)

    assert timed.code == 0, timed.run.stdout
    result = timed.only()
    assert result["status"] == "found"
    # No digest is better than a wrong one; a client that GETs to learn it may report it.
    assert result["digest"] in (None, registry_plain.images[APP].digest)


@pytest.mark.parametrize("strip_on", ["HEAD", None], ids=["head-only", "head-and-get"])
def test_head_without_digest_header_pin_gets_and_verifies(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path, strip_on: str | None
) -> None:
    digest = registry_plain.images[APP].digest
    proxy.on(strip_on, MANIFESTS, StripHeaders(("Docker-Content-Digest",)))

    timed = check(proxy, tmp_path, f"sample/app@{digest}")

    assert timed.code == 0, timed.run.stdout
    assert timed.only()["digest"] == digest  # from the header, or the body's own hash
    assert [e.method for e in proxy.exchanges(path=MANIFESTS)] == ["HEAD", "GET"]


OTHER_MANIFEST = b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json"}'
OTHER_DIGEST = "sha256:" + hashlib.sha256(OTHER_MANIFEST).hexdigest()


@pytest.mark.parametrize("served_by", ["get-body", "head-header"])
def test_pin_answered_with_another_digest_is_not_found(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path, served_by: str
) -> None:
    """A proxy (or cache) that serves another manifest for a digest: an error, never
    *found*."""
    pushed = registry_plain.images[APP]
    assert pushed.digest != OTHER_DIGEST
    if served_by == "get-body":
        answer_get_with(proxy, Respond(200, {"Content-Type": pushed.media_type}, OTHER_MANIFEST))
    else:
        headers = {"Content-Type": pushed.media_type, "Docker-Content-Digest": OTHER_DIGEST}
        proxy.on("HEAD", MANIFESTS, Respond(200, headers, OTHER_MANIFEST))

    timed = check(proxy, tmp_path, f"sample/app@{pushed.digest}", args=("--retries", "0"))

    assert timed.code == 4, timed.run.stdout
    result = timed.only()
    assert result["status"] == "error"
    assert pushed.digest in result["message"]
    assert OTHER_DIGEST in result["message"]


# -- answers are final ----------------------------------------------------------------------


def test_404_after_503_storm_is_missing(proxy: FaultProxy, tmp_path: Path) -> None:
    proxy.on("HEAD", MANIFESTS, Respond(503), times=3)

    timed = check(proxy, tmp_path, MISSING, args=("--retries", "5"))

    assert timed.code == 1, timed.run.stdout
    assert timed.only()["status"] == "missing"
    assert journalled(proxy, MANIFESTS) == [503, 503, 503, 404]


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (401, "UNAUTHORIZED", ("denied", 3)),
        (403, "DENIED", ("denied", 3)),
        (404, "MANIFEST_UNKNOWN", ("missing", 1)),
    ],
)
def test_4xx_answers_are_never_retried(
    proxy: FaultProxy,
    tmp_path: Path,
    status: int,
    code: str,
    expected: tuple[str, int],
) -> None:
    proxy.on(None, MANIFESTS, Respond.oci(status, code, "no"))

    timed = check(proxy, tmp_path, APP, args=("--retries", "5"))

    assert (timed.only()["status"], timed.code) == expected
    assert proxy.count(path=MANIFESTS) == 1


def test_401_basic_challenge_without_credentials_is_asked_once(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    # Registries that leave /v2/ open and challenge only on repositories (auth.py says so).
    challenge = {"WWW-Authenticate": 'Basic realm="registry"'}
    proxy.on(
        None, MANIFESTS, Respond.oci(401, "UNAUTHORIZED", "authentication required", **challenge)
    )

    timed = check(proxy, tmp_path, APP, args=("--retries", "5"))

    assert (timed.only()["status"], timed.code) == ("denied", 3)
    assert proxy.count(path=MANIFESTS) == 1


def test_unreachable_token_realm_is_named(proxy: FaultProxy, tmp_path: Path) -> None:
    with socket.socket() as dead:  # bound, not listening: connections are refused
        dead.bind(("127.0.0.1", 0))
        realm = f"127.0.0.1:{dead.getsockname()[1]}"
        challenge = f'Bearer realm="http://{realm}/token",service="registry"'
        proxy.on(None, MANIFESTS, Respond(401, {"WWW-Authenticate": challenge}))

        timed = check(proxy, tmp_path, APP, args=("--retries", "0"))

    assert timed.code == 4, timed.run.stdout
    message = timed.only()["message"]
    assert realm in message, message
    assert proxy.host not in message, message


# -- the proxy itself ---------------------------------------------------------------------

NOWHERE = "http://127.0.0.1:9"  # upstream for proxy tests that never forward
HEAD_REQUEST = b"HEAD /v2/x/manifests/1 HTTP/1.1\r\nHost: test\r\n\r\n"


def read_all(sock: socket.socket) -> tuple[bytes, type[OSError] | None]:
    """Everything the peer sent until EOF, and the error that ended it (``None``: EOF)."""
    received = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except OSError as exc:
            return received, type(exc)
        if not chunk:
            return received, None
        received += chunk


@pytest.mark.parametrize("rst", [True, False], ids=["rst", "fin"])
def test_proxy_reset_sends_part_then_drops(rst: bool) -> None:
    partial = b"HTTP/1.1 200 OK\r\nContent-"
    with FaultProxy(NOWHERE) as proxy:
        proxy.on("HEAD", MANIFESTS, Reset(partial, rst=rst))
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(HEAD_REQUEST)
            received, error = read_all(sock)
    assert partial.startswith(received)
    assert error is (ConnectionResetError if rst else None)
    assert [(e.method, e.action, e.status) for e in proxy.exchanges()] == [
        ("HEAD", "reset" if rst else "close", None)
    ]


def test_proxy_close_ends_a_hang_promptly() -> None:
    proxy = FaultProxy(NOWHERE).start()
    try:
        proxy.on(None, "", Hang())
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(HEAD_REQUEST)
            deadline = time.monotonic() + 5
            while proxy.count() == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert [e.action for e in proxy.exchanges()] == ["hang"]
            started = time.monotonic()
            proxy.close()
            assert time.monotonic() - started < 1.0
            received, _ = read_all(sock)
            assert received == b""  # never answered
    finally:
        proxy.close()


def test_proxy_answers_tls_with_400_at_once() -> None:
    with (
        FaultProxy(NOWHERE) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock,
    ):
        sock.sendall(bytes([0x16, 0x03, 0x01, 0x00, 0x05]) + b"hello")
        received, _ = read_all(sock)
    assert received.startswith(b"HTTP/1.0 400 ")
    assert [e.method for e in proxy.exchanges()] == ["TLS"]


def test_handle_decides_from_the_whole_request(registry_plain: RegistryEndpoint) -> None:
    """A Handle sees method, path, query, headers and form body, and picks the action."""
    seen: list[tuple[str, str, dict[str, list[str]], str | None, dict[str, list[str]]]] = []

    def decide(request: Request) -> Forward | Respond:
        seen.append(
            (request.method, request.path, request.query, request.header("X-Key"), request.form)
        )
        if request.header("X-Key") == "open":
            return Forward()
        return Respond(401, {"WWW-Authenticate": 'Basic realm="test"'})

    with FaultProxy(registry_plain.url) as proxy, httpx.Client(timeout=5) as client:
        proxy.on(None, "", Handle(decide))
        shut = client.head(f"{proxy.url}/v2/sample/app/manifests/1.0.0?n=1")
        opened = client.get(f"{proxy.url}/v2/", headers={"X-Key": "open"})
        posted = client.post(f"{proxy.url}/token", data={"grant_type": "password", "a": "b+c"})
    assert (shut.status_code, opened.status_code, posted.status_code) == (401, 200, 401)
    assert seen == [
        ("HEAD", "/v2/sample/app/manifests/1.0.0", {"n": ["1"]}, None, {}),
        ("GET", "/v2/", {}, "open", {}),
        ("POST", "/token", {}, None, {"grant_type": ["password"], "a": ["b+c"]}),
    ]
    assert [e.action for e in proxy.exchanges()] == ["respond 401", "forward", "respond 401"]
    assert proxy.errors == []


def test_handle_that_raises_is_a_500_and_a_recorded_error() -> None:
    def decide(request: Request) -> Respond:
        raise RuntimeError("handler bug")

    with FaultProxy(NOWHERE) as proxy, httpx.Client(timeout=5) as client:
        proxy.on(None, "", Handle(decide))
        answer = client.get(f"{proxy.url}/v2/")
        assert answer.status_code == 500
        assert [str(e) for e in proxy.errors] == ["handler bug"]
        proxy.errors.clear()


def test_replace_answers_otherwise_for_the_named_statuses(
    registry_plain: RegistryEndpoint,
) -> None:
    instead = Respond.oci(403, "DENIED", "forbidden for a missing tag")
    with FaultProxy(registry_plain.url) as proxy, httpx.Client(timeout=5) as client:
        proxy.on(None, MANIFESTS, Replace({404: instead}))
        missing = client.get(proxy.url + "/v2/sample/app/manifests/no-such-tag")
        found = client.get(
            proxy.url + "/v2/sample/app/manifests/1.0.0",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        )
    assert missing.status_code == 403
    assert missing.json()["errors"][0]["code"] == "DENIED"
    assert found.status_code == 200
    assert found.headers["Docker-Content-Digest"] == registry_plain.images[APP].digest
    assert [e.action for e in proxy.exchanges()] == ["replace 404", "replace 404"]


def test_random_failures_are_seeded_per_request() -> None:
    def fates(seed: int) -> list[str]:
        chaos = RandomFailures(0.2, seed)
        return [type(chaos.pick("HEAD", f"/v2/a/manifests/{i % 50}")).__name__ for i in range(5000)]

    first = fates(1)
    assert first == fates(1)  # reproducible
    assert first != fates(2)  # and the seed matters
    assert 0.18 < (len(first) - first.count("Forward")) / len(first) < 0.22


# -- soak -----------------------------------------------------------------------------------

SOAK_SEED = 20240611
SOAK_LANES = 4  # each its own proxy (and seed), runs in sequence; lanes run side by side
SOAK_RUNS_PER_LANE = 5
SOAK_BATCH = 100  # per run: 40 present tags, 10 present digests, 40 missing tags, 10 digests
SOAK_DEADLINE = 20.0
SOAK_ARGS = ("--retries", "5", "--deadline", str(SOAK_DEADLINE), "--timeout", "5")


@pytest.fixture(scope="module")
def soak_images(registry_plain: RegistryEndpoint) -> dict[str, str]:
    """100 distinct present images, name -> digest: 80 tags in a repository of this module's
    own, and 20 of them pinned by digest."""
    present: dict[str, str] = {}
    with httpx.Client(timeout=10.0, trust_env=False) as client:
        for i in range(80):
            annotations = {"soak.index": str(i)}
            pushed = push_image(
                client, registry_plain.url, "soak/app", f"v{i}", annotations=annotations
            )
            present[f"soak/app:v{i}"] = pushed.digest
            if i % 4 == 0:
                present[f"soak/app@{pushed.digest}"] = pushed.digest
    return present


def soak_batch(present: dict[str, str], run: int) -> dict[str, str | None]:
    """Image -> expected digest (``None``: missing) for one run, distinct within it."""
    tags = [n for n in present if "@" not in n]
    pins = [n for n in present if "@" in n]
    batch: dict[str, str | None] = {}
    for i in range(40):
        name = tags[(run * 40 + i) % len(tags)]
        batch[name] = present[name]
    for i in range(10):
        name = pins[(run * 10 + i) % len(pins)]
        batch[name] = present[name]
    for i in range(40):
        batch[f"soak/app:gone-{run}-{i}"] = None
    for i in range(10):
        fake = hashlib.sha256(f"gone {run} {i}".encode()).hexdigest()
        batch[f"soak/app@sha256:{fake}"] = None
    assert len(batch) == SOAK_BATCH
    return batch


@dataclass
class SoakLane:
    """What one lane saw: outcome counts (``present->found`` ...), wrong answers, errors."""

    outcomes: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)
    slowest_ms: float = 0.0


def soak_lane(
    upstream: RegistryEndpoint, present: dict[str, str], lane: int, home: Path
) -> SoakLane:
    """Runs in sequence through one proxy of its own that fails 20 % of every request
    (pings included) with a 503, a reset mid-headers or a reset before any byte."""
    report = SoakLane()
    failures = (Respond(503), Reset(), Reset(b""))
    with FaultProxy(upstream.url) as proxy:
        proxy.on(None, r"^/v2/", RandomFailures(0.2, SOAK_SEED + lane, failures))
        for i in range(SOAK_RUNS_PER_LANE):
            run = lane * SOAK_RUNS_PER_LANE + i
            batch = soak_batch(present, run)
            timed = check(proxy, home, *batch, args=SOAK_ARGS)
            assert timed.code in (0, 1, 4), timed.run.stderr
            report.run_seconds.append(timed.elapsed)
            results = timed.run.json()
            for (name, digest), result in zip(batch.items(), results, strict=True):
                assert result["image"] == proxy.ref(name)
                status = result["status"]
                report.outcomes[f"{'present' if digest else 'missing'}->{status}"] += 1
                report.slowest_ms = max(report.slowest_ms, result["elapsed_ms"])
                expected = ("found", digest) if digest else ("missing", None)
                if status == "error":
                    report.errors.append(f"{name}: {result['message']}")
                elif (status, result["digest"]) != expected:
                    report.wrong.append(f"{name}: {status} {result['digest']} {result['message']}")
        report.actions.update(e.action for e in proxy.exchanges())
    assert proxy.errors == [], "the fault proxy itself failed"
    return report


def test_soak_2000_checks_with_20_percent_random_failures(
    registry_plain: RegistryEndpoint, soak_images: dict[str, str], tmp_path: Path
) -> None:
    """2,000 checks: 4 lanes side by side, each 5 CLI runs of 100 images in sequence through
    its own seeded proxy. Every answer is right or an error, never the wrong answer (found
    for missing, missing for present, another digest), and nothing outlives the deadline.

    Deterministic: a lane's runs are sequential and its proxy decides each request from
    (seed, method, path, n-th time), so the same requests fail on every run of the test."""
    started = time.monotonic()
    with ThreadPoolExecutor(SOAK_LANES) as pool:
        lanes = list(
            pool.map(
                lambda lane: soak_lane(registry_plain, soak_images, lane, tmp_path),
                range(SOAK_LANES),
            )
        )
    took = time.monotonic() - started
    outcomes = sum((lane.outcomes for lane in lanes), Counter[str]())
    actions = sum((lane.actions for lane in lanes), Counter[str]())
    errors = [e for lane in lanes for e in lane.errors]
    runs = sorted(t for lane in lanes for t in lane.run_seconds)
    slowest = max(lane.slowest_ms for lane in lanes)
    print(
        f"\nsoak: {outcomes.total()} checks in {took:.1f}s"
        f"\nsoak: outcomes {dict(sorted(outcomes.items()))}"
        f"\nsoak: proxy actions {dict(sorted(actions.items()))}"
        f"\nsoak: runs {runs[0]:.1f}-{runs[-1]:.1f}s (median {runs[len(runs) // 2]:.1f}s), "
        f"slowest check {slowest:.0f} ms" + "".join(f"\nsoak: error {e}" for e in errors)
    )
    assert [w for lane in lanes for w in lane.wrong] == []
    assert outcomes.total() == SOAK_LANES * SOAK_RUNS_PER_LANE * SOAK_BATCH
    assert slowest <= SOAK_DEADLINE * 1000
    assert runs[-1] < SOAK_DEADLINE + STARTUP_SLACK
    # 20 % of requests fail, but five retries leave a check failing only when six tries in a
    # row do (p ~ 0.2**6): many errors would mean retries are not happening.
    assert len(errors) <= 20
